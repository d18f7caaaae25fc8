-- 0007: the operator role (D26) and the author of every write (REQ-5).

-- An operator sees the instance-wide ops view and /metrics; everybody else
-- sees only their own scopes' sinks. Granted with the binary's
-- grant-operator command.
ALTER TABLE humans ADD COLUMN is_operator boolean NOT NULL DEFAULT false;

-- One row per write of the management service, in the write's own
-- transaction: who acted (the human, and the endpoint when one acted for
-- its accountable human), on what, in which owner scope. Deletions and
-- send tests are recorded here too, since they leave no row of their own
-- to carry an author. Nothing secret is kept: ids and an action name.
CREATE TABLE write_log (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at                  timestamptz NOT NULL DEFAULT now(),
    owner               owner_scope NOT NULL,
    action              text NOT NULL,
    object_kind         text NOT NULL,
    object_id           bigint NOT NULL,
    acting_human_id     bigint REFERENCES humans ON DELETE SET NULL,
    acting_endpoint_id  bigint REFERENCES endpoints ON DELETE SET NULL
);
CREATE INDEX write_log_object ON write_log (object_kind, object_id);
CREATE INDEX write_log_owner ON write_log (owner, at);
