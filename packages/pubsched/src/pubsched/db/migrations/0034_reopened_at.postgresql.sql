-- 0034: set when the operator re-opens the form after assignments were generated.

ALTER TABLE pub_schedule_runs ADD COLUMN reopened_at TIMESTAMPTZ NULL;
