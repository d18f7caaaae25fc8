-- +goose Up
-- The reference host's tables (humans, teams, endpoints, queues, todos,
-- webhooks, ...), in the connection's current schema (normally public): the
-- state of the host's tables after the legacy migrations 0001 to 0020
-- (store/migrations), as one file. The host's set runs after the engine's:
-- its owner columns use the engine's domain switchboard.owner_scope.

CREATE TABLE api_tokens (
    id bigint NOT NULL,
    human_id bigint NOT NULL,
    token_hash bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone
);

ALTER TABLE api_tokens ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME api_tokens_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE attempts (
    id bigint NOT NULL,
    todo_id bigint NOT NULL,
    number integer NOT NULL,
    kind text NOT NULL,
    endpoint_id bigint,
    outcome text,
    summary text,
    artifact_handle text,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT attempts_kind_check CHECK ((kind = ANY (ARRAY['agent'::text, 'relay'::text]))),
    CONSTRAINT attempts_outcome_check CHECK ((outcome = ANY (ARRAY['done'::text, 'failed'::text, 'expired'::text, 'revoked'::text, 'interrupted'::text])))
);

ALTER TABLE attempts ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME attempts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE endpoints (
    id bigint NOT NULL,
    owner switchboard.owner_scope NOT NULL,
    name text NOT NULL,
    accountable_human_id bigint NOT NULL,
    grants text[] DEFAULT '{todos,rules}'::text[] NOT NULL,
    credential_hash bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone
);

ALTER TABLE endpoints ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME endpoints_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE humans (
    id bigint NOT NULL,
    name text NOT NULL,
    email text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    is_operator boolean DEFAULT false NOT NULL
);

ALTER TABLE humans ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME humans_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE login_links (
    token_hash bytea NOT NULL,
    human_id bigint NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone
);

CREATE TABLE queue_friends (
    queue_id bigint NOT NULL,
    friend switchboard.owner_scope NOT NULL
);

CREATE TABLE queues (
    id bigint NOT NULL,
    owner switchboard.owner_scope NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE queues ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME queues_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE served_base_urls (
    base_url text NOT NULL,
    seen_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE sessions (
    token_hash bytea NOT NULL,
    human_id bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL
);

CREATE TABLE team_members (
    team_id bigint NOT NULL,
    human_id bigint NOT NULL,
    role text NOT NULL,
    CONSTRAINT team_members_role_check CHECK ((role = ANY (ARRAY['owner'::text, 'admin'::text, 'member'::text])))
);

CREATE TABLE teams (
    id bigint NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE teams ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME teams_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE todos (
    id bigint NOT NULL,
    queue_id bigint NOT NULL,
    owner switchboard.owner_scope NOT NULL,
    title text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    claimed_by bigint,
    lease_ttl_secs integer DEFAULT 300 NOT NULL,
    lease_expires_at timestamp with time zone,
    last_heartbeat_at timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL,
    attempt_cap integer DEFAULT 3 NOT NULL,
    dead_letter_count integer DEFAULT 0 NOT NULL,
    dead_reason text,
    origin_display text,
    origin_permalink text,
    webhook_id bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT todos_attempt_cap_check CHECK ((attempt_cap > 0)),
    CONSTRAINT todos_lease_ttl_secs_check CHECK ((lease_ttl_secs > 0)),
    CONSTRAINT todos_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'claimed'::text, 'done'::text, 'dead'::text])))
);

ALTER TABLE todos ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME todos_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE webhook_deliveries (
    id bigint NOT NULL,
    webhook_id bigint NOT NULL,
    owner switchboard.owner_scope NOT NULL,
    received_at timestamp with time zone NOT NULL,
    sender text,
    subject_key text,
    title text,
    outcome text NOT NULL,
    todo_id bigint,
    payload jsonb NOT NULL,
    trace jsonb NOT NULL,
    CONSTRAINT webhook_deliveries_outcome_check CHECK ((outcome = ANY (ARRAY['routed'::text, 'dropped'::text, 'quarantined'::text, 'unrouted'::text])))
);

ALTER TABLE webhook_deliveries ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME webhook_deliveries_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE webhook_message_ids (
    webhook_id bigint NOT NULL,
    message_id text NOT NULL,
    delivery_id bigint NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT webhook_message_ids_message_id_check CHECK (((length(message_id) >= 1) AND (length(message_id) <= 256)))
);

CREATE TABLE webhook_rules (
    id bigint NOT NULL,
    webhook_id bigint NOT NULL,
    "position" integer NOT NULL,
    name text NOT NULL,
    expr text NOT NULL,
    queue_id bigint,
    drop_delivery boolean DEFAULT false NOT NULL,
    notify text,
    notify_severity text,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_by_human_id bigint,
    updated_by_endpoint_id bigint,
    CONSTRAINT webhook_rules_notify_severity_check CHECK ((notify_severity = ANY (ARRAY['low'::text, 'normal'::text, 'high'::text])))
);

ALTER TABLE webhook_rules ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME webhook_rules_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE webhooks (
    id bigint NOT NULL,
    owner switchboard.owner_scope NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    secret bytea,
    trusted_senders text[] DEFAULT '{}'::text[] NOT NULL,
    sender_expr text DEFAULT '.sender.login'::text NOT NULL,
    subject_expr text DEFAULT ''::text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE webhooks ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME webhooks_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

ALTER TABLE ONLY api_tokens
    ADD CONSTRAINT api_tokens_pkey PRIMARY KEY (id);

ALTER TABLE ONLY api_tokens
    ADD CONSTRAINT api_tokens_token_hash_key UNIQUE (token_hash);

ALTER TABLE ONLY attempts
    ADD CONSTRAINT attempts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY attempts
    ADD CONSTRAINT attempts_todo_id_number_key UNIQUE (todo_id, number);

ALTER TABLE ONLY endpoints
    ADD CONSTRAINT endpoints_credential_hash_key UNIQUE (credential_hash);

ALTER TABLE ONLY endpoints
    ADD CONSTRAINT endpoints_owner_name_key UNIQUE (owner, name);

ALTER TABLE ONLY endpoints
    ADD CONSTRAINT endpoints_pkey PRIMARY KEY (id);

ALTER TABLE ONLY humans
    ADD CONSTRAINT humans_email_key UNIQUE (email);

ALTER TABLE ONLY humans
    ADD CONSTRAINT humans_pkey PRIMARY KEY (id);

ALTER TABLE ONLY login_links
    ADD CONSTRAINT login_links_pkey PRIMARY KEY (token_hash);

ALTER TABLE ONLY queue_friends
    ADD CONSTRAINT queue_friends_pkey PRIMARY KEY (queue_id, friend);

ALTER TABLE ONLY queues
    ADD CONSTRAINT queues_owner_name_key UNIQUE (owner, name);

ALTER TABLE ONLY queues
    ADD CONSTRAINT queues_pkey PRIMARY KEY (id);

ALTER TABLE ONLY served_base_urls
    ADD CONSTRAINT served_base_urls_pkey PRIMARY KEY (base_url);

ALTER TABLE ONLY sessions
    ADD CONSTRAINT sessions_pkey PRIMARY KEY (token_hash);

ALTER TABLE ONLY team_members
    ADD CONSTRAINT team_members_pkey PRIMARY KEY (team_id, human_id);

ALTER TABLE ONLY teams
    ADD CONSTRAINT teams_name_key UNIQUE (name);

ALTER TABLE ONLY teams
    ADD CONSTRAINT teams_pkey PRIMARY KEY (id);

ALTER TABLE ONLY todos
    ADD CONSTRAINT todos_pkey PRIMARY KEY (id);

ALTER TABLE ONLY webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id);

ALTER TABLE ONLY webhook_message_ids
    ADD CONSTRAINT webhook_message_ids_pkey PRIMARY KEY (webhook_id, message_id);

ALTER TABLE ONLY webhook_rules
    ADD CONSTRAINT webhook_rules_pkey PRIMARY KEY (id);

ALTER TABLE ONLY webhook_rules
    ADD CONSTRAINT webhook_rules_webhook_id_position_key UNIQUE (webhook_id, "position") DEFERRABLE INITIALLY DEFERRED;

ALTER TABLE ONLY webhooks
    ADD CONSTRAINT webhooks_owner_name_key UNIQUE (owner, name);

ALTER TABLE ONLY webhooks
    ADD CONSTRAINT webhooks_pkey PRIMARY KEY (id);

CREATE INDEX sessions_expiry ON sessions USING btree (expires_at);

CREATE INDEX team_members_human ON team_members USING btree (human_id);

CREATE INDEX todos_claimable ON todos USING btree (queue_id, id) WHERE (state = 'pending'::text);

CREATE INDEX todos_claimed_by ON todos USING btree (claimed_by) WHERE (state = 'claimed'::text);

CREATE INDEX todos_digest_claimed ON todos USING btree (queue_id) INCLUDE (owner, lease_expires_at, last_heartbeat_at, updated_at, lease_ttl_secs) WHERE (state = 'claimed'::text);

CREATE INDEX todos_digest_dead ON todos USING btree (queue_id, updated_at) INCLUDE (owner) WHERE (state = 'dead'::text);

CREATE INDEX todos_digest_pending ON todos USING btree (queue_id, created_at) INCLUDE (owner) WHERE (state = 'pending'::text);

CREATE INDEX todos_lease ON todos USING btree (lease_expires_at) WHERE (state = 'claimed'::text);

CREATE INDEX webhook_deliveries_age ON webhook_deliveries USING btree (received_at);

CREATE INDEX webhook_deliveries_quarantined ON webhook_deliveries USING btree (owner, received_at) WHERE (outcome = 'quarantined'::text);

CREATE INDEX webhook_deliveries_recent ON webhook_deliveries USING btree (webhook_id, id DESC);

CREATE INDEX webhook_message_ids_expiry ON webhook_message_ids USING btree (expires_at);

ALTER TABLE ONLY api_tokens
    ADD CONSTRAINT api_tokens_human_id_fkey FOREIGN KEY (human_id) REFERENCES humans(id) ON DELETE CASCADE;

ALTER TABLE ONLY attempts
    ADD CONSTRAINT attempts_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES endpoints(id);

ALTER TABLE ONLY attempts
    ADD CONSTRAINT attempts_todo_id_fkey FOREIGN KEY (todo_id) REFERENCES todos(id) ON DELETE CASCADE;

ALTER TABLE ONLY endpoints
    ADD CONSTRAINT endpoints_accountable_human_id_fkey FOREIGN KEY (accountable_human_id) REFERENCES humans(id);

ALTER TABLE ONLY login_links
    ADD CONSTRAINT login_links_human_id_fkey FOREIGN KEY (human_id) REFERENCES humans(id) ON DELETE CASCADE;

ALTER TABLE ONLY queue_friends
    ADD CONSTRAINT queue_friends_queue_id_fkey FOREIGN KEY (queue_id) REFERENCES queues(id) ON DELETE CASCADE;

ALTER TABLE ONLY sessions
    ADD CONSTRAINT sessions_human_id_fkey FOREIGN KEY (human_id) REFERENCES humans(id) ON DELETE CASCADE;

ALTER TABLE ONLY team_members
    ADD CONSTRAINT team_members_human_id_fkey FOREIGN KEY (human_id) REFERENCES humans(id) ON DELETE CASCADE;

ALTER TABLE ONLY team_members
    ADD CONSTRAINT team_members_team_id_fkey FOREIGN KEY (team_id) REFERENCES teams(id) ON DELETE CASCADE;

ALTER TABLE ONLY todos
    ADD CONSTRAINT todos_claimed_by_fkey FOREIGN KEY (claimed_by) REFERENCES endpoints(id);

ALTER TABLE ONLY todos
    ADD CONSTRAINT todos_queue_id_fkey FOREIGN KEY (queue_id) REFERENCES queues(id);

ALTER TABLE ONLY todos
    ADD CONSTRAINT todos_webhook_id_fkey FOREIGN KEY (webhook_id) REFERENCES webhooks(id) ON DELETE SET NULL;

ALTER TABLE ONLY webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_todo_id_fkey FOREIGN KEY (todo_id) REFERENCES todos(id) ON DELETE SET NULL;

ALTER TABLE ONLY webhook_rules
    ADD CONSTRAINT webhook_rules_queue_id_fkey FOREIGN KEY (queue_id) REFERENCES queues(id) ON DELETE SET NULL;

ALTER TABLE ONLY webhook_rules
    ADD CONSTRAINT webhook_rules_updated_by_endpoint_id_fkey FOREIGN KEY (updated_by_endpoint_id) REFERENCES endpoints(id) ON DELETE SET NULL;

ALTER TABLE ONLY webhook_rules
    ADD CONSTRAINT webhook_rules_updated_by_human_id_fkey FOREIGN KEY (updated_by_human_id) REFERENCES humans(id) ON DELETE SET NULL;

ALTER TABLE ONLY webhook_rules
    ADD CONSTRAINT webhook_rules_webhook_id_fkey FOREIGN KEY (webhook_id) REFERENCES webhooks(id) ON DELETE CASCADE;
