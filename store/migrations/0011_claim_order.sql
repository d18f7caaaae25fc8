-- 0011: the claim's order.
--
-- A claim takes the due pending rows oldest first, and a sink's rows in
-- the order they were written (due_at, then id): with the index in that
-- order it reads only the rows it takes, whatever the backlog, rather
-- than sorting every due row on every claim.
CREATE INDEX outbox_due_order ON outbox (due_at, id) WHERE state = 'pending';
DROP INDEX outbox_due;
