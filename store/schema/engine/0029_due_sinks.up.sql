-- +goose Up
-- A claim finds the sinks it may take rows of from notes, not from the
-- rows themselves (store's claimDueSQL, issue 26). It read due rows in due
-- order, leaving out those of sinks another instance holds or whose
-- mailbox is full, until it had found four times its limit: an instance
-- holding few sinks, or none, read every other sink's due row at every
-- claim and every poll (5,000 rows and 19.6 ms for 13 sinks held of 500,
-- docs/BENCHMARKS.md, session 16). It now reads these notes, a few a sink,
-- leaving out the sinks it may not take: its cost is the number of sinks
-- it passes, not the number of their rows.
--
-- A note says that its sink may have a pending row due at due_at or
-- later. The invariant: every pending row is covered by a note of its
-- sink due no later than it, committed with it. It is kept by
-- construction, whatever statement writes the row:
--   - rows inserted pending are noted by the statement-level trigger
--     below, one note a sink for the whole statement (a fan-out of 5,000
--     rows over 10 sinks writes 10);
--   - a row that becomes pending again (given back, released, retried),
--     or whose due time moves earlier, is noted by the row trigger; a
--     claim, a start or an outcome that leaves a row out of pending
--     writes nothing.
-- Writers only insert notes: nothing waits on a note, so a rule's row
-- written in an embedder's transaction (EnqueueForSinkTx) blocks nobody.
--
-- A claim rewrites the notes of the sinks it looked at: it deletes the
-- ones its snapshot shows and writes one due at the sink's first pending
-- row it did not take, if any. A note written after its snapshot is not
-- deleted, and a row its snapshot shows pending is covered by the new
-- note, so the invariant holds under concurrent writers without a lock.
-- A note may be early (its rows taken, or due later): the claim that
-- reads it finds no due row and rewrites it. Notes are not updated, only
-- inserted and deleted, and a sink deleted leaves its notes to the next
-- claim that reads them.
CREATE TABLE switchboard.due_sinks (
    sink_id bigint NOT NULL,
    due_at timestamp with time zone NOT NULL
);
CREATE INDEX due_sinks_order ON switchboard.due_sinks USING btree (due_at, sink_id);
CREATE INDEX due_sinks_sink ON switchboard.due_sinks USING btree (sink_id);

-- +goose StatementBegin
CREATE FUNCTION switchboard.note_inserted_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO switchboard.due_sinks (sink_id, due_at)
    SELECT sink_id, min(due_at) FROM inserted WHERE state = 'pending' GROUP BY sink_id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER outbox_note_inserted AFTER INSERT ON switchboard.outbox
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION switchboard.note_inserted_rows();

-- +goose StatementBegin
CREATE FUNCTION switchboard.note_pending_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO switchboard.due_sinks (sink_id, due_at) VALUES (NEW.sink_id, NEW.due_at);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER outbox_note_pending AFTER UPDATE OF state, due_at ON switchboard.outbox
    FOR EACH ROW WHEN (NEW.state = 'pending' AND (OLD.state <> 'pending' OR NEW.due_at < OLD.due_at))
    EXECUTE FUNCTION switchboard.note_pending_row();

INSERT INTO switchboard.due_sinks (sink_id, due_at)
SELECT sink_id, min(due_at) FROM switchboard.outbox WHERE state = 'pending' GROUP BY sink_id;

CREATE OR REPLACE FUNCTION switchboard.schema_version() RETURNS integer
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 29';
