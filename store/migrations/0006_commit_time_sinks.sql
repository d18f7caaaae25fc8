-- 0006: hardening of delivery.
--
-- The sinks an event goes to are decided in the emitting transaction
-- (REQ-10): Emit stores the ids of the sinks whose subscriptions matched at
-- that moment, and fan-out uses exactly that set. excerpt_sink_ids are
-- those of them whose matching subscription opted in to an excerpt; body
-- holds only the 280-character excerpt, and only when that set is not
-- empty.
ALTER TABLE outbox_events
    ADD COLUMN sink_ids bigint[] NOT NULL DEFAULT '{}',
    ADD COLUMN excerpt_sink_ids bigint[] NOT NULL DEFAULT '{}';

-- attempt_record_id: the delivery record of the row's latest attempt,
-- also when that record is one coalesced message for several rows. When an
-- attempt's instance dies mid-send, the next attempt on any of its rows
-- closes that record as abandoned (D25) instead of leaving it "sending".
ALTER TABLE outbox ADD COLUMN attempt_record_id bigint;
