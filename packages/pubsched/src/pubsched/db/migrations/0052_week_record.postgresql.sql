-- 0052 (issue 29): a week's record of what people did to it by hand, when its form last
-- opened or had its deadline moved, and the note a shift carries when the pub's clocks
-- change under it.
--
-- pub_week_edits: the hand edits of a week (a pin, a take-off, a shift added or removed,
-- a tender deactivated off it), each written in the unit of work of the edit itself, so
-- it is there exactly when the edit is; with who did it (`done_by`: operator:EMAIL, cli:USER)
-- and when, by the same clock as the run's own events. The week's history shows them
-- beside its moves (pubsched.week.history).
--
-- pub_schedule_runs.form_moved_at: when the form last opened or had its deadline moved
-- (the action's own instant): no form reminder goes out in the hour after it.
--
-- pub_shifts.clock_note: what the clocks did to the shift's times (a start in the
-- spring-forward gap, a time that happens twice), in the operator's words; NULL: nothing.

CREATE TABLE pub_week_edits (
    id BIGSERIAL PRIMARY KEY,
    week_of TEXT NOT NULL,
    kind TEXT NOT NULL,
    what TEXT NOT NULL,
    done_by TEXT NULL,
    at TIMESTAMPTZ NOT NULL
);

CREATE INDEX idx_pub_week_edits_week ON pub_week_edits (week_of, at);

ALTER TABLE pub_schedule_runs ADD COLUMN form_moved_at TIMESTAMPTZ NULL;

ALTER TABLE pub_shifts ADD COLUMN clock_note TEXT NULL;
