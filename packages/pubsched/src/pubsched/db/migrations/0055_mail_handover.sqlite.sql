-- 0055: two facts the mail and the calendars lacked (issue 29).
--
-- pub_mail.handover_at: when the message's data began to go to the mail server under the
-- claim the row holds now (every claim clears it; the sender sets it, in a unit fenced by
-- its claim, just before the first byte of the message's data). A send whose sender died
-- with it empty never reached the server and is sent again; one with it set may have
-- arrived (UNKNOWN, the operator's to resend).
--
-- pub_calendar_sequences: the SEQUENCE of one tender's calendar event for one shift (the
-- event's UID is theirs and the shift's), bumped in the unit of work that changes the
-- event (a cover taken cancels the asker's and adds the taker's), so an event taken back
-- after its cancel carries a higher SEQUENCE and calendars show it again. No row: 0. No
-- foreign keys: a row of a shift removed since only keeps a number that never shrinks.

ALTER TABLE pub_mail ADD COLUMN handover_at TEXT NULL;

CREATE TABLE pub_calendar_sequences (
    tender_id INTEGER NOT NULL,
    shift_id INTEGER NOT NULL,
    sequence INTEGER NOT NULL,
    PRIMARY KEY (tender_id, shift_id)
);
