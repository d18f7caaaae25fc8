package surface_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/sinktest"
)

const scenarioSecrets = "5. secrets canary (one run, every surface)"

// panicAdapter panics on every delivery with value.
type panicAdapter struct{ value string }

func (p panicAdapter) Deliver(context.Context, sinks.Message) sinks.Result { panic(p.value) }

func answer(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if code >= 300 && code < 400 {
			http.Redirect(w, r, "http://169.254.169.254/", code)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"error":"as asked","errorCode":` + fmt.Sprint(code) + `}`))
	}
}

func reset(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// Scenario 5: the canary planted as a Gotify token, an Apprise URL and an
// authorization value through the API, then driven through success, every
// failure class, send tests, API errors, MCP errors and web pages. It must
// appear in none of what the run produced.
func TestSecretsCanaryAppearsNowhere(t *testing.T) {
	t.Parallel()
	row(scenarioSecrets, func(r *faults.Row) {
		r.Faults = "401, 400, 500, 302, reset, TLS, blocked, Apprise 424/204, an adapter panic quoting the secrets, send tests, API/MCP errors"
	})
	sec := faults.PlantedSecrets()
	// Sinks whose adapter panics, its panic value quoting every planted
	// secret (D25: the value is never logged or recorded).
	var panicking sync.Map
	s := newServer(t, serverOpts{wrapAdapters: func(id int64, a sinks.Adapter) sinks.Adapter {
		if _, ok := panicking.Load(id); ok {
			return panicAdapter{value: fmt.Sprintf("exploded holding %s %s %s", sec.GotifyToken, sec.AppriseURL, sec.Authorization)}
		}
		return a
	}})
	a := s.person(t)

	type target struct {
		kind    string
		handler http.HandlerFunc
		tls     bool
		url     string // instead of a server
		class   notifytype.ErrorClass
		options any
		panics  bool // its adapter panics
	}
	stateless := map[string]any{}
	targets := []target{
		{kind: engine.KindGotify, handler: answer(200), class: notifytype.ClassNone},
		{kind: engine.KindGotify, handler: answer(401), class: notifytype.ClassAuth},
		{kind: engine.KindGotify, handler: answer(400), class: notifytype.ClassRejected},
		{kind: engine.KindGotify, handler: answer(500), class: notifytype.ClassServer},
		{kind: engine.KindGotify, handler: answer(302), class: notifytype.ClassRedirect},
		{kind: engine.KindGotify, handler: reset, class: notifytype.ClassNetwork},
		{kind: engine.KindGotify, handler: answer(200), tls: true, class: notifytype.ClassTLS},
		{kind: engine.KindGotify, url: "http://10.255.0.1", class: notifytype.ClassBlocked},
		{kind: engine.KindApprise, handler: answer(200), class: notifytype.ClassNone, options: stateless},
		{kind: engine.KindApprise, handler: answer(424), class: notifytype.ClassPartial, options: stateless},
		{kind: engine.KindApprise, handler: answer(204), class: notifytype.ClassConfig, options: stateless},
		{kind: engine.KindApprise, handler: answer(500), class: notifytype.ClassServer, options: map[string]any{"config_key": "ops"}},
		{kind: engine.KindGotify, handler: answer(200), class: notifytype.ClassAbandoned, panics: true},
	}
	want := map[int64]notifytype.ErrorClass{}
	var sinkIDs []int64
	for _, tg := range targets {
		base := tg.url
		if base == "" {
			if tg.tls {
				base = sinktest.NewTLSServer(t, tg.handler).URL
			} else {
				base = sinktest.NewServer(t, tg.handler).URL
			}
		}
		in := map[string]any{"kind": tg.kind, "account_key": base}
		if tg.kind == engine.KindGotify {
			in["token"] = sec.GotifyToken
		} else {
			in["authorization"] = sec.Authorization
			if tg.options == nil || len(tg.options.(map[string]any)) == 0 {
				in["urls"] = []string{sec.AppriseURL} // stateless: the URLs are the secret
			}
		}
		id := s.sink(t, a, tg.kind, s.connection(t, a, in), tg.options)
		if tg.panics {
			panicking.Store(id, true)
		}
		want[id] = tg.class
		sinkIDs = append(sinkIDs, id)
	}

	// Every sink gets the event once: success and each failure class.
	s.w.Emit(s.eng, engine.Event{Type: host.EventTodoDeadLettered, Owner: a.scope, OccurrenceKey: host.DeadLetterKey(1, 1),
		Content: sinks.Content{Title: "canary run", Place: "forge", LinkPath: "/board/todos/1"}})
	got := map[int64]notifytype.ErrorClass{}
	for range targets {
		at := s.w.Wait()
		got[at.SinkID] = at.Class
	}
	require.Equal(t, want, got, "each sink's first attempt ends in its class")

	// Send tests, reads and deliveries over REST.
	for _, id := range sinkIDs {
		s.api(t, a, http.MethodPost, fmt.Sprintf("/api/v1/sinks/%d/test", id), nil, nil, http.StatusOK)
		s.api(t, a, http.MethodGet, fmt.Sprintf("/api/v1/sinks/%d", id), nil, nil, http.StatusOK)
		s.api(t, a, http.MethodGet, fmt.Sprintf("/api/v1/sinks/%d/deliveries", id), nil, nil, http.StatusOK)
	}
	s.api(t, a, http.MethodGet, "/api/v1/sinks", nil, nil, http.StatusOK)
	s.api(t, a, http.MethodGet, "/api/v1/connections", nil, nil, http.StatusOK)
	s.api(t, a, http.MethodGet, "/ops/actors", nil, nil, http.StatusOK)

	// API errors whose request carries the secrets.
	bad := []map[string]any{
		{"kind": "gotify", "account_key": "ftp://push.example.net", "token": sec.GotifyToken},
		{"kind": "gotify", "account_key": "https://push.example.net", "token": sec.GotifyToken, "urls": []string{sec.AppriseURL}},
		{"kind": "smtp", "account_key": "https://push.example.net", "token": sec.GotifyToken},
		{"kind": "apprise", "account_key": "https://apprise.example.net", "urls": []string{"json://" + faults.Canary() + "@example.net"}},
		{"kind": "apprise", "account_key": "https://apprise.example.net", "urls": []string{sec.AppriseURL + "," + sec.AppriseURL}},
		{"kind": "apprise", "account_key": "https://apprise.example.net", "token": sec.GotifyToken, "authorization": sec.Authorization},
		{"owner": "team:999999", "kind": "gotify", "account_key": "https://push.example.net", "token": sec.GotifyToken},
	}
	for i, in := range bad {
		if in["owner"] == nil {
			in["owner"] = a.scope.String()
		}
		in["name"] = fmt.Sprintf("bad-%d", i)
		b, _ := json.Marshal(in)
		status, body := s.do(t, request{method: http.MethodPost, path: "/api/v1/connections", token: a.token, body: string(b)})
		refused := status >= 400 && status < 500
		if i == 4 {
			rows.pending.Expect(t, "surface/apprise-one-url", refused,
				"an Apprise secret whose URL Apprise would split at a comma into two was stored (%d)", status)
			continue
		}
		require.True(t, refused, "%s: %d %s", b, status, body)
	}
	for _, raw := range []string{
		`{"kind":"gotify","token":"` + sec.GotifyToken, // cut short
		`{"kind":"gotify","token":` + sec.GotifyToken + `}`,
		`{"kind":"gotify","token":"` + sec.GotifyToken + `","token2":"` + sec.GotifyToken + `"}`,
		`{"kind":"gotify","token":["` + sec.GotifyToken + `"]}`,
	} {
		status, body := s.do(t, request{method: http.MethodPost, path: "/api/v1/connections", token: a.token, body: raw})
		require.Equal(t, http.StatusBadRequest, status, body)
	}
	// A secret sent as a bearer credential is refused without an echo.
	status, _ := s.do(t, request{method: http.MethodGet, path: "/api/v1/sinks", token: sec.GotifyToken})
	require.Equal(t, http.StatusUnauthorized, status)

	// MCP: list and test every sink; errors come back as tool results.
	_, cred, err := s.deps.Endpoints.Vend(s.w.Ctx, a.id, a.scope, "canary-agent", []notifytype.Grant{notifytype.GrantNotifications})
	require.NoError(t, err)
	mcpTexts := s.mcpCalls(t, cred.Reveal(), sinkIDs)

	// Web pages.
	b := s.browser(t, a)
	for _, path := range []string{"/sinks", "/connections", "/endpoints", "/ops"} {
		status, body := s.do(t, request{method: http.MethodGet, path: path, client: b})
		require.Equal(t, http.StatusOK, status, "%s: %s", path, body)
	}
	for _, id := range sinkIDs {
		status, _ := s.do(t, request{method: http.MethodGet, path: fmt.Sprintf("/sinks/%d", id), client: b})
		require.Equal(t, http.StatusOK, status)
		status, _ = s.do(t, request{method: http.MethodPost, path: fmt.Sprintf("/sinks/%d/test", id), client: b,
			contentType: "application/x-www-form-urlencoded", header: map[string]string{"Origin": s.url}})
		require.Less(t, status, 500)
	}

	// Let the retries of the failing sinks run too.
	s.w.Clock.Advance(engine.RetryDelay(2))
	_, err = s.w.SettleWithin(30 * time.Second)
	require.NoError(t, err)

	dump, err := faults.DumpTables(context.Background(), s.w.Pool)
	require.NoError(t, err)
	texts := append(append(s.allBodies(), mcpTexts...), s.w.Logs.String(), dump)
	found := faults.CountCanary(texts...)
	update(scenarioSecrets, func(r *faults.Row) {
		r.SecretsFound += found
		r.Load = fmt.Sprintf("%d sinks, %d responses, %d MCP results, %d KiB of logs", len(sinkIDs), len(s.allBodies()), len(mcpTexts), len(s.w.Logs.String())/1024)
		r.Figures = append(r.Figures, "a sink's adapter panics with the secrets in its panic value (planted through testhooks.WrapAdapters): "+
			"recorded abandoned, the value in no log line, record or response")
	})
	if found > 0 {
		for _, txt := range texts {
			if i := strings.Index(txt, faults.Canary()); i >= 0 {
				t.Errorf("canary found: …%s…", txt[max(0, i-120):min(len(txt), i+60)])
			}
		}
	}
}

// mcpCalls opens an MCP session with cred, lists the sinks, tests each
// one, asks for things that fail, and returns every result as text.
func (s *server) mcpCalls(t *testing.T, cred string, sinkIDs []int64) []string {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := mcp.NewClient(&mcp.Implementation{Name: "faults-agent", Version: "0.0.1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: s.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token: cred, base: tr}},
		MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
	require.NoError(t, err)
	defer cs.Close()
	var out []string
	call := func(name string, args map[string]any) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			out = append(out, err.Error())
			return
		}
		b, _ := json.Marshal(res)
		out = append(out, string(b))
	}
	call("list_sinks", map[string]any{})
	for _, id := range sinkIDs {
		call("test_sink", map[string]any{"id": id})
	}
	call("test_sink", map[string]any{"id": 999999})
	call("set_sink", map[string]any{"name": faults.PlantedSecrets().GotifyToken[:4], "kind": "gotify", "connection_id": 999999})
	call("set_sink", map[string]any{"id": sinkIDs[0], "options": map[string]any{"priorities": "loud"}})
	call("delete_sink", map[string]any{"id": 999999})
	return out
}

// bearer adds a bearer credential to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}
