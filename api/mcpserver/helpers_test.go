package mcpserver_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/mcpserver"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
)

// gotifyToken is the test sinks' Gotify application token.
const gotifyToken = "gtfya.mcp-test-token"

// world is a database with a real engine (not serving unless a test asks
// w.Serve), the reference host over it, and the MCP server on an httptest
// server.
type world struct {
	*hosttest.World
	eng  *engine.Engine
	deps httpx.Deps
	url  string
}

func newWorld(t *testing.T, configure ...func(*httpx.Deps)) *world {
	t.Helper()
	w := hosttest.NewWorld(t)
	eng := w.Engine()
	todos := host.NewTodos(w.Pool, eng, w.Clock)
	endpoints := host.NewEndpoints(w.Pool, host.NewDirectory(w.Pool), todos, w.Clock)
	accounts := host.NewAccounts(w.Pool)
	deps := httpx.Deps{
		Engine: eng, Digests: digests.New(eng, digests.Config{}), Accounts: accounts, Endpoints: endpoints, Todos: todos, Pool: w.Pool,
		Auth:    &httpx.Auth{Accounts: accounts, Endpoints: endpoints, Clock: w.Clock},
		Limiter: httpx.NewLimiter(1000, 1000),
		Logger:  slog.New(slog.NewJSONHandler(w.Logs, nil)),
		Clock:   w.Clock,
	}
	for _, c := range configure {
		c(&deps)
	}
	srv := httptest.NewServer(mcpserver.New(deps))
	t.Cleanup(srv.Close)
	return &world{World: w, eng: eng, deps: deps, url: srv.URL}
}

// person is a human and their personal scope.
func (w *world) person() (int64, notifytype.OwnerScope) {
	id, _, scope := w.Human()
	return id, scope
}

// vend vends an endpoint of scope accountable to human, as the human would
// (nil grants: the default grant), and returns its id and credential.
func (w *world) vend(t *testing.T, human int64, scope notifytype.OwnerScope, grants ...notifytype.Grant) (int64, string) {
	t.Helper()
	ep, secret, err := w.deps.Endpoints.Vend(w.Ctx, human, scope, "agent-"+rand.Text()[:6], grants)
	require.NoError(t, err)
	return ep.ID, secret.Reveal()
}

// endpointAs makes an endpoint of owner accountable to human with grants,
// bypassing Vend's permission check (a team member may not vend a team
// endpoint), and returns its id and a working credential.
func (w *world) endpointAs(t *testing.T, owner notifytype.OwnerScope, human int64, grants ...string) (int64, string) {
	t.Helper()
	id := w.F.Endpoint(hosttest.EndpointOpts{Owner: owner, Human: human, Grants: grants})
	cred := host.EndpointCredentialPrefix + rand.Text()
	_, err := w.Pool.Exec(w.Ctx, `UPDATE endpoints SET credential_hash = $1 WHERE id = $2`, host.HashToken(cred), id)
	require.NoError(t, err)
	return id, cred
}

// sink makes a Gotify sink of scope at baseURL through the engine, as the
// human would, subscribed to events, and returns its id.
func (w *world) sink(human int64, scope notifytype.OwnerScope, baseURL string, events ...notifytype.EventType) int64 {
	return w.Sink(w.eng, engine.HumanPrincipal(hostid.String(human)), scope, enginetest.SinkOpts{
		BaseURL: baseURL, Secret: gotifyToken, Events: events,
	})
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

// connect opens an MCP client session over HTTP with the credential.
func (w *world) connect(t *testing.T, cred string, opts ...*mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "0.0.1"}, nil)
	var o *mcp.ClientSessionOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:             w.url,
		HTTPClient:           &http.Client{Transport: bearer{token: cred, base: tr}},
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
	}, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// toolNames lists the session's tools, sorted.
func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	names := make([]string, len(res.Tools))
	for i, tool := range res.Tools {
		names[i] = tool.Name
	}
	slices.Sort(names)
	return names
}

// call calls a tool; a protocol error fails the test.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	return res
}

// succeeds calls a tool, requires success and decodes its structured
// output into T.
func succeeds[T any](t *testing.T, cs *mcp.ClientSession, name string, args any) T {
	t.Helper()
	res := call(t, cs, name, args)
	require.False(t, res.IsError, "%s failed: %s", name, text(res))
	var out T
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// refused calls a tool, requires a tool error and returns its code, field,
// scheme and message from the result's _meta.
func refused(t *testing.T, cs *mcp.ClientSession, name string, args any) mcpserver.ToolError {
	t.Helper()
	res := call(t, cs, name, args)
	require.True(t, res.IsError, "%s succeeded: %s", name, text(res))
	// A client validates structuredContent against the tool's output
	// schema, which describes success: an error carries none.
	require.Nil(t, res.StructuredContent, "%s: a tool error carries no structured content", name)
	b, err := json.Marshal(res.Meta[mcpserver.MetaKeyError])
	require.NoError(t, err)
	var e mcpserver.ToolError
	require.NoError(t, json.Unmarshal(b, &e))
	require.NotEmpty(t, e.Code, "%s: _meta carries the error", name)
	require.Contains(t, text(res), string(e.Code), "the text names the code")
	if e.Field != "" {
		require.Contains(t, text(res), e.Field, "the text names the field")
	}
	return e
}

// text is a result's text content.
func text(res *mcp.CallToolResult) string {
	var s string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s += tc.Text
		}
	}
	return s
}

// count runs a count query.
func (w *world) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	// Events become outbox rows when a claimer fans them out: do it now.
	w.FanOut(w.eng)
	var n int
	require.NoError(t, w.Pool.QueryRow(w.Ctx, sql, args...).Scan(&n))
	return n
}
