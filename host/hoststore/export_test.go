package hoststore

// WebhookDeliveriesExpiryForTest is the janitor's delete of old webhook
// deliveries, for the test of its plan.
const WebhookDeliveriesExpiryForTest = webhookDeliveriesExpiry
