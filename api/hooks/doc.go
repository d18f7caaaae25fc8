// Package hooks serves POST /hooks/{id}, where senders (a forge, a script
// with curl) post webhook deliveries. It is the one unauthenticated route
// of the server: a delivery is accepted only when it is signed the Standard
// Webhooks way under the webhook's secret (webhook-id, webhook-timestamp
// within 5 minutes, webhook-signature over id, timestamp and body), and
// only once per webhook-id. Bodies are bounded at 256 KiB (not the management
// routes' 16 KiB); everything else — the signature check, routing,
// quarantine and the events they cause — is host.Webhooks.Receive.
package hooks
