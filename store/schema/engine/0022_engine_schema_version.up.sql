-- +goose Up
-- The schema says which version it is, however it was applied: by
-- enginemigrate.Up (history in switchboard.migrations), or by an embedder's
-- golang-migrate, goose or Atlas (history wherever that tool keeps it).
-- Start and Up read switchboard.schema_version(), never a history table.
-- Every engine migration from this one on ends by setting it to its own
-- number (TestEveryEngineMigrationStampsItsVersion). The body is a quoted
-- string, not dollar-quoted, so that goose needs no StatementBegin marks.

CREATE OR REPLACE FUNCTION switchboard.schema_version() RETURNS integer
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 22';
