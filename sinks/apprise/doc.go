// Package apprise is the Apprise API sink adapter: its per-kind options and
// connection secret (config.go) and its delivery (REQ-4): stateful to
// POST {base}/notify/{config_key}, stateless to POST {base}/notify/ with the
// Apprise URLs from the secret. 200 is delivered, 424 partial, 204 a
// configuration error.
package apprise
