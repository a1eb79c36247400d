-- 0033: per-week overrides of the deadline and generate timing (JSON text, NULL: none).

ALTER TABLE pub_schedule_runs ADD COLUMN settings_override TEXT NULL;
