-- 0009: queue digests (REQ-12 to REQ-14).
--
-- A digest's scheduled send time is claimed by one atomic UPDATE that moves
-- last_slot_at to it (and last_sent_at to the database's now()), only while
-- last_slot_at is older: with any number of instances, exactly one claims a
-- slot. Every comparison is on the database's clock.
ALTER TABLE digests
    ADD COLUMN last_slot_at            timestamptz,
    ADD COLUMN updated_at              timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN updated_by_human_id     bigint REFERENCES humans ON DELETE SET NULL,
    ADD COLUMN updated_by_endpoint_id  bigint REFERENCES endpoints ON DELETE SET NULL,
    ADD CONSTRAINT digests_quiet_threshold CHECK (quiet_threshold_secs > 0);
CREATE INDEX digests_owner ON digests (owner);

-- What became of each digest built: sent, skipped as quiet, skipped as
-- too late, or sent by hand (send now). Holds counts and the Cairn
-- artifact's link or the class of its failure (REQ-14), never a secret.
CREATE TABLE digest_runs (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    digest_id      bigint NOT NULL REFERENCES digests ON DELETE CASCADE,
    owner          owner_scope NOT NULL,
    kind           text NOT NULL CHECK (kind IN ('scheduled', 'manual')),
    outcome        text NOT NULL CHECK (outcome IN ('sent', 'quiet', 'late', 'no_target')),
    slot_at        timestamptz,
    ran_at         timestamptz NOT NULL DEFAULT now(),
    headline       text NOT NULL DEFAULT '',
    sinks_queued   integer NOT NULL DEFAULT 0,
    artifact_url   text,
    cairn_error    text
);
CREATE INDEX digest_runs_digest ON digest_runs (digest_id, id DESC);

-- The section queries of the reference host read per queue through these
-- indexes, not by scanning every todo (docs/BENCHMARKS.md has EXPLAIN).
CREATE INDEX todos_digest_pending ON todos (queue_id, created_at) INCLUDE (owner) WHERE state = 'pending';
CREATE INDEX todos_digest_claimed ON todos (queue_id) INCLUDE (owner, lease_expires_at, last_heartbeat_at, updated_at, lease_ttl_secs) WHERE state = 'claimed';
CREATE INDEX todos_digest_dead ON todos (queue_id, updated_at) INCLUDE (owner) WHERE state = 'dead';
-- Notifications recorded undeliverable, per scope and time.
CREATE INDEX outbox_undeliverable ON outbox (owner, finished_at) WHERE state = 'undeliverable';
-- Deliveries quarantined per scope and time (0008's webhook_deliveries).
CREATE INDEX webhook_deliveries_quarantined ON webhook_deliveries (owner, received_at) WHERE outcome = 'quarantined';
