-- 0040: operator accounts (issue 18): each operator logs in to the web admin with their
-- own email and password. The email is unique case-insensitively (email_key = its
-- lower-case form); only an argon2 hash of the password is kept. last_login_at: when the
-- account last logged in (NULL: never).

CREATE TABLE pub_operators (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    email TEXT NOT NULL,
    email_key TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    last_login_at TEXT NULL
);
