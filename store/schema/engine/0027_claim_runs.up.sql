-- +goose Up
-- A claim takes a run of each sink's due rows (store's claimDueSQL): it
-- picks the sinks whose rows fell due first, and reads each one's first
-- due rows from this index. Taken one row a sink in due order, a backlog
-- spread over 1,000 sinks gave each actor's step 1.4 rows, and every
-- step's fixed costs were paid by a row or two (docs/BENCHMARKS.md,
-- session 15).
CREATE INDEX outbox_pending_sink ON switchboard.outbox USING btree (sink_id, due_at, id) WHERE state = 'pending';

CREATE OR REPLACE FUNCTION switchboard.schema_version() RETURNS integer
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 27';
