-- 0032: the one-shot data fix marking pre-migration weeks as sent (the seed: the weeks
-- from before the Notion migration, whose emails went out by hand and were never stamped).
-- Cut-off: every week before Monday 2026-01-05 (the first week the app itself ran) that is
-- still 'pending' with no sent_at is marked 'sent', so the legacy engine never tries to
-- send it again. Nothing else is touched (sent_at stays NULL: this app never sent them).
-- On a fresh install there are no such rows: a no-op.

UPDATE pub_schedule_runs
   SET status = 'sent'
 WHERE week_of < '2026-01-05'
   AND status = 'pending'
   AND sent_at IS NULL;
