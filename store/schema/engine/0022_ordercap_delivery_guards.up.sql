-- +goose Up
-- Guards of the delivery core held by the schema (issue 23).
--
-- The cap of 7 attempts (D10): every statement that starts an attempt says
-- "attempts < 7", and the table refuses an eighth whatever a statement
-- says. A row an older build attempted past the cap (a recorder putting a
-- row at its cap back to held between FinishHeldAtCap and ClaimHeld) keeps
-- its delivery records, which tell every attempt; its count is brought
-- back to the cap so that the constraint can hold for every row.
UPDATE switchboard.outbox SET attempts = 7 WHERE attempts > 7;

ALTER TABLE switchboard.outbox ADD CONSTRAINT outbox_attempts_cap CHECK (attempts <= 7);

-- An occurrence key (a todo's n-th dead letter, not windowed) names one
-- occurrence: the fan-out looks up whether a row of the key was delivered
-- or is being sent to the sink, whatever its state, to count a repeat
-- onto it rather than send it again (REQ-11, D7).
CREATE INDEX outbox_occurrence_key ON switchboard.outbox USING btree (sink_id, dedup_key)
    WHERE dedup_key IS NOT NULL AND NOT windowed;
