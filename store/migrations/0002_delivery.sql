-- 0002: the delivery engine.
--
-- A sink's budget is a token bucket kept as GCRA state: each counted
-- delivery record stores the bucket's theoretical arrival time after it
-- (budget_tat), so the next reservation reads the latest one under the
-- sink's row lock and the budget holds across instances (D8).
ALTER TABLE delivery_records ADD COLUMN budget_tat timestamptz;
CREATE INDEX delivery_records_tat ON delivery_records (sink_id, budget_tat DESC) WHERE counts_budget;

-- Held rows are found per sink when a token returns.
DROP INDEX outbox_held;
CREATE INDEX outbox_held ON outbox (sink_id, due_at) WHERE state = 'held';
CREATE INDEX outbox_held_due ON outbox (due_at) WHERE state = 'held';
