-- +goose Up
-- The engine's tables, in their own schema "switchboard": the state of the
-- engine's tables after the legacy migrations 0001 to 0020 (store/migrations),
-- as one file. Every name is schema-qualified, so the file runs the same on
-- any search_path, and nothing here references a table outside the schema:
-- owners and actors (humans, endpoints) are opaque ids the embedder's
-- Directory vouches for. A database migrated by the legacy set is converted
-- in place to exactly this (store.convertLegacy; TestConvertedSchemaMatches
-- keeps the two equal).

CREATE SCHEMA IF NOT EXISTS switchboard;

CREATE DOMAIN switchboard.owner_scope AS text
	CONSTRAINT owner_scope_check CHECK ((VALUE ~ '^(human|team):[1-9][0-9]*$'::text));

CREATE TABLE switchboard.agent_pages (
    endpoint_id bigint NOT NULL,
    paged_at timestamp with time zone NOT NULL
);

CREATE TABLE switchboard.connections (
    id bigint NOT NULL,
    owner switchboard.owner_scope NOT NULL,
    kind text NOT NULL,
    name text NOT NULL,
    account_key text NOT NULL,
    secret bytea,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    created_by_human_id bigint,
    CONSTRAINT connections_kind_check CHECK ((kind = ANY (ARRAY['gotify'::text, 'apprise'::text, 'cairn'::text])))
);

ALTER TABLE switchboard.connections ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME switchboard.connections_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE switchboard.delivery_records (
    id bigint NOT NULL,
    sink_id bigint NOT NULL,
    owner switchboard.owner_scope NOT NULL,
    outbox_id bigint,
    event_type text NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    is_test boolean DEFAULT false NOT NULL,
    counts_budget boolean DEFAULT true NOT NULL,
    coalesced_rows integer DEFAULT 1 NOT NULL,
    status text NOT NULL,
    class text,
    http_status integer,
    sent_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone,
    budget_tat timestamp with time zone,
    CONSTRAINT delivery_records_status_check CHECK ((status = ANY (ARRAY['sending'::text, 'delivered'::text, 'failed'::text, 'partial'::text, 'undeliverable'::text])))
)
WITH (fillfactor='50');

ALTER TABLE switchboard.delivery_records ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME switchboard.delivery_records_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE switchboard.digest_runs (
    id bigint NOT NULL,
    digest_id bigint NOT NULL,
    owner switchboard.owner_scope NOT NULL,
    kind text NOT NULL,
    outcome text NOT NULL,
    slot_at timestamp with time zone,
    ran_at timestamp with time zone DEFAULT now() NOT NULL,
    headline text DEFAULT ''::text NOT NULL,
    sinks_queued integer DEFAULT 0 NOT NULL,
    artifact_url text,
    cairn_error text,
    CONSTRAINT digest_runs_kind_check CHECK ((kind = ANY (ARRAY['scheduled'::text, 'manual'::text]))),
    CONSTRAINT digest_runs_outcome_check CHECK ((outcome = ANY (ARRAY['sent'::text, 'quiet'::text, 'late'::text, 'no_target'::text])))
);

ALTER TABLE switchboard.digest_runs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME switchboard.digest_runs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE switchboard.digests (
    id bigint NOT NULL,
    owner switchboard.owner_scope NOT NULL,
    name text NOT NULL,
    schedule text NOT NULL,
    queue_ids bigint[] DEFAULT '{}'::bigint[] NOT NULL,
    sink_ids bigint[] DEFAULT '{}'::bigint[] NOT NULL,
    cairn_connection_id bigint,
    skip_when_quiet boolean DEFAULT true NOT NULL,
    quiet_threshold_secs integer DEFAULT 3600 NOT NULL,
    last_sent_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_slot_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_by_human_id bigint,
    updated_by_endpoint_id bigint,
    CONSTRAINT digests_quiet_threshold CHECK ((quiet_threshold_secs > 0))
);

ALTER TABLE switchboard.digests ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME switchboard.digests_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE switchboard.outbox (
    id bigint NOT NULL,
    sink_id bigint NOT NULL,
    owner switchboard.owner_scope NOT NULL,
    event_type text NOT NULL,
    severity text NOT NULL,
    dedup_key text,
    payload jsonb NOT NULL,
    include_excerpt boolean DEFAULT false NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    due_at timestamp with time zone NOT NULL,
    first_attempt_at timestamp with time zone,
    claimed_by text,
    claim_expires_at timestamp with time zone,
    last_class text,
    delivered_count integer,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    count integer DEFAULT 1 NOT NULL,
    windowed boolean DEFAULT false NOT NULL,
    had_partial boolean DEFAULT false NOT NULL,
    attempt_record_id bigint,
    claim_token bigint,
    CONSTRAINT outbox_claimed_by_claimed CHECK (((state = 'claimed'::text) = (claimed_by IS NOT NULL))),
    CONSTRAINT outbox_severity_check CHECK ((severity = ANY (ARRAY['low'::text, 'normal'::text, 'high'::text]))),
    CONSTRAINT outbox_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'held'::text, 'claimed'::text, 'delivered'::text, 'partial'::text, 'undeliverable'::text])))
)
WITH (fillfactor='80');

CREATE SEQUENCE switchboard.outbox_claim_token
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

CREATE TABLE switchboard.outbox_events (
    id bigint NOT NULL,
    owner text NOT NULL,
    event_type text NOT NULL,
    match_types text[] NOT NULL,
    severity text NOT NULL,
    severity_rank smallint NOT NULL,
    queue_id bigint NOT NULL,
    endpoint_id bigint NOT NULL,
    webhook_id bigint NOT NULL,
    dedup_key text,
    windowed boolean NOT NULL,
    payload jsonb NOT NULL,
    body text,
    due_at timestamp with time zone NOT NULL,
    sink_ids bigint[] DEFAULT '{}'::bigint[] NOT NULL,
    excerpt_sink_ids bigint[] DEFAULT '{}'::bigint[] NOT NULL
);

ALTER TABLE switchboard.outbox_events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME switchboard.outbox_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

ALTER TABLE switchboard.outbox ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME switchboard.outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE switchboard.outbox_instances (
    name text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    alive_until timestamp with time zone NOT NULL
);

CREATE TABLE switchboard.sinks (
    id bigint NOT NULL,
    owner switchboard.owner_scope NOT NULL,
    name text NOT NULL,
    kind text NOT NULL,
    connection_id bigint NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    options jsonb DEFAULT '{}'::jsonb NOT NULL,
    budget_per_hour integer DEFAULT 30 NOT NULL,
    budget_burst integer DEFAULT 10 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_by_human_id bigint,
    updated_by_endpoint_id bigint,
    CONSTRAINT sinks_budget_burst_check CHECK ((budget_burst > 0)),
    CONSTRAINT sinks_budget_per_hour_check CHECK ((budget_per_hour > 0)),
    CONSTRAINT sinks_kind_check CHECK ((kind = ANY (ARRAY['gotify'::text, 'apprise'::text])))
);

ALTER TABLE switchboard.sinks ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME switchboard.sinks_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE switchboard.subscriptions (
    id bigint NOT NULL,
    sink_id bigint NOT NULL,
    owner switchboard.owner_scope NOT NULL,
    event_types text[] NOT NULL,
    queue_ids bigint[] DEFAULT '{}'::bigint[] NOT NULL,
    endpoint_ids bigint[] DEFAULT '{}'::bigint[] NOT NULL,
    webhook_ids bigint[] DEFAULT '{}'::bigint[] NOT NULL,
    min_severity_rank smallint DEFAULT 0 NOT NULL,
    include_excerpt boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    created_by_human_id bigint,
    created_by_endpoint_id bigint,
    CONSTRAINT subscriptions_event_types_check CHECK ((cardinality(event_types) > 0)),
    CONSTRAINT subscriptions_min_severity_rank_check CHECK (((min_severity_rank >= 0) AND (min_severity_rank <= 2)))
);

ALTER TABLE switchboard.subscriptions ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME switchboard.subscriptions_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE switchboard.write_log (
    id bigint NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    owner switchboard.owner_scope NOT NULL,
    action text NOT NULL,
    object_kind text NOT NULL,
    object_id bigint NOT NULL,
    acting_human_id bigint,
    acting_endpoint_id bigint
);

ALTER TABLE switchboard.write_log ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME switchboard.write_log_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

ALTER TABLE ONLY switchboard.connections
    ADD CONSTRAINT connections_owner_name_key UNIQUE (owner, name);

ALTER TABLE ONLY switchboard.connections
    ADD CONSTRAINT connections_pkey PRIMARY KEY (id);

ALTER TABLE ONLY switchboard.delivery_records
    ADD CONSTRAINT delivery_records_pkey PRIMARY KEY (id);

ALTER TABLE ONLY switchboard.digest_runs
    ADD CONSTRAINT digest_runs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY switchboard.digests
    ADD CONSTRAINT digests_owner_name_key UNIQUE (owner, name);

ALTER TABLE ONLY switchboard.digests
    ADD CONSTRAINT digests_pkey PRIMARY KEY (id);

ALTER TABLE ONLY switchboard.outbox_events
    ADD CONSTRAINT outbox_events_pkey PRIMARY KEY (id);

ALTER TABLE ONLY switchboard.outbox_instances
    ADD CONSTRAINT outbox_instances_pkey PRIMARY KEY (name);

ALTER TABLE ONLY switchboard.outbox
    ADD CONSTRAINT outbox_pkey PRIMARY KEY (id);

ALTER TABLE ONLY switchboard.sinks
    ADD CONSTRAINT sinks_owner_name_key UNIQUE (owner, name);

ALTER TABLE ONLY switchboard.sinks
    ADD CONSTRAINT sinks_pkey PRIMARY KEY (id);

ALTER TABLE ONLY switchboard.subscriptions
    ADD CONSTRAINT subscriptions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY switchboard.write_log
    ADD CONSTRAINT write_log_pkey PRIMARY KEY (id);

CREATE INDEX agent_pages_recent ON switchboard.agent_pages USING btree (endpoint_id, paged_at);

CREATE INDEX delivery_records_age ON switchboard.delivery_records USING btree (sent_at);

CREATE INDEX delivery_records_outbox ON switchboard.delivery_records USING btree (outbox_id) WHERE (outbox_id IS NOT NULL);

CREATE INDEX delivery_records_sink ON switchboard.delivery_records USING btree (sink_id, id DESC);

CREATE INDEX delivery_records_tat ON switchboard.delivery_records USING btree (sink_id, budget_tat DESC) WHERE counts_budget;

CREATE INDEX delivery_records_tests ON switchboard.delivery_records USING btree (sink_id, sent_at) WHERE is_test;

CREATE INDEX digest_runs_age ON switchboard.digest_runs USING btree (ran_at);

CREATE INDEX digest_runs_digest ON switchboard.digest_runs USING btree (digest_id, id DESC);

CREATE INDEX digests_owner ON switchboard.digests USING btree (owner);

CREATE INDEX outbox_claimed_by ON switchboard.outbox USING btree (claimed_by, sink_id) WHERE (state = 'claimed'::text);

CREATE INDEX outbox_due_order ON switchboard.outbox USING btree (due_at, id) WHERE (state = 'pending'::text);

CREATE INDEX outbox_finished ON switchboard.outbox USING btree (finished_at) WHERE (finished_at IS NOT NULL);

CREATE INDEX outbox_held ON switchboard.outbox USING btree (sink_id, due_at) WHERE (state = 'held'::text);

CREATE INDEX outbox_held_due ON switchboard.outbox USING btree (due_at) WHERE (state = 'held'::text);

CREATE UNIQUE INDEX outbox_open_key ON switchboard.outbox USING btree (sink_id, dedup_key) WHERE (state = ANY (ARRAY['pending'::text, 'held'::text]));

CREATE INDEX outbox_owner_recent ON switchboard.outbox USING btree (owner, id DESC);

CREATE INDEX outbox_undeliverable ON switchboard.outbox USING btree (owner, finished_at) WHERE (state = 'undeliverable'::text);

CREATE INDEX sinks_connection ON switchboard.sinks USING btree (connection_id);

CREATE INDEX subscriptions_match ON switchboard.subscriptions USING btree (owner) INCLUDE (sink_id);

CREATE INDEX subscriptions_sink ON switchboard.subscriptions USING btree (sink_id);

CREATE INDEX write_log_age ON switchboard.write_log USING btree (at);

CREATE INDEX write_log_object ON switchboard.write_log USING btree (object_kind, object_id);

CREATE INDEX write_log_owner ON switchboard.write_log USING btree (owner, at);

ALTER TABLE ONLY switchboard.digest_runs
    ADD CONSTRAINT digest_runs_digest_id_fkey FOREIGN KEY (digest_id) REFERENCES switchboard.digests(id) ON DELETE CASCADE;

ALTER TABLE ONLY switchboard.digests
    ADD CONSTRAINT digests_cairn_connection_id_fkey FOREIGN KEY (cairn_connection_id) REFERENCES switchboard.connections(id);

ALTER TABLE ONLY switchboard.outbox
    ADD CONSTRAINT outbox_sink_id_fkey FOREIGN KEY (sink_id) REFERENCES switchboard.sinks(id) ON DELETE CASCADE;

ALTER TABLE ONLY switchboard.sinks
    ADD CONSTRAINT sinks_connection_id_fkey FOREIGN KEY (connection_id) REFERENCES switchboard.connections(id);

ALTER TABLE ONLY switchboard.subscriptions
    ADD CONSTRAINT subscriptions_sink_id_fkey FOREIGN KEY (sink_id) REFERENCES switchboard.sinks(id) ON DELETE CASCADE;
