-- +goose Up
-- One index entry fewer for each outbox row without a dedup key (issue
-- 26): a fanned-out row enters five indexes, each entry costing the
-- database 2-2.6 us of CPU (docs/BENCHMARKS.md, session 16).
--
-- outbox_open_key holds one open row per sink and dedup key. A row
-- without a key never conflicts (NULLs are distinct), yet every such row
-- had an entry, written by the fan-out and again by each give-back. The
-- index now holds keyed rows only; the statements that name it as their
-- ON CONFLICT arbiter say "dedup_key IS NOT NULL" too, so they still
-- infer it. Built under a new name and renamed, so that the name the
-- statements and their error handling know stays.
CREATE UNIQUE INDEX outbox_open_key_keyed ON switchboard.outbox USING btree (sink_id, dedup_key)
    WHERE state IN ('pending', 'held') AND dedup_key IS NOT NULL;
DROP INDEX switchboard.outbox_open_key;
ALTER INDEX switchboard.outbox_open_key_keyed RENAME TO outbox_open_key;

CREATE OR REPLACE FUNCTION switchboard.schema_version() RETURNS integer
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 28';
