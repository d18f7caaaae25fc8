-- 0016: the claimed rows, by the instance that holds them.
--
-- A claim leaves alone the sinks other instances hold (ClaimDue's
-- "elsewhere"), found from the claimed rows not its own. With the index of
-- 0013, led by sink_id, it read every claimed row, its own included, and
-- the entries of the rows finished since the index was last vacuumed,
-- visiting their heap pages: 0.2 ms at the start of a drain of 20,000 rows
-- and 3-10 ms at its end, on every claim. Led by the instance, the index
-- gives the rows of the other instances as two ranges, "claimed_by < me"
-- and "claimed_by > me": nothing to read when an instance runs alone.
CREATE INDEX outbox_claimed_by ON outbox (claimed_by, sink_id) WHERE state = 'claimed';
DROP INDEX outbox_claimed_sink;
