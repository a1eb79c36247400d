-- 0046: a tender's usual (issue 19, "standing availability"): the shifts they usually
-- tick, saved from their form ("save this as my usual"), and their usual maximum. A shift
-- is named as the pub's template names it: its local weekday (0 = Monday, as in
-- pub_shift_template) and its local start time (HH:MM). A week's shift matches when both
-- agree, so the usual outlives each week's own shift ids. A new week's form starts from
-- it; a week they never answer is filled in from it when its form closes.
-- pub_availability.source says where an answer came from: 'form' (the tender said it) or
-- 'usual' (the close used their usual for them; their own answer after a reopen replaces
-- it).

CREATE TABLE pub_usual (
    tender_id INTEGER NOT NULL PRIMARY KEY REFERENCES pub_tenders (id),
    max_shifts INTEGER NULL CHECK (max_shifts IS NULL OR max_shifts BETWEEN 0 AND 14),
    saved_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE pub_usual_shifts (
    tender_id INTEGER NOT NULL REFERENCES pub_usual (tender_id) ON DELETE CASCADE,
    weekday INTEGER NOT NULL CHECK (weekday BETWEEN 0 AND 6),  -- 0 = Monday
    start_time TEXT NOT NULL CHECK (length(start_time) = 5 AND substr(start_time, 3, 1) = ':'),
    PRIMARY KEY (tender_id, weekday, start_time)
);

ALTER TABLE pub_availability ADD COLUMN source TEXT NOT NULL DEFAULT 'form'
    CHECK (source IN ('form', 'usual'));
