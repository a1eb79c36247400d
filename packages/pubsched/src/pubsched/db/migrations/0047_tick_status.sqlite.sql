-- 0047: the tick's own record (issue 20): when the last tick finished, how long it took,
-- when one last failed and why. Written by every tick, wherever it runs (serve's ticker,
-- `pubsched tick` from a timer or cron), so /metrics tells a stalled tick from any
-- instance. One row per name ('tick').

CREATE TABLE pub_tick_status (
    name TEXT NOT NULL PRIMARY KEY,
    last_started_at TEXT NULL,
    last_success_at TEXT NULL,
    last_duration_seconds REAL NULL,
    last_failure_at TEXT NULL,
    last_error TEXT NULL
);
