-- +goose Up
-- An event's owner is an owner scope where the event is written, not
-- where its rows are (issue 26). outbox_events.owner was the one owner
-- column of the engine's tables that was text: every outbox row the
-- fan-out wrote cast it to switchboard.owner_scope, running the domain's
-- check once a row (ten times an event at ten sinks) on a value the emit
-- had already matched against its sinks' owners. Checked once, at the
-- emit, the fan-out copies a value of the column's own type: about 1 us of
-- the database's CPU less for every fanned-out row (docs/BENCHMARKS.md,
-- session 24), and a value that is no owner scope is refused in the
-- emitting transaction instead of failing a fan-out batch.
--
-- The table is rewritten under its lock (the domain has a check): it
-- holds only the events not yet fanned out. Every event the emit writes
-- matched sinks of its owner, whose owner column is the domain, so the
-- values it holds pass.
ALTER TABLE switchboard.outbox_events ALTER COLUMN owner TYPE switchboard.owner_scope;

CREATE OR REPLACE FUNCTION switchboard.schema_version() RETURNS integer
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 32';
