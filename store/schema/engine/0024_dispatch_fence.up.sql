-- +goose Up
-- Issue 23, defect 4: an instance's heartbeat fences its own sends.
-- dispatch_until is the instant after which the instance may start no
-- attempt (every statement that starts one requires it to be ahead of the
-- database's clock); alive_until, the instant from which other instances
-- may take the rows it holds, is written a fence later (the longest send,
-- the record grace and one beat): by then every attempt it began has
-- ended and had its grace to be recorded. An instance whose row predates
-- this migration has no dispatch_until, and starts nothing until it beats
-- again.
ALTER TABLE switchboard.outbox_instances ADD COLUMN dispatch_until timestamp with time zone;

CREATE OR REPLACE FUNCTION switchboard.schema_version() RETURNS integer
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 24';
