-- +goose Up
-- Owner ids are opaque strings (notifytype.ValidOwnerID): the host's own
-- id of a human or a team, a uuid, an integer or a slug, 1 to 128 bytes of
-- A-Z a-z 0-9 . _ ~ : @ -. The kind is what comes before the first colon.
-- Every value the old rule accepted ('human:42') is accepted by the new one,
-- so existing rows stay valid and nothing is rewritten. The acting human of
-- a write (the Principal's human) is the same kind of id, so the columns
-- recording it become text; their existing integers keep their digits.

ALTER DOMAIN switchboard.owner_scope DROP CONSTRAINT owner_scope_check;

ALTER DOMAIN switchboard.owner_scope
	ADD CONSTRAINT owner_scope_check CHECK (VALUE ~ '^(human|team):[A-Za-z0-9._~:@-]{1,128}$');

ALTER TABLE switchboard.connections ALTER COLUMN created_by_human_id TYPE text USING created_by_human_id::text;
ALTER TABLE switchboard.digests ALTER COLUMN updated_by_human_id TYPE text USING updated_by_human_id::text;
ALTER TABLE switchboard.sinks ALTER COLUMN updated_by_human_id TYPE text USING updated_by_human_id::text;
ALTER TABLE switchboard.subscriptions ALTER COLUMN created_by_human_id TYPE text USING created_by_human_id::text;
ALTER TABLE switchboard.write_log ALTER COLUMN acting_human_id TYPE text USING acting_human_id::text;

CREATE OR REPLACE FUNCTION switchboard.schema_version() RETURNS integer
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 25';
