-- 0038: what a real pub's own week needs, shared by the features of issue 18: the pub's
-- weekly shifts as data (the template: a new database starts with the three shifts that
-- were fixed in code, Thu-Sat 18:00-02:00, 2 slots), the skills a shift needs and a
-- tender has (JSON lists of free words, '[]' for none).

CREATE TABLE pub_shift_template (
    id BIGSERIAL PRIMARY KEY,
    label TEXT NOT NULL CHECK (label <> ''),
    weekday INTEGER NOT NULL CHECK (weekday BETWEEN 0 AND 6),  -- 0 = Monday
    start_time TEXT NOT NULL,  -- local HH:MM
    end_time TEXT NOT NULL,    -- local HH:MM; at or before start_time: the next day
    slots INTEGER NOT NULL DEFAULT 2 CHECK (slots BETWEEN 1 AND 20),
    needs TEXT NOT NULL DEFAULT '[]',
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

INSERT INTO pub_shift_template (label, weekday, start_time, end_time, slots) VALUES ('Thursday night', 3, '18:00', '02:00', 2);
INSERT INTO pub_shift_template (label, weekday, start_time, end_time, slots) VALUES ('Friday night', 4, '18:00', '02:00', 2);
INSERT INTO pub_shift_template (label, weekday, start_time, end_time, slots) VALUES ('Saturday night', 5, '18:00', '02:00', 2);

ALTER TABLE pub_shifts ADD COLUMN needs TEXT NOT NULL DEFAULT '[]';
ALTER TABLE pub_tenders ADD COLUMN skills TEXT NOT NULL DEFAULT '[]';
