-- 0033: per-week overrides of the deadline and generate timing (JSONB, NULL: none).

ALTER TABLE pub_schedule_runs ADD COLUMN settings_override JSONB NULL;
