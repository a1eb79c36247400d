-- 0041: the roster by hand (issue 18). The operator's edits of a generated roster: a pin
-- (this tender on this shift, whatever the picker says) or an exclusion (never this tender
-- on this shift again). One row per (shift, tender): a pin and an exclusion of the same
-- pair replace each other. Regenerate reads them; a reopen keeps them.

CREATE TABLE pub_roster_edits (
    week_of TEXT NOT NULL,
    shift_id INTEGER NOT NULL REFERENCES pub_shifts (id),
    tender_id INTEGER NOT NULL REFERENCES pub_tenders (id),
    kind TEXT NOT NULL CHECK (kind IN ('pin', 'exclude')),
    at TEXT NOT NULL,
    PRIMARY KEY (shift_id, tender_id)
);

-- regenerate and the week's page read a week's edits at once
CREATE INDEX idx_pub_roster_edits_week ON pub_roster_edits (week_of);
