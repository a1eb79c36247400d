-- 0049: mail as the pub's third machine (issue 28). Every email the app owes is a row of
-- pub_mail, bound through rowstate (pubsched.deliveries.machine: MAIL, OWED -> SENT |
-- REFUSED | UNKNOWN | DROPPED, REFUSED -> OWED on its retry_at, UNKNOWN -> OWED only by the
-- operator's resend). The machine's key is (kind, about, recipient): "once per person per
-- thing" is that UNIQUE (SQLite's rowid, id, is the primary key); id only keeps the order
-- the mail was owed in (a page's list). A send is claimed under the lease acting_* (its token fences the
-- finish); the moves write rowstate_events, which is the mail's history (by, note).
-- The notices outbox (0044) moves here, its rows mapped to the machine's states: pending
-- OWED, in_flight UNKNOWN (it may have arrived: never re-sent on its own), sent SENT,
-- failed REFUSED (retried at the next tick while tries are left), dropped DROPPED.

CREATE TABLE pub_mail (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    about TEXT NOT NULL,
    recipient TEXT NOT NULL,
    week_of TEXT NULL,
    state TEXT NOT NULL DEFAULT 'OWED'
        CHECK (state IN ('OWED', 'SENT', 'REFUSED', 'UNKNOWN', 'DROPPED')),
    version BIGINT NOT NULL DEFAULT 0,
    owed_at TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    retry_at TEXT NULL,
    sent_at TEXT NULL,
    error TEXT NULL,
    address TEXT NULL,
    subject TEXT NULL,
    acting_at TEXT NULL,
    acting_kind TEXT NULL,
    acting_token BIGINT NOT NULL DEFAULT 0,
    UNIQUE (kind, about, recipient)
);

INSERT INTO pub_mail (kind, about, recipient, week_of, state, owed_at, attempts, retry_at,
                      sent_at, error)
SELECT kind, about, recipient, week_of,
       CASE status WHEN 'pending' THEN 'OWED' WHEN 'in_flight' THEN 'UNKNOWN'
                   WHEN 'sent' THEN 'SENT' WHEN 'failed' THEN 'REFUSED' ELSE 'DROPPED' END,
       created_at, attempts,
       CASE WHEN status = 'failed' AND attempts < 5 THEN COALESCE(attempted_at, created_at)
       END,
       sent_at, error
FROM pub_notices ORDER BY id;

DROP TABLE pub_notices;

-- what is owed (the sender's list), a thing's mail (a cover's page), a week's
CREATE INDEX idx_pub_mail_owed ON pub_mail (state, id) WHERE state = 'OWED';
CREATE INDEX idx_pub_mail_about ON pub_mail (about, id);
CREATE INDEX idx_pub_mail_week ON pub_mail (week_of, id);
-- the binding's own: live leases, and the timed edge retry's due query
CREATE INDEX idx_pub_mail_lease ON pub_mail (acting_at) WHERE acting_at IS NOT NULL;
CREATE INDEX idx_pub_mail_retry_at ON pub_mail (state, retry_at) WHERE retry_at IS NOT NULL;
