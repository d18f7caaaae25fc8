-- 0001: the foundation. Owners and credentials, the connection vault, sinks
-- and subscriptions, the outbox and its delivery records, digests, and the
-- reference host's queues, todos and attempts.
--
-- An owner scope is stored as text 'human:<id>' or 'team:<id>' (D1): one
-- column that every scoped table shares, compared by equality and indexed.

CREATE DOMAIN owner_scope AS text CHECK (VALUE ~ '^(human|team):[1-9][0-9]*$');

-- Owners (SPEC-0033 stand-in, D2).
CREATE TABLE humans (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL,
    email       text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE teams (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE team_members (
    team_id     bigint NOT NULL REFERENCES teams ON DELETE CASCADE,
    human_id    bigint NOT NULL REFERENCES humans ON DELETE CASCADE,
    role        text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    PRIMARY KEY (team_id, human_id)
);
CREATE INDEX team_members_human ON team_members (human_id);

-- Operator API bearer tokens (D4), stored as SHA-256 hashes.
CREATE TABLE api_tokens (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    human_id    bigint NOT NULL REFERENCES humans ON DELETE CASCADE,
    token_hash  bytea NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

-- One-time web login links (D4), stored as SHA-256 hashes.
CREATE TABLE login_links (
    token_hash  bytea PRIMARY KEY,
    human_id    bigint NOT NULL REFERENCES humans ON DELETE CASCADE,
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);

-- Endpoints: an agent's vended credential with its grant (verb families,
-- D5) and the human accountable for it.
CREATE TABLE endpoints (
    id                    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner                 owner_scope NOT NULL,
    name                  text NOT NULL,
    accountable_human_id  bigint NOT NULL REFERENCES humans,
    grants                text[] NOT NULL DEFAULT '{todos,rules}',
    credential_hash       bytea NOT NULL UNIQUE,
    created_at            timestamptz NOT NULL DEFAULT now(),
    revoked_at            timestamptz,
    UNIQUE (owner, name)
);

-- The connection vault (SPEC-0028 stand-in, D18). account_key is the base
-- URL; secret is AES-256-GCM sealed with the row id as associated data, so
-- a sealed value copied to another row does not open.
CREATE TABLE connections (
    id                    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner                 owner_scope NOT NULL,
    kind                  text NOT NULL CHECK (kind IN ('gotify', 'apprise', 'cairn')),
    name                  text NOT NULL,
    account_key           text NOT NULL,
    secret                bytea,
    created_at            timestamptz NOT NULL DEFAULT now(),
    created_by_human_id   bigint REFERENCES humans ON DELETE SET NULL,
    UNIQUE (owner, name)
);

-- Sinks (REQ-2). options holds the per-kind options as JSON (priority map,
-- config_key, tag, type map). updated_by_* record who last wrote it; an
-- endpoint's write records its accountable human too (REQ-5).
CREATE TABLE sinks (
    id                      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner                   owner_scope NOT NULL,
    name                    text NOT NULL,
    kind                    text NOT NULL CHECK (kind IN ('gotify', 'apprise')),
    connection_id           bigint NOT NULL REFERENCES connections,
    enabled                 boolean NOT NULL DEFAULT true,
    options                 jsonb NOT NULL DEFAULT '{}',
    budget_per_hour         integer NOT NULL DEFAULT 30 CHECK (budget_per_hour > 0),
    budget_burst            integer NOT NULL DEFAULT 10 CHECK (budget_burst > 0),
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    updated_by_human_id     bigint REFERENCES humans ON DELETE SET NULL,
    updated_by_endpoint_id  bigint REFERENCES endpoints ON DELETE SET NULL,
    UNIQUE (owner, name)
);
CREATE INDEX sinks_connection ON sinks (connection_id);

-- Subscriptions (REQ-6). Empty filter arrays mean "any". min_severity_rank
-- is 0 low, 1 normal, 2 high (D6), so matching is an integer compare.
CREATE TABLE subscriptions (
    id                      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sink_id                 bigint NOT NULL REFERENCES sinks ON DELETE CASCADE,
    owner                   owner_scope NOT NULL,
    event_types             text[] NOT NULL CHECK (cardinality(event_types) > 0),
    queue_ids               bigint[] NOT NULL DEFAULT '{}',
    endpoint_ids            bigint[] NOT NULL DEFAULT '{}',
    webhook_ids             bigint[] NOT NULL DEFAULT '{}',
    min_severity_rank       smallint NOT NULL DEFAULT 0 CHECK (min_severity_rank BETWEEN 0 AND 2),
    include_excerpt         boolean NOT NULL DEFAULT false,
    created_at              timestamptz NOT NULL DEFAULT now(),
    created_by_human_id     bigint REFERENCES humans ON DELETE SET NULL,
    created_by_endpoint_id  bigint REFERENCES endpoints ON DELETE SET NULL
);
CREATE INDEX subscriptions_match ON subscriptions (owner) INCLUDE (sink_id);
CREATE INDEX subscriptions_sink ON subscriptions (sink_id);

-- The outbox (REQ-10, REQ-11). One row per (event, matched sink), written in
-- the transaction that caused it. A row is open for coalescing while it is
-- pending or held (D7): the partial unique index makes a repeat of the same
-- key land on the open row. Repeats of windowed keys are appended to
-- outbox_repeats instead of updating the row, so a storm on one key never
-- queues its writers behind one row lock; count is 1 + its repeats.
CREATE TABLE outbox (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sink_id           bigint NOT NULL REFERENCES sinks ON DELETE CASCADE,
    owner             owner_scope NOT NULL,
    event_type        text NOT NULL,
    severity          text NOT NULL CHECK (severity IN ('low', 'normal', 'high')),
    dedup_key         text,
    payload           jsonb NOT NULL,
    include_excerpt   boolean NOT NULL DEFAULT false,
    state             text NOT NULL DEFAULT 'pending'
                      CHECK (state IN ('pending', 'held', 'claimed', 'delivered', 'partial', 'undeliverable')),
    attempts          integer NOT NULL DEFAULT 0,
    due_at            timestamptz NOT NULL,
    first_attempt_at  timestamptz,
    claimed_by        text,
    claim_expires_at  timestamptz,
    last_class        text,
    delivered_count   integer,
    created_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz
);
CREATE UNIQUE INDEX outbox_open_key ON outbox (sink_id, dedup_key) WHERE state IN ('pending', 'held');
CREATE INDEX outbox_due ON outbox (due_at) WHERE state = 'pending';
CREATE INDEX outbox_claimed ON outbox (claim_expires_at) WHERE state = 'claimed';
CREATE INDEX outbox_held ON outbox (sink_id) WHERE state = 'held';
CREATE INDEX outbox_finished ON outbox (finished_at) WHERE finished_at IS NOT NULL;

-- Repeats of an open row's dedup key. Insert-only; no foreign key, so an
-- insert takes no lock on the outbox row. The janitor removes orphans.
CREATE TABLE outbox_repeats (
    outbox_id   bigint NOT NULL,
    sink_id     bigint NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_repeats_row ON outbox_repeats (outbox_id);

-- Delivery records: one per attempt (and per test message). Kept 30 days
-- (REQ-10) and kept when the sink is deleted (REQ-5), so sink_id has no
-- foreign key. Budgets count the rows with counts_budget (D8). Never holds a
-- body, header, URL or secret: only what was sent where and how it ended.
CREATE TABLE delivery_records (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sink_id          bigint NOT NULL,
    owner            owner_scope NOT NULL,
    outbox_id        bigint,
    event_type       text NOT NULL,
    attempt          integer NOT NULL DEFAULT 1,
    is_test          boolean NOT NULL DEFAULT false,
    counts_budget    boolean NOT NULL DEFAULT true,
    coalesced_rows   integer NOT NULL DEFAULT 1,
    status           text NOT NULL CHECK (status IN ('sending', 'delivered', 'failed', 'partial', 'undeliverable')),
    class            text,
    http_status      integer,
    sent_at          timestamptz NOT NULL,
    finished_at      timestamptz
);
CREATE INDEX delivery_records_budget ON delivery_records (sink_id, sent_at) WHERE counts_budget;
CREATE INDEX delivery_records_sink ON delivery_records (sink_id, id DESC);
CREATE INDEX delivery_records_age ON delivery_records (sent_at);

-- Digests (REQ-12). Built by the digest issue; the table is here so the
-- schema is whole.
CREATE TABLE digests (
    id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner                  owner_scope NOT NULL,
    name                   text NOT NULL,
    schedule               text NOT NULL,
    queue_ids              bigint[] NOT NULL DEFAULT '{}',
    sink_ids               bigint[] NOT NULL DEFAULT '{}',
    cairn_connection_id    bigint REFERENCES connections,
    skip_when_quiet        boolean NOT NULL DEFAULT true,
    quiet_threshold_secs   integer NOT NULL DEFAULT 3600,
    last_sent_at           timestamptz,
    created_at             timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner, name)
);

-- The reference host (D15-D17 stand-ins).
CREATE TABLE queues (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner       owner_scope NOT NULL,
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner, name)
);

CREATE TABLE webhooks (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner       owner_scope NOT NULL,
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner, name)
);

CREATE TABLE todos (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue_id             bigint NOT NULL REFERENCES queues,
    owner                owner_scope NOT NULL,
    title                text NOT NULL,
    payload              jsonb NOT NULL DEFAULT '{}',
    state                text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'claimed', 'done', 'dead')),
    claimed_by           bigint REFERENCES endpoints,
    lease_ttl_secs       integer NOT NULL DEFAULT 300 CHECK (lease_ttl_secs > 0),
    lease_expires_at     timestamptz,
    last_heartbeat_at    timestamptz,
    attempts             integer NOT NULL DEFAULT 0,
    attempt_cap          integer NOT NULL DEFAULT 3 CHECK (attempt_cap > 0),
    dead_letter_count    integer NOT NULL DEFAULT 0,
    dead_reason          text,
    origin_display       text,
    origin_permalink     text,
    webhook_id           bigint REFERENCES webhooks,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX todos_claimable ON todos (queue_id, id) WHERE state = 'pending';
CREATE INDEX todos_lease ON todos (lease_expires_at) WHERE state = 'claimed';
CREATE INDEX todos_claimed_by ON todos (claimed_by) WHERE state = 'claimed';

-- Attempt history (SPEC-0034 stand-in, D16).
CREATE TABLE attempts (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    todo_id          bigint NOT NULL REFERENCES todos ON DELETE CASCADE,
    number           integer NOT NULL,
    kind             text NOT NULL CHECK (kind IN ('agent', 'relay')),
    endpoint_id      bigint REFERENCES endpoints,
    outcome          text CHECK (outcome IN ('done', 'failed', 'expired', 'revoked', 'interrupted')),
    summary          text,
    artifact_handle  text,
    started_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    UNIQUE (todo_id, number)
);
