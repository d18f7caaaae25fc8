package rest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/rest"
)

// TestUnauthenticated: every route, and a path no route takes, answers a
// request without a valid operator token 401 unauthenticated with
// WWW-Authenticate: Bearer and the standard headers.
func TestUnauthenticated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, tok := b.human(t)
	endpoint, credential := b.vend(t, tok, "", nil)
	require.Positive(t, endpoint)

	paths := []string{"GET /api/v1/nowhere", "DELETE /api/v1/openapi.yaml"}
	for _, rt := range rest.Routes() {
		paths = append(paths, strings.NewReplacer("{id}", "1", "{sub}", "1").Replace(rt))
	}
	for _, p := range paths {
		method, path, _ := strings.Cut(p, " ")
		for _, token := range []string{"", "sbo_not-a-token", "not-even-prefixed", credential} {
			e := b.refused(t, http.StatusUnauthorized, "unauthenticated", token, method, path, nil)
			require.NotEmpty(t, e.Message)
		}
		r := b.do(t, "", method, path, nil)
		require.True(t, strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer"), r.header.Get("WWW-Authenticate"))
	}
}

// TestNoRoute: an authenticated request no route takes is a JSON 404
// not_found, or 405 with Allow when the path is routed for other methods,
// with the standard headers.
func TestNoRoute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, tok := b.human(t)
	b.refused(t, http.StatusNotFound, "not_found", tok, "GET", "/api/v1/nowhere", nil)
	b.refused(t, http.StatusNotFound, "not_found", tok, "GET", "/elsewhere", nil)
	b.refused(t, http.StatusNotFound, "not_found", tok, "GET", "/api/v1/sinks/not-a-number", nil)

	for path, allow := range map[string]string{
		"/api/v1/sinks":                 "GET, HEAD, POST",
		"/api/v1/sinks/1/test":          "POST",
		"/api/v1/sinks/1/subscriptions": "GET, HEAD, POST, PUT",
		"/api/v1/openapi.yaml":          "GET, HEAD",
	} {
		b.refused(t, http.StatusMethodNotAllowed, "method_not_allowed", tok, "DELETE", path, nil)
		require.Equal(t, allow, b.do(t, tok, "DELETE", path, nil).header.Get("Allow"), path)
	}
}

// TestHumanLimiter: every route shares the per-human limiter; past its
// burst a human gets 429 rate_limited (on a route or not) while another
// human is unaffected.
func TestHumanLimiter(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.limiter = httpx.NewLimiter(0.001, 3) })
	_, tokA := b.human(t)
	_, tokB := b.human(t)
	b.ok(t, http.StatusOK, tokA, "GET", "/api/v1/sinks", nil)
	b.ok(t, http.StatusOK, tokA, "GET", "/api/v1/connections", nil)
	b.ok(t, http.StatusOK, tokA, "GET", "/api/v1/openapi.yaml", nil)
	counts := b.counts(t)
	b.refused(t, http.StatusTooManyRequests, "rate_limited", tokA, "GET", "/api/v1/sinks", nil)
	b.refused(t, http.StatusTooManyRequests, "rate_limited", tokA, "POST", "/api/v1/connections",
		map[string]any{"kind": "gotify", "name": "late", "base_url": "https://g.example.net", "token": "gtfya.x"})
	b.refused(t, http.StatusTooManyRequests, "rate_limited", tokA, "GET", "/api/v1/nowhere", nil)
	require.Equal(t, counts, b.counts(t))
	b.ok(t, http.StatusOK, tokB, "GET", "/api/v1/sinks", nil)
}

// TestBodyLimit: a body over 16 KiB is 413 invalid_argument on body, and
// nothing is stored.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newGotify(t, http.StatusOK)
	_, tok := b.human(t)
	conn := b.connection(t, tok, "", g.URL)
	sink := b.sink(t, tok, "", conn)
	counts := b.counts(t)
	big := strings.Repeat("x", 17<<10)

	for _, req := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/api/v1/sinks", map[string]any{"name": big, "kind": "gotify", "connection_id": conn}},
		{"PATCH", sinkPath(sink, ""), map[string]any{"name": big}},
		{"POST", "/api/v1/connections", map[string]any{"kind": "gotify", "name": "big", "base_url": g.URL, "token": big}},
		{"PUT", sinkPath(sink, "/subscriptions"), `{"subscriptions": [{"event_types": ["digest"]}]` + strings.Repeat(" ", 17<<10) + `}`},
		{"POST", "/api/v1/endpoints", map[string]any{"name": big}},
	} {
		e := b.refused(t, http.StatusRequestEntityTooLarge, "invalid_argument", tok, req.method, req.path, req.body)
		require.Equal(t, "body", e.Field)
	}
	require.Equal(t, counts, b.counts(t), "nothing stored")
}
