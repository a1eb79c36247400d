-- 0037: a tender's link version; revoking their personal links bumps it, so every older
-- signed link (which names the version) is refused.

ALTER TABLE pub_tenders ADD COLUMN link_version INTEGER NOT NULL DEFAULT 1;
