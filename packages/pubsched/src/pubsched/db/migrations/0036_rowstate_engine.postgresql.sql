-- 0036: what rowstate's binding of pub_schedule_runs needs beyond the seed's columns (see
-- rowstate/schema.py, whose DDL this copies so that binding.check_schema accepts it):
-- the lost-update counter, the lease's fencing token, holder and failure stamp, the due
-- columns of the timed edges, their indexes, and the events table (audit + outbox).

ALTER TABLE pub_schedule_runs ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE pub_schedule_runs ADD COLUMN acting_token BIGINT NOT NULL DEFAULT 0;
ALTER TABLE pub_schedule_runs ADD COLUMN acting_holder TEXT NULL;  -- an addition: who holds the lease
ALTER TABLE pub_schedule_runs ADD COLUMN acting_failed_at TIMESTAMPTZ NULL;
ALTER TABLE pub_schedule_runs ADD COLUMN generate_at TIMESTAMPTZ NULL;
ALTER TABLE pub_schedule_runs ADD COLUMN send_window_at TIMESTAMPTZ NULL;

CREATE INDEX idx_pub_schedule_runs_lease ON pub_schedule_runs (acting_at)
    WHERE acting_at IS NOT NULL;

-- one per due column: the tick's "what is due in this state" reads
CREATE INDEX idx_pub_schedule_runs_opens_at ON pub_schedule_runs (v2_state, opens_at)
    WHERE opens_at IS NOT NULL;
CREATE INDEX idx_pub_schedule_runs_deadline_at ON pub_schedule_runs (v2_state, deadline_at)
    WHERE deadline_at IS NOT NULL;
CREATE INDEX idx_pub_schedule_runs_generate_at ON pub_schedule_runs (v2_state, generate_at)
    WHERE generate_at IS NOT NULL;
CREATE INDEX idx_pub_schedule_runs_send_window_at ON pub_schedule_runs (v2_state, send_window_at)
    WHERE send_window_at IS NOT NULL;

-- the events table exactly as rowstate.schema.events_sql creates it; IF NOT EXISTS because
-- it is shared by every binding of the store, and another may have created it first
CREATE TABLE IF NOT EXISTS rowstate_events (id BIGSERIAL PRIMARY KEY, machine TEXT NOT NULL, row_key TEXT NOT NULL, edge TEXT, from_state TEXT, to_state TEXT NOT NULL, owner TEXT, data JSONB, version BIGINT, created_at TIMESTAMPTZ NOT NULL, delivered_at TIMESTAMPTZ);
CREATE INDEX IF NOT EXISTS rowstate_events_row ON rowstate_events (machine, row_key, id);
CREATE INDEX IF NOT EXISTS rowstate_events_undelivered ON rowstate_events (id)
    WHERE delivered_at IS NULL;
