-- 0042: a week's own shifts (issue 18): what the operator removed from a week before its
-- roster (a closed night), kept so that the tenders who had ticked it are told on their
-- form; and one template shift per day and start (two would make every new week fail,
-- a week's shifts being keyed by their start).

CREATE TABLE pub_removed_shifts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    week_of TEXT NOT NULL REFERENCES pub_schedule_runs (week_of),
    shift_id INTEGER NOT NULL,          -- the removed pub_shifts row's id (gone)
    label TEXT NOT NULL,
    starts_at TEXT NOT NULL,
    ends_at TEXT NOT NULL,
    tenders TEXT NOT NULL DEFAULT '[]', -- JSON list: the tender ids whose ticks were dropped
    removed_at TEXT NOT NULL
);

CREATE INDEX idx_pub_removed_shifts_week ON pub_removed_shifts (week_of, id);
CREATE UNIQUE INDEX idx_pub_shift_template_start ON pub_shift_template (weekday, start_time);
