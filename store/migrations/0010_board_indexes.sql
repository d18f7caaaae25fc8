-- 0010: indexes for the board pages (D13) and the ops page.
--
-- /board/notifications lists the latest outbox rows of a human's scopes
-- and, for each, its delivery records; /board/todos/<id> finds a todo's
-- notifications by its board link.
CREATE INDEX outbox_owner_recent ON outbox (owner, id DESC);
CREATE INDEX delivery_records_outbox ON delivery_records (outbox_id) WHERE outbox_id IS NOT NULL;
