-- 0048: who moved a row and why (issue 21). rowstate's events table gained two nullable
-- columns at its layout 2, `actor` (by=) and `note` (note=); every move pubsched makes now
-- names its actor there instead of inside the event's data. Older events keep `by` in
-- their data, and the history reads both.

ALTER TABLE rowstate_events ADD COLUMN IF NOT EXISTS actor TEXT;
ALTER TABLE rowstate_events ADD COLUMN IF NOT EXISTS note TEXT;
