-- 0001 base: the legacy pub scheduler's tables (SQLite).
-- Times are TEXT in rowstate's canonical UTC form YYYY-MM-DDTHH:MM:SS.sssZ, so that text
-- comparison is time comparison; booleans are INTEGER 0/1. The DEFAULT of created_at is the
-- same canonical form (an addition: a row inserted without it still gets a true time).
-- SQLite enforces the REFERENCES only on connections with PRAGMA foreign_keys=ON.

CREATE TABLE pub_tenders (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    email TEXT NOT NULL,
    email_key TEXT NOT NULL UNIQUE,  -- lower(email): one tender per address, any case
    active INTEGER NOT NULL DEFAULT 1,
    max_shifts INTEGER NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE pub_schedule_runs (
    week_of TEXT NOT NULL PRIMARY KEY,  -- the Monday, ISO date
    status TEXT NOT NULL DEFAULT 'pending'
        CONSTRAINT pub_schedule_runs_status_check
        CHECK (status IN ('pending', 'approved', 'sent')),
    opened_at TEXT NULL,
    closed_at TEXT NULL,
    generated_at TEXT NULL,
    approved_at TEXT NULL,
    sent_at TEXT NULL,
    send_lease_at TEXT NULL,      -- the legacy single-purpose send lease (AD-12)
    send_lease_holder TEXT NULL,
    last_error TEXT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE pub_shifts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    week_of TEXT NOT NULL REFERENCES pub_schedule_runs (week_of),
    night TEXT NOT NULL,  -- ISO date the shift starts (local)
    label TEXT NOT NULL,
    starts_at TEXT NOT NULL,
    ends_at TEXT NOT NULL,
    slots INTEGER NOT NULL CHECK (slots >= 0),
    UNIQUE (week_of, starts_at)
);

CREATE TABLE pub_availability (
    week_of TEXT NOT NULL,
    tender_id INTEGER NOT NULL REFERENCES pub_tenders (id),
    max_shifts INTEGER NULL,
    submitted_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (week_of, tender_id)
);

CREATE TABLE pub_availability_shifts (
    week_of TEXT NOT NULL,
    tender_id INTEGER NOT NULL,
    shift_id INTEGER NOT NULL REFERENCES pub_shifts (id),
    PRIMARY KEY (week_of, tender_id, shift_id)
);

CREATE TABLE pub_assignments (
    week_of TEXT NOT NULL,
    shift_id INTEGER NOT NULL REFERENCES pub_shifts (id),
    tender_id INTEGER NOT NULL REFERENCES pub_tenders (id),
    assigned_at TEXT NOT NULL,
    approved_at TEXT NULL,
    PRIMARY KEY (shift_id, tender_id)
);

-- an addition: a week's roster and a tender's trailing history are read by week
CREATE INDEX idx_pub_assignments_week ON pub_assignments (week_of, tender_id);

CREATE TABLE pub_deliveries (
    week_of TEXT NOT NULL,
    tender_id INTEGER NOT NULL,
    email TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('in_flight', 'sent', 'failed')),
    lease_token BIGINT NULL,
    attempted_at TEXT NOT NULL,
    sent_at TEXT NULL,
    error TEXT NULL,
    PRIMARY KEY (week_of, tender_id)
);

CREATE TABLE pub_flags (
    name TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL,
    changed_at TEXT NOT NULL
);

CREATE TABLE pub_mail_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    week_of TEXT NULL,
    kind TEXT NOT NULL,
    recipient TEXT NOT NULL,
    subject TEXT NOT NULL,
    at TEXT NOT NULL
);

-- an addition: the admin lists what was sent for a week, newest first
CREATE INDEX idx_pub_mail_log_week ON pub_mail_log (week_of, id);
