-- 0035: the v2 state machine's columns, exactly as the seed's table describes. Every one is
-- nullable or defaulted, so applying it changes no behaviour: the legacy engine never reads
-- them, and v2 treats a NULL v2_state as "not yet adopted" (seeded lazily from status).

ALTER TABLE pub_schedule_runs ADD COLUMN v2_state TEXT DEFAULT NULL;
ALTER TABLE pub_schedule_runs ADD COLUMN acting_at TEXT NULL;      -- the generalized lease
ALTER TABLE pub_schedule_runs ADD COLUMN acting_kind TEXT NULL;       -- close | generate | send
ALTER TABLE pub_schedule_runs ADD COLUMN collecting_alert_at TEXT NULL;  -- once-per-run nudge claims
ALTER TABLE pub_schedule_runs ADD COLUMN unsent_alert_at TEXT NULL;
ALTER TABLE pub_schedule_runs ADD COLUMN autopilot INTEGER NOT NULL DEFAULT 0;
ALTER TABLE pub_schedule_runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'week';
ALTER TABLE pub_schedule_runs ADD COLUMN deadline_at TEXT NULL;
ALTER TABLE pub_schedule_runs ADD COLUMN opens_at TEXT NULL;

-- the open-form lookup, and H3: at most one COLLECTING run (UNIQUE, so the database itself
-- refuses a second one under any concurrency)
CREATE UNIQUE INDEX idx_pub_runs_v2_collecting ON pub_schedule_runs (v2_state)
    WHERE v2_state = 'COLLECTING';
