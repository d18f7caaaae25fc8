-- 0013: the delivery path's writes.
--
-- An attempt's record is written "sending" and then finished. The partial
-- index of 0005 on status = 'sending' made every finish a non-HOT update,
-- writing a new entry into each of the table's eight indexes; the rows'
-- abandoned attempts are found through the outbox's attempt_record_id and,
-- for the records of older rows, through delivery_records_outbox (0010),
-- so the index goes, and a page keeps room for the finished version of
-- the records it holds (fillfactor), so the finish is a heap-only update.
DROP INDEX delivery_records_sending;
ALTER TABLE delivery_records SET (fillfactor = 85);

-- A claim prefers sinks no other instance is delivering to (see ClaimDue):
-- it looks up the claimed rows of a candidate's sink.
CREATE INDEX outbox_claimed_sink ON outbox (sink_id, claimed_by) WHERE state = 'claimed';

-- Starting an attempt on a claimed row (its attempts, the record it links,
-- the claim extended) changes no indexed column once the claims are found
-- through outbox_claimed_sink, whose partial index holds only the claimed
-- rows (a few per sink being delivered): with room on the page, it is a
-- heap-only update too.
DROP INDEX outbox_claimed;
ALTER TABLE outbox SET (fillfactor = 80);
