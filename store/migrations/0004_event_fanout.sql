-- 0004: Emit writes one row per event; the claimer fans it out.
--
-- Emit runs on the host's critical path, inside the host's transaction. It
-- now writes a single row, whatever the number of matching sinks, and only
-- when some subscription of the event's scope matches it. Claimers fan the
-- rows out into the outbox, one row per matching sink, coalescing repeats
-- of a dedup key into the open row's count; so a storm on one key never
-- queues its emitters behind one row lock, and outbox_repeats goes.
-- (docs/BENCHMARKS.md has the figures behind the change.)
CREATE TABLE outbox_events (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner          text NOT NULL,
    event_type     text NOT NULL,
    match_types    text[] NOT NULL,
    severity       text NOT NULL,
    severity_rank  smallint NOT NULL,
    queue_id       bigint NOT NULL,
    endpoint_id    bigint NOT NULL,
    webhook_id     bigint NOT NULL,
    dedup_key      text,
    windowed       boolean NOT NULL,
    payload        jsonb NOT NULL,
    -- The subject's body: copied only into the outbox rows of sinks whose
    -- subscription opted in to excerpts; gone with this row at fan-out.
    body           text,
    due_at         timestamptz NOT NULL
);

DROP TABLE outbox_repeats;

-- count: how many events the row stands for. windowed: repeats of its key
-- add to count (quarantine, rule.notify) rather than being the same
-- occurrence (a todo's n-th dead letter). had_partial: an attempt was
-- answered as a partial failure (Apprise 424), which is retried once.
ALTER TABLE outbox
    ADD COLUMN count integer NOT NULL DEFAULT 1,
    ADD COLUMN windowed boolean NOT NULL DEFAULT false,
    ADD COLUMN had_partial boolean NOT NULL DEFAULT false;
