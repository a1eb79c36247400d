-- 0037: the version a tender's personal links are signed over (pubsched.links): revoking
-- a tender's links bumps it, so every older token is refused. Links start at version 1
-- (links.tender_token's default), so existing tenders keep their links working.

ALTER TABLE pub_tenders ADD COLUMN link_version INTEGER NOT NULL DEFAULT 1;
