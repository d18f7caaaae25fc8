-- 0017: deliveries to /hooks/{id} are signed the Standard Webhooks way
-- (webhook-id, webhook-timestamp, webhook-signature), and a message id is
-- taken once per webhook (issue 18 item 9).
--
-- A row is inserted in the transaction that stores the delivery it names,
-- so a message id is "seen" exactly when its delivery committed: a refused
-- delivery (bad JSON, say) leaves no row and may be sent again. The primary
-- key is what refuses a repeat, across instances: a second delivery with
-- the same id waits on the first's insert and then finds it. A row is kept
-- until expires_at: the message's own timestamp plus the tolerance (after
-- which its signature is refused as stale anyway) plus a margin for the
-- instances' clocks; the janitor then deletes it (store.PruneSpent).
-- No foreign key to webhooks or webhook_deliveries: a deleted webhook's
-- ids never come back, and the rows are gone within minutes.
CREATE TABLE webhook_message_ids (
    webhook_id   bigint NOT NULL,
    message_id   text NOT NULL CHECK (length(message_id) BETWEEN 1 AND 256),
    delivery_id  bigint NOT NULL,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (webhook_id, message_id)
);
CREATE INDEX webhook_message_ids_expiry ON webhook_message_ids (expires_at);
