// Package hooks serves POST /hooks/{id}, where senders (a forge, a script
// with curl) post webhook deliveries. It is the one unauthenticated route
// of the server: a delivery is accepted only when its
// X-Switchboard-Signature header is the HMAC-SHA256 of the body under the
// webhook's secret. Bodies are bounded at 256 KiB (not the management
// routes' 16 KiB); everything else — the signature check, routing,
// quarantine and the events they cause — is host.Webhooks.Receive.
package hooks
