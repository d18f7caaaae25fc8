// Package rest is the operator REST API under /api/v1: sinks, their
// subscriptions, send test and delivery records, connections (secrets
// write-only), and endpoints (vend, list, revoke), with the embedded
// OpenAPI 3.1 document at /api/v1/openapi.yaml.
//
// Every request carries a human's operator bearer token (D4) and spends one
// token of that human's share of the per-human limiter; every answer is
// JSON with the standard security headers, and every error has the shape
// {"error": {code, field, scheme, message}}. The handlers are thin adapters
// over the engine's management service and the reference host: every rule
// of the spec (scopes, roles, ceilings, schemes, budgets, the send-test
// limit) is checked there, so this API refuses exactly what the web UI and
// the MCP verbs refuse.
package rest
