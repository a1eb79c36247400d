-- 0053: ended operator sessions (issue 29): a logout recorded in the database, so that
-- the logged-out cookie opens the admin on no instance and not after a restart. A row
-- lives until the cookie would have expired anyway (ends_at), then a later logout
-- deletes it.

CREATE TABLE pub_ended_sessions (
    sid TEXT NOT NULL PRIMARY KEY,
    ends_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX pub_ended_sessions_ends_at ON pub_ended_sessions (ends_at);
