-- 0045: cover requests (issue 19), the pub's second machine (pubsched.covers.machine:
-- COVER on pub_covers, OPEN -> TAKEN | CANCELLED | EXPIRED). Its columns are what
-- rowstate's binding COVERS needs (compare rowstate.schema.schema_sql, as 0036 did for the
-- runs), typed: id is the key people type (`cover take 3`), allocated by pubsched.covers
-- under a lock (never reused), not an identity; starts_at is the shift's start, the due
-- column of the timed edge "expire"; taken_by/taken_at/closed_at are stamped by the moves
-- at the business instant they act at. One OPEN request per (shift, asker) is the
-- binding's Unique invariant, a partial UNIQUE index. The events table exists since 0036.

CREATE TABLE pub_covers (
    id BIGINT NOT NULL PRIMARY KEY,
    week_of TEXT NOT NULL REFERENCES pub_schedule_runs (week_of),
    shift_id INTEGER NOT NULL REFERENCES pub_shifts (id),
    asked_by INTEGER NOT NULL REFERENCES pub_tenders (id),
    note TEXT NULL,
    state TEXT NOT NULL DEFAULT 'OPEN'
        CHECK (state IN ('OPEN', 'TAKEN', 'CANCELLED', 'EXPIRED')),
    version BIGINT NOT NULL DEFAULT 0,
    starts_at TIMESTAMPTZ NOT NULL,
    asked_at TIMESTAMPTZ NOT NULL,
    taken_by INTEGER NULL REFERENCES pub_tenders (id),
    taken_at TIMESTAMPTZ NULL,
    closed_at TIMESTAMPTZ NULL,
    CHECK ((state = 'TAKEN') = (taken_by IS NOT NULL))
);

-- the Unique invariant: at most one OPEN request per shift and asker
CREATE UNIQUE INDEX idx_pub_covers_one_open ON pub_covers (shift_id, asked_by, state)
    WHERE state = 'OPEN';
-- the timed edge's due query ("what is open and has started")
CREATE INDEX idx_pub_covers_starts_at ON pub_covers (state, starts_at)
    WHERE starts_at IS NOT NULL;
-- a week's covers (cover list --week, week show), and "who covered last" (the offer order)
CREATE INDEX idx_pub_covers_week ON pub_covers (week_of, id);
CREATE INDEX idx_pub_covers_taker ON pub_covers (taken_by, taken_at)
    WHERE taken_by IS NOT NULL;
