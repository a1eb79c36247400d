-- 0050: the schedule email is mail of the mail machine too (issue 28): each recipient's
-- record of a week's send, pub_deliveries until now, becomes a row of pub_mail of kind
-- 'schedule', about the week, for 'tender:<id>' (sent SENT, failed REFUSED with no timer
-- of its own: the send's retry tries it again, in_flight UNKNOWN: it may have arrived,
-- never re-sent on its own). pub_mail_log stays as the record of what was handed over
-- before this migration: from here on, the mail machine's events are the mail log.

INSERT INTO pub_mail (kind, about, recipient, week_of, state, owed_at, attempts, sent_at,
                      error, address)
SELECT 'schedule', week_of, 'tender:' || tender_id, week_of,
       CASE status WHEN 'sent' THEN 'SENT' WHEN 'failed' THEN 'REFUSED' ELSE 'UNKNOWN' END,
       attempted_at, 1, sent_at, error, email
FROM pub_deliveries ORDER BY attempted_at, week_of, tender_id;

DROP TABLE pub_deliveries;
