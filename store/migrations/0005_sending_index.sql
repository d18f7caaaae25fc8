-- 0005: each attempt closes the row's abandoned attempts (records left
-- "sending" by an instance that died or an actor that panicked); find
-- them by row without scanning 30 days of delivery records.
CREATE INDEX delivery_records_sending ON delivery_records (outbox_id) WHERE status = 'sending';
