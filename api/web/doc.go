// Package web is the human web UI: server-rendered pages (html/template,
// embedded templates, one stylesheet, and one small script file for copy
// buttons, which the pages work without) for sinks and their
// subscriptions, connections, queues and todos, endpoints, the ops view,
// and the board pages every message links to (D13): /board/todos/<id>,
// /board/queues/<name> and /board/notifications, each in its own file
// (board_*.go), behind the session and scope-checked (another scope's item
// is 404, D3).
//
// A human signs in by spending a one-time login link (GET /login/{token}),
// which sets a session cookie (HttpOnly, SameSite=Lax, Secure behind an
// https base URL). Every state change is a POST behind
// net/http.CrossOriginProtection, so a cross-origin form post is refused
// with the styled 403 page (CrossOriginDenied, which /demo uses too);
// after a successful save the page redirects only to a fixed internal
// path built from ids, with a notice named by key (never text a request
// carried). Delete and Revoke go through a GET confirmation page.
//
// The package is a thin adapter over the engine's management service and
// the reference host's accounts, endpoints and todos: it checks no rule of
// the spec itself. It shows the service's refusals in words, under the
// field they are about (ux.go maps the service's field names to inputs),
// and keeps what the user typed, never a secret.
package web
