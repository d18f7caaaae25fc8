-- 0012: retention of the history tables, and deleting a webhook.
--
-- The janitor removes write_log rows, digest runs and received webhook
-- deliveries (their payloads, routing traces and the quarantine) older
-- than the retention period (30 days, as delivery records, REQ-10), in
-- bounded batches found through these indexes on their age.
CREATE INDEX write_log_age ON write_log (at);
CREATE INDEX digest_runs_age ON digest_runs (ran_at);
CREATE INDEX webhook_deliveries_age ON webhook_deliveries (received_at);

-- Deleting a webhook deletes its rules (webhook_rules cascades, as a
-- sink's subscriptions go with it) and keeps what it received, as a
-- deleted sink keeps its delivery records (REQ-5): the board links of
-- messages already sent still open, and the janitor removes the rows when
-- they are past retention. So webhook_deliveries keeps webhook_id without a
-- foreign key (ids are never reused), and a todo a deleted webhook routed
-- stays, no longer pointing at it.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_webhook_id_fkey;
ALTER TABLE todos DROP CONSTRAINT todos_webhook_id_fkey,
    ADD CONSTRAINT todos_webhook_id_fkey FOREIGN KEY (webhook_id) REFERENCES webhooks ON DELETE SET NULL;
