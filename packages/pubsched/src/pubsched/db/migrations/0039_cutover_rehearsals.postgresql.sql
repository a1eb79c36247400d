-- 0039: the cutover's dress rehearsal (issue 17 item 7): each rehearsal's record. A
-- rehearsal runs a whole week on the v2 engine on a throwaway copy (``scratch``: a file
-- path on SQLite, a schema name on PostgreSQL, kept so that a later start can drop one a
-- crash left behind); a 'passed' row is what turning v2 on over real weeks requires.
-- ``step_reached`` counts the steps done, ``acting_since`` marks a step being run (the
-- wizard's claim), ``steps`` is a JSON list of each step's name, ok and message.

CREATE TABLE pub_rehearsals (
    id BIGSERIAL PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ NULL,
    outcome TEXT NULL CHECK (outcome IN ('passed', 'failed', 'abandoned')),
    week_of TEXT NOT NULL,
    step_reached INTEGER NOT NULL DEFAULT 0,
    acting_since TIMESTAMPTZ NULL,
    steps TEXT NOT NULL DEFAULT '[]',
    failure TEXT NULL,
    scratch TEXT NOT NULL,
    started_by TEXT NULL
);

-- at most one rehearsal in progress at a time
CREATE UNIQUE INDEX idx_pub_rehearsals_running ON pub_rehearsals ((outcome IS NULL)) WHERE outcome IS NULL;
