-- 0003: what the surfaces need.

-- Web UI sessions (D4), created by a one-time login link, stored as
-- SHA-256 hashes of the cookie value.
CREATE TABLE sessions (
    token_hash  bytea PRIMARY KEY,
    human_id    bigint NOT NULL REFERENCES humans ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX sessions_expiry ON sessions (expires_at);

-- Agent pages (notify_owner), counted per endpoint so the limit of 5 an
-- hour holds across instances (D12). Nothing else is kept of a page: it is
-- an agent.notify event like any other (REQ-1).
CREATE TABLE agent_pages (
    endpoint_id  bigint NOT NULL REFERENCES endpoints ON DELETE CASCADE,
    paged_at     timestamptz NOT NULL
);
CREATE INDEX agent_pages_recent ON agent_pages (endpoint_id, paged_at);

-- Send tests are counted from delivery records (6 a minute per sink).
CREATE INDEX delivery_records_tests ON delivery_records (sink_id, sent_at) WHERE is_test;
