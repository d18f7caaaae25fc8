-- +goose Up
-- A claimer's next wake reads the earliest note of a due sink
-- (switchboard.due_sinks, 0029) instead of the earliest pending row, and
-- outbox_due_order, which only that read still used, goes. A pending row
-- entered it when it was written and each time it became pending again:
-- one index entry of the five or six every fanned-out row writes.
--
-- The earliest note is never later than the earliest pending row: every
-- pending row is covered by a note of its sink due no later than it. It
-- may be earlier (a note whose rows were taken since, or whose sink was
-- deleted): the claimer then wakes and claims once for nothing, and that
-- claim rewrites the note.
DROP INDEX switchboard.outbox_due_order;

CREATE OR REPLACE FUNCTION switchboard.schema_version() RETURNS integer
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 30';
