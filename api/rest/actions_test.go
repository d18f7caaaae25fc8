package rest_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// testResult is POST /sinks/{id}/test's answer.
type testResult struct {
	Delivered  bool   `json:"delivered"`
	ErrorClass string `json:"error_class"`
	HTTPStatus int    `json:"http_status"`
}

// TestSendTestDelivers: send test on a Gotify sink delivers one message
// titled as a test, with the token in its header, and reports success.
func TestSendTestDelivers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newGotify(t, http.StatusOK)
	_, tok := b.human(t)
	sink := b.sink(t, tok, "", b.connection(t, tok, "", g.URL))

	var res testResult
	b.ok(t, http.StatusOK, tok, "POST", sinkPath(sink, "/test"), nil).into(t, &res)
	require.Equal(t, testResult{Delivered: true, HTTPStatus: http.StatusOK}, res)
	got := g.received()
	require.Len(t, got, 1, "one message arrived")
	require.Equal(t, "Switchboard test message", got[0].Title)
	require.Equal(t, "gtfya.test-token", got[0].Token)
	require.Empty(t, got[0].Query, "the token stays out of the URL")
}

// TestSendTestReportsClass: a Gotify server answering 401 is 200 from the
// API with delivered false and the error class auth.
func TestSendTestReportsClass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newGotify(t, http.StatusUnauthorized)
	_, tok := b.human(t)
	sink := b.sink(t, tok, "", b.connection(t, tok, "", g.URL))

	var res testResult
	b.ok(t, http.StatusOK, tok, "POST", sinkPath(sink, "/test"), nil).into(t, &res)
	require.Equal(t, testResult{Delivered: false, ErrorClass: "auth", HTTPStatus: http.StatusUnauthorized}, res)
	require.Len(t, g.received(), 1)
}

// TestSendTestLimit: the seventh send test of a sink within a minute is
// 429 rate_limited and sends nothing; another sink is unaffected.
func TestSendTestLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newGotify(t, http.StatusOK)
	_, tok := b.human(t)
	conn := b.connection(t, tok, "", g.URL)
	sink, other := b.sink(t, tok, "", conn), b.sink(t, tok, "", conn)
	for range 6 {
		b.ok(t, http.StatusOK, tok, "POST", sinkPath(sink, "/test"), nil)
	}
	b.refused(t, http.StatusTooManyRequests, "rate_limited", tok, "POST", sinkPath(sink, "/test"), nil)
	require.Len(t, g.received(), 6)
	b.ok(t, http.StatusOK, tok, "POST", sinkPath(other, "/test"), nil)
}

// TestEndpoints: a vend carries the basics grant, never notifications or
// notify_owner unless named; the credential is answered once and never
// listed; revoking works once and only in the caller's scopes.
func TestEndpoints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, tokA := b.human(t)
	_, tokB := b.human(t)

	var v vended
	b.ok(t, http.StatusCreated, tokA, "POST", "/api/v1/endpoints", map[string]any{"name": "agent"}).into(t, &v)
	require.Equal(t, human(a), v.Endpoint.Owner)
	require.Equal(t, []string{"todos", "rules"}, v.Endpoint.Grants, "the basics vend")
	require.True(t, strings.HasPrefix(v.Credential, "sbe_"), v.Credential)
	basics := v.Endpoint.ID

	b.ok(t, http.StatusCreated, tokA, "POST", "/api/v1/endpoints",
		map[string]any{"name": "pager", "grants": []string{"notify_owner", "todos", "notifications"}}).into(t, &v)
	require.Equal(t, []string{"todos", "rules", "notify_owner", "notifications"}, v.Endpoint.Grants, "grants add to the basics")

	require.Equal(t, "grants", b.refused(t, http.StatusBadRequest, "invalid_argument", tokA, "POST", "/api/v1/endpoints",
		map[string]any{"name": "x", "grants": []string{"admin"}}).Field)
	require.Equal(t, "name", b.refused(t, http.StatusBadRequest, "invalid_argument", tokA, "POST", "/api/v1/endpoints",
		map[string]any{"name": "agent"}).Field)

	r := b.ok(t, http.StatusOK, tokA, "GET", "/api/v1/endpoints", nil)
	require.NotContains(t, string(r.body), "sbe_", "a credential is never listed")
	var list struct {
		Endpoints []struct {
			ID        int64   `json:"id"`
			RevokedAt *string `json:"revoked_at"`
		} `json:"endpoints"`
	}
	r.into(t, &list)
	require.Len(t, list.Endpoints, 2)

	path := "/api/v1/endpoints/" + strconv.FormatInt(basics, 10)
	b.refused(t, http.StatusNotFound, "not_found", tokB, "DELETE", path, nil)
	b.ok(t, http.StatusNoContent, tokA, "DELETE", path, nil)
	b.ok(t, http.StatusOK, tokA, "GET", "/api/v1/endpoints?owner="+human(a), nil).into(t, &list)
	for _, e := range list.Endpoints {
		require.Equal(t, e.ID == basics, e.RevokedAt != nil)
	}
	b.refused(t, http.StatusNotFound, "not_found", tokA, "DELETE", "/api/v1/endpoints/999999", nil)
}

// TestSecretsNeverLeak plants a canary in every secret field of POST
// /connections, accepted and refused, then reads everything back and sends
// a failing test: the canary appears in no response body and no log line.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newGotify(t, http.StatusUnauthorized)
	_, tok := b.human(t)
	const canary = "canary-5e1f0c"
	token := "gtfya." + canary
	post := func(want int, body map[string]any) response {
		return b.ok(t, want, tok, "POST", "/api/v1/connections", body)
	}

	var conn struct {
		ID        int64 `json:"id"`
		HasSecret bool  `json:"has_secret"`
	}
	post(http.StatusCreated, map[string]any{"kind": "gotify", "name": "g", "base_url": g.URL, "token": token}).into(t, &conn)
	require.True(t, conn.HasSecret)
	post(http.StatusCreated, map[string]any{"kind": "apprise", "name": "a", "base_url": g.URL,
		"urls": []string{"tgram://" + canary + "/chat"}, "authorization": "Bearer " + canary})
	post(http.StatusCreated, map[string]any{"kind": "cairn", "name": "c", "base_url": g.URL, "token": "cairn-" + canary})

	// Refused for every reason a secret can be refused, or beside one.
	post(http.StatusBadRequest, map[string]any{"kind": "gotify", "name": "g", "base_url": g.URL, "token": token})
	post(http.StatusBadRequest, map[string]any{"kind": "gotify", "name": "g2", "base_url": g.URL, "token": token + " two"})
	post(http.StatusBadRequest, map[string]any{"kind": "gotify", "name": "g3", "base_url": g.URL + "/?key=" + canary, "token": token})
	post(http.StatusBadRequest, map[string]any{"kind": "apprise", "name": "a2", "base_url": g.URL, "token": token})
	post(http.StatusBadRequest, map[string]any{"kind": "apprise", "name": "a3", "base_url": g.URL,
		"urls": []string{"json://" + canary + ".example.net/?k=" + canary}, "authorization": "Bearer " + canary})
	post(http.StatusBadRequest, map[string]any{"kind": "apprise", "name": "a4", "base_url": g.URL,
		"urls": []string{canary}})
	post(http.StatusBadRequest, map[string]any{"kind": "apprise", "name": "a5", "base_url": g.URL,
		"urls": []string{"tgram://" + canary + " /chat"}})
	post(http.StatusBadRequest, map[string]any{"kind": "gotify", "name": "g4", "base_url": g.URL, "token": []string{token}})
	body, err := json.Marshal(map[string]any{"kind": "gotify", "name": "g5", "base_url": g.URL, "token": token})
	require.NoError(t, err)
	b.ok(t, http.StatusBadRequest, tok, "POST", "/api/v1/connections", string(body[:len(body)-1]))

	sink := b.sink(t, tok, "", conn.ID)
	b.ok(t, http.StatusOK, tok, "GET", "/api/v1/connections", nil)
	b.ok(t, http.StatusOK, tok, "GET", sinkPath(sink, ""), nil)
	var res testResult
	b.ok(t, http.StatusOK, tok, "POST", sinkPath(sink, "/test"), nil).into(t, &res)
	require.Equal(t, "auth", res.ErrorClass)
	b.ok(t, http.StatusOK, tok, "GET", sinkPath(sink, "/deliveries"), nil)
	require.Equal(t, token, g.received()[0].Token, "the canary was planted for real")

	require.NotContains(t, b.allBodies(), canary)
	require.Contains(t, b.w.Logs.String(), "test message failed", "the log was captured")
	require.NotContains(t, b.w.Logs.String(), canary)
}

// TestEndpointNamesAreValidated: an endpoint's name is checked like a sink's
// or a connection's: a NUL byte, a control character or a bidi override is
// invalid_argument naming the field, never a 500, and nothing is stored.
func TestEndpointNamesAreValidated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, tok := b.human(t)
	for _, name := range []string{"agent\x00", "agent\x1b[31m", "agent\u202etxt.exe", "bad\nname", "\u200fagent", strings.Repeat("x", 65)} {
		e := b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "POST", "/api/v1/endpoints", map[string]any{"name": name})
		require.Equal(t, "name", e.Field, "%q", name)
	}
	require.Zero(t, b.count(t, "endpoints"))
}
