// Package web is the human web UI: server-rendered pages (html/template,
// embedded templates, one stylesheet, no JavaScript) for sinks and their
// subscriptions, connections, endpoints and the ops actor table.
//
// A human signs in by spending a one-time login link (GET /login/{token}),
// which sets a session cookie (HttpOnly, SameSite=Lax, Secure behind an
// https base URL). Every state change is a POST behind
// net/http.CrossOriginProtection, so a cross-origin form post is refused
// with 403; after a successful save the page redirects only to a fixed
// internal path built from ids.
//
// The package is a thin adapter over the engine's management service and
// the reference host's accounts and endpoints: it checks no rule of the
// spec itself, it shows the service's refusals (code, field, message) and
// keeps what the user typed, never a secret.
package web
