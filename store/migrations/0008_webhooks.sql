-- 0008: webhooks that receive, routing rules with notify, quarantine
-- (SPEC-0020 and SPEC-0026 stand-ins, D17).
--
-- A webhook has a signing secret (sealed like a connection secret, D18),
-- the senders it trusts, where in a payload the sender and the subject are
-- (jq expressions, compiled at save), and an ordered list of rules.
ALTER TABLE webhooks
    ADD COLUMN secret           bytea,
    ADD COLUMN trusted_senders  text[] NOT NULL DEFAULT '{}',
    ADD COLUMN sender_expr      text NOT NULL DEFAULT '.sender.login',
    ADD COLUMN subject_expr     text NOT NULL DEFAULT '',
    ADD COLUMN updated_at       timestamptz NOT NULL DEFAULT now();

-- Routing rules, in order. notify names a sink of the webhook's owner
-- scope by name (checked at save, and again at every match: a sink since
-- deleted or disabled is a trace fault). queue_id may be a queue of
-- another scope that befriended the webhook's (queue_friends).
CREATE TABLE webhook_rules (
    id                      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id              bigint NOT NULL REFERENCES webhooks ON DELETE CASCADE,
    position                integer NOT NULL,
    name                    text NOT NULL,
    expr                    text NOT NULL,
    queue_id                bigint REFERENCES queues ON DELETE SET NULL,
    drop_delivery           boolean NOT NULL DEFAULT false,
    notify                  text,
    notify_severity         text CHECK (notify_severity IN ('low', 'normal', 'high')),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    updated_by_human_id     bigint REFERENCES humans ON DELETE SET NULL,
    updated_by_endpoint_id  bigint REFERENCES endpoints ON DELETE SET NULL,
    UNIQUE (webhook_id, position) DEFERRABLE INITIALLY DEFERRED
);

-- Friendship (SPEC-0033 stand-in): the queue's owner lets the webhooks of
-- scope friend route deliveries into it as todos.
CREATE TABLE queue_friends (
    queue_id  bigint NOT NULL REFERENCES queues ON DELETE CASCADE,
    friend    owner_scope NOT NULL,
    PRIMARY KEY (queue_id, friend)
);

-- Every received delivery that passed the signature check: its subject
-- key, its outcome and its routing trace. Quarantined deliveries are the
-- quarantine (SPEC-0026 stand-in); their insert and the
-- delivery.quarantined event are one transaction (REQ-10).
CREATE TABLE webhook_deliveries (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id   bigint NOT NULL REFERENCES webhooks ON DELETE CASCADE,
    owner        owner_scope NOT NULL,
    received_at  timestamptz NOT NULL,
    sender       text,
    subject_key  text,
    title        text,
    outcome      text NOT NULL CHECK (outcome IN ('routed', 'dropped', 'quarantined', 'unrouted')),
    todo_id      bigint REFERENCES todos ON DELETE SET NULL,
    payload      jsonb NOT NULL,
    trace        jsonb NOT NULL
);
CREATE INDEX webhook_deliveries_recent ON webhook_deliveries (webhook_id, id DESC);
