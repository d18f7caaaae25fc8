package surface_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/notifytype"
)

const scenarioHostile = "6. hostile input (fuzzers + hand-written requests)"

// hostileTried counts the hostile requests of this package, for the row.
var hostileTried atomic.Int64

// world for the hostile requests: A owns a connection and a sink; B is
// another human with an endpoint of their own.
type hostileWorld struct {
	*server
	a, b       person
	conn, sink int64
	bEndpoint  string
}

func newHostileWorld(t *testing.T) *hostileWorld {
	t.Helper()
	s := newServer(t, serverOpts{})
	h := &hostileWorld{server: s, a: s.person(t), b: s.person(t)}
	h.conn = s.connection(t, h.a, map[string]any{"kind": "gotify", "account_key": "https://push.example.net", "token": faults.PlantedSecrets().GotifyToken})
	h.sink = s.sink(t, h.a, engine.KindGotify, h.conn, nil)
	_, cred, err := s.deps.Endpoints.Vend(s.w.Ctx, h.b.id, h.b.scope, "b-agent", []notifytype.Grant{notifytype.GrantNotifications})
	require.NoError(t, err)
	h.bEndpoint = cred.Reveal()
	return h
}

// snapshot is everything a refused request must leave as it was.
func (h *hostileWorld) snapshot(t *testing.T) string {
	t.Helper()
	var out string
	require.NoError(t, h.w.Pool.QueryRow(context.Background(), `SELECT concat_ws('|',
		(SELECT count(*) FROM switchboard.connections), (SELECT count(*) FROM switchboard.sinks), (SELECT count(*) FROM switchboard.subscriptions),
		(SELECT count(*) FROM endpoints WHERE revoked_at IS NULL), (SELECT count(*) FROM switchboard.outbox),
		(SELECT to_jsonb(s)::text FROM switchboard.sinks s WHERE id = $1))`, h.sink).Scan(&out))
	return out
}

// hostile is one bad request and the status it must get.
type hostile struct {
	name string
	req  request
	want []int // any of these
	// pending names a check that waits on a fix (see faults.pendingChecks).
	pending string
}

func TestHostileRequestsStoreNothing(t *testing.T) {
	t.Parallel()
	h := newHostileWorld(t)
	a, b := h.a, h.b
	update(scenarioHostile, func(r *faults.Row) {
		r.Faults = "16 KiB+ bodies, wrong content types, cross-site form posts, other scopes' ids, forged credentials"
	})
	browserA, browserB := h.browser(t, a), h.browser(t, b)
	big := `{"name":"` + strings.Repeat("x", 16<<10) + `"}`
	sinkJSON := fmt.Sprintf(`{"owner":%q,"name":"sneaky","kind":"gotify","connection_id":%d}`, a.scope, h.conn)
	form := url.Values{"name": {"sneaky"}, "kind": {"gotify"}, "connection_id": {fmt.Sprint(h.conn)}}.Encode()
	evil := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
	sinkPath := fmt.Sprintf("/api/v1/sinks/%d", h.sink)
	p := func(method, path string) request { return request{method: method, path: path, token: b.token} }

	cases := []hostile{
		{name: "16 KiB+1 sink body", req: request{method: "POST", path: "/api/v1/sinks", token: a.token, body: big}, want: []int{413}},
		{name: "16 KiB+1 connection body", req: request{method: "POST", path: "/api/v1/connections", token: a.token, body: big}, want: []int{413}},
		{name: "16 KiB+1 web form", req: request{method: "POST", path: "/sinks", client: browserA, contentType: "application/x-www-form-urlencoded",
			body: "name=" + strings.Repeat("x", 16<<10), header: map[string]string{"Origin": h.url}}, want: []int{413, 400}},
		{name: "form-encoded body to the JSON API", req: request{method: "POST", path: "/api/v1/sinks", token: a.token, contentType: "application/x-www-form-urlencoded", body: form}, want: []int{400, 415}},
		{name: "JSON sent as text/plain", req: request{method: "POST", path: "/api/v1/sinks", token: a.token, contentType: "text/plain", body: strings.Replace(sinkJSON, "sneaky", "sneaky-plain", 1)}, want: []int{400, 415}, pending: "surface/hostile-content-type"},
		{name: "JSON array body", req: request{method: "POST", path: "/api/v1/sinks", token: a.token, body: `[` + sinkJSON + `]`}, want: []int{400}},
		{name: "two JSON objects", req: request{method: "POST", path: "/api/v1/sinks", token: a.token, body: strings.Replace(sinkJSON, "sneaky", "sneaky-twice", 1) + sinkJSON}, want: []int{400}, pending: "surface/hostile-trailing-json"},
		{name: "unknown field", req: request{method: "POST", path: "/api/v1/sinks", token: a.token, body: strings.Replace(sinkJSON, `"name"`, `"admin":true,"name"`, 1)}, want: []int{400}},
		{name: "name with a bidi override and NUL", req: request{method: "POST", path: "/api/v1/sinks", token: a.token, body: strings.Replace(sinkJSON, "sneaky", `sne\u202eaky\u0000`, 1)}, want: []int{400}},
		{name: "huge budget", req: request{method: "POST", path: "/api/v1/sinks", token: a.token, body: strings.Replace(sinkJSON, `"kind"`, `"budget_per_hour":99999999999,"kind"`, 1)}, want: []int{400}},
		{name: "cross-site form post (Origin)", req: request{method: "POST", path: "/sinks", client: browserA, contentType: "application/x-www-form-urlencoded", body: form, header: evil}, want: []int{403}},
		{name: "cross-site delete", req: request{method: "POST", path: fmt.Sprintf("/sinks/%d/delete", h.sink), client: browserA, contentType: "application/x-www-form-urlencoded", header: evil}, want: []int{403}},
		{name: "cross-site connection form", req: request{method: "POST", path: "/connections", client: browserA, contentType: "application/x-www-form-urlencoded", body: "name=x&kind=gotify&account_key=https://x.example&token=t", header: evil}, want: []int{403}},
		{name: "cross-site disable", req: request{method: "POST", path: fmt.Sprintf("/sinks/%d/disable", h.sink), client: browserA, contentType: "application/x-www-form-urlencoded", header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, want: []int{403}},
		{name: "B reads A's sink", req: p("GET", sinkPath), want: []int{404}},
		{name: "B patches A's sink", req: request{method: "PATCH", path: sinkPath, token: b.token, body: `{"enabled":false}`}, want: []int{404}},
		{name: "B deletes A's sink", req: p("DELETE", sinkPath), want: []int{404}},
		{name: "B tests A's sink", req: p("POST", sinkPath+"/test"), want: []int{404}},
		{name: "B reads A's deliveries", req: p("GET", sinkPath+"/deliveries"), want: []int{404}},
		{name: "B reads A's subscriptions", req: p("GET", sinkPath+"/subscriptions"), want: []int{404}},
		{name: "B subscribes A's sink", req: request{method: "POST", path: sinkPath + "/subscriptions", token: b.token, body: `{"event_types":["agent.notify"]}`}, want: []int{404}},
		{name: "B deletes A's connection", req: p("DELETE", fmt.Sprintf("/api/v1/connections/%d", h.conn)), want: []int{404}},
		{name: "B's sink on A's connection", req: request{method: "POST", path: "/api/v1/sinks", token: b.token,
			body: fmt.Sprintf(`{"owner":%q,"name":"borrow","kind":"gotify","connection_id":%d}`, b.scope, h.conn)}, want: []int{403}},
		{name: "B writes into A's scope", req: request{method: "POST", path: "/api/v1/sinks", token: b.token, body: sinkJSON}, want: []int{403, 404}},
		{name: "B's web page for A's sink", req: request{method: "GET", path: fmt.Sprintf("/sinks/%d", h.sink), client: browserB}, want: []int{404}},
		{name: "B's web delete of A's sink", req: request{method: "POST", path: fmt.Sprintf("/sinks/%d/delete", h.sink), client: browserB,
			contentType: "application/x-www-form-urlencoded", header: map[string]string{"Origin": h.url}}, want: []int{404}},
		{name: "ids out of range", req: p("GET", "/api/v1/sinks/99999999999999999999999"), want: []int{400, 404}},
		{name: "negative id", req: p("GET", "/api/v1/sinks/-1"), want: []int{400, 404}},
		{name: "forged API token", req: request{method: "GET", path: "/api/v1/sinks", token: "sbt_" + strings.Repeat("A", 43)}, want: []int{401}},
		{name: "endpoint credential on the operator API", req: request{method: "GET", path: "/api/v1/sinks", token: h.bEndpoint}, want: []int{401}},
		{name: "no credential", req: request{method: "POST", path: "/api/v1/sinks", body: sinkJSON}, want: []int{401}},
		{name: "API token on MCP", req: request{method: "POST", path: "/mcp", token: a.token, body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			header: map[string]string{"Accept": "application/json, text/event-stream"}}, want: []int{401}},
		{name: "forged MCP credential", req: request{method: "POST", path: "/mcp", token: "ep_" + strings.Repeat("Z", 40), body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			header: map[string]string{"Accept": "application/json, text/event-stream"}}, want: []int{401}},
		{name: "ops without a credential", req: request{method: "GET", path: "/ops/actors"}, want: []int{401}},
	}
	before := h.snapshot(t)
	for _, c := range cases {
		status, body := h.do(t, c.req)
		hostileTried.Add(1)
		ok := false
		for _, w := range c.want {
			ok = ok || status == w
		}
		if c.pending != "" {
			rows.pending.Expect(t, c.pending, ok, "%s: got %d, want %v", c.name, status, c.want)
			continue
		}
		require.True(t, ok, "%s: got %d, want one of %v: %s", c.name, status, c.want, body)
		if status != 401 && strings.HasPrefix(c.req.path, "/api/") {
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &e), "%s: an API error is JSON: %s", c.name, body)
			require.NotEmpty(t, e.Error.Code, "%s: %s", c.name, body)
		}
	}
	// What the pending cases stored is taken out; nothing else may have
	// changed.
	_, err := h.w.Pool.Exec(context.Background(), `DELETE FROM switchboard.sinks WHERE name IN ('sneaky-plain', 'sneaky-twice')`)
	require.NoError(t, err)
	require.Equal(t, before, h.snapshot(t), "a refused request changed something")

	// MCP: B's endpoint names A's sink.
	res := h.mcpCall(t, h.bEndpoint, "test_sink", map[string]any{"id": h.sink})
	require.True(t, res.IsError, "test_sink on another scope's sink must fail")
	b2, _ := json.Marshal(res)
	require.Contains(t, string(b2), "not_found")
	res = h.mcpCall(t, h.bEndpoint, "delete_sink", map[string]any{"id": h.sink})
	require.True(t, res.IsError)
	hostileTried.Add(2)
	require.Equal(t, before, h.snapshot(t), "a refused MCP call changed something")
	require.Zero(t, faults.CountCanary(append(h.allBodies(), h.w.Logs.String())...))
}

func (h *hostileWorld) mcpCall(t *testing.T, cred, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := mcp.NewClient(&mcp.Implementation{Name: "faults-agent", Version: "0.0.1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: h.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token: cred, base: tr}},
		MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err)
	return res
}
