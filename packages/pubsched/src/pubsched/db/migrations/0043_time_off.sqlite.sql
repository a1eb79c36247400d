-- 0043: time off (issue 19): a tender away from FROM to TO, local dates inclusive (ISO
-- text, which orders as dates do: "night BETWEEN starts_on AND ends_on" is the test on
-- both databases). One span per tender and first day: "tender back EMAIL FROM" names it.
-- An away tender is never picked for those nights, is not offered their covers, and gets
-- no reminders for them.

CREATE TABLE pub_time_off (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tender_id INTEGER NOT NULL REFERENCES pub_tenders (id),
    starts_on TEXT NOT NULL,
    ends_on TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    CHECK (ends_on >= starts_on),
    UNIQUE (tender_id, starts_on)
);

-- "who is away on this night" reads by date
CREATE INDEX idx_pub_time_off_days ON pub_time_off (starts_on, ends_on);
