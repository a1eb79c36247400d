-- 0044: the notices outbox (issue 19): every email that follows a move or a time (a cover
-- offered, taken or expired; a reminder) is first a row here, written in the unit of work
-- that decided it, then delivered by pubsched.notices.deliver (right away, and by every
-- tick for what is left). One row per (kind, about, recipient): "once per person per
-- thing" is this UNIQUE, not a read before a write. status as pub_deliveries' plus two:
-- pending (not yet tried) and dropped (no longer true when its turn came: an offer of a
-- cover already taken). recipient: 'operator' or 'tender:<id>'. claim_token fences the
-- finish of a claimed send to its claimer. Also: a tender may turn off the reminder before
-- each of their shifts (shift_reminders 0).

CREATE TABLE pub_notices (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    about TEXT NOT NULL,
    recipient TEXT NOT NULL,
    week_of TEXT NULL,
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'in_flight', 'sent', 'failed', 'dropped')),
    attempts INTEGER NOT NULL DEFAULT 0,
    claim_token BIGINT NULL,
    created_at TEXT NOT NULL,
    attempted_at TEXT NULL,
    sent_at TEXT NULL,
    error TEXT NULL,
    UNIQUE (kind, about, recipient)
);

-- the sender's "what is left to deliver" and a week's page's list
CREATE INDEX idx_pub_notices_todo ON pub_notices (status, id);
CREATE INDEX idx_pub_notices_week ON pub_notices (week_of, id);

ALTER TABLE pub_tenders ADD COLUMN shift_reminders INTEGER NOT NULL DEFAULT 1;
