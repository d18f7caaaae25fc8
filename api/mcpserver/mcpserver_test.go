package mcpserver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/mcpserver"
	"github.com/switchboard/notify/notifytype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// initialize is a client's first message, for requests made by hand.
const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
	`"capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}`

// post sends one JSON-RPC message with the authorization header given ("" for none).
func (w *world) post(t *testing.T, authorization, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, w.url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Body.Close() })
	return res
}

func TestUnauthenticatedRequestsGet401(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	_, cred := w.vend(t, human, scope)

	for name, authz := range map[string]string{
		"missing":      "",
		"not bearer":   "Basic " + cred,
		"unknown":      "Bearer sbe_not-a-credential",
		"wrong prefix": "Bearer sbo_operator-token",
	} {
		res := w.post(t, authz, initialize)
		require.Equal(t, http.StatusUnauthorized, res.StatusCode, name)
		require.True(t, strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer"), name)
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.Contains(t, string(body), "unauthenticated", name)
	}

	res := w.post(t, "Bearer "+cred, initialize)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Empty(t, res.Header.Get("WWW-Authenticate"))
	require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"), "the standard headers")
}

func TestBehindAReverseProxy(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	_, cred := w.vend(t, human, scope)
	req, err := http.NewRequest(http.MethodPost, w.url, strings.NewReader(initialize))
	require.NoError(t, err)
	req.Host = "notify.example.net" // as a proxy on loopback forwards it
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+cred)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
}

func TestNotificationsVerbsShareTheHumansLimiter(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(d *httpx.Deps) { d.Limiter = httpx.NewLimiter(0.001, 2) })
	human, scope := w.person()
	queue := w.F.Queue(scope, "")
	_, cred := w.vend(t, human, scope, notifytype.GrantTodos, notifytype.GrantNotifications)
	cs := w.connect(t, cred)

	for range 2 {
		succeeds[mcpserver.ListSinksOut](t, cs, mcpserver.ToolListSinks, map[string]any{})
	}
	e := refused(t, cs, mcpserver.ToolListSinks, map[string]any{})
	require.Equal(t, notifytype.CodeRateLimited, e.Code)
	// Issue 19 item 14: the refusal says when to retry. A token returns
	// every 1000 s, and one was just spent.
	require.InDelta(t, 1000, e.RetryAfterSeconds, 10, "%+v", e)
	require.Contains(t, e.Message, fmt.Sprintf("try again in %d s", e.RetryAfterSeconds))
	require.Equal(t, notifytype.CodeRateLimited, refused(t, cs, mcpserver.ToolListConnections, map[string]any{}).Code,
		"a refused call spends no token, and the limit still holds")
	// The todos verbs are an agent's work, not management: not limited here.
	for range 3 {
		succeeds[mcpserver.ClaimOut](t, cs, mcpserver.ToolClaim, map[string]any{"queue_id": queue})
	}
}

func TestRevokedEndpointGets401(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	endpoint, cred := w.vend(t, human, scope)
	cs := w.connect(t, cred)
	require.NotEmpty(t, toolNames(t, cs))

	require.NoError(t, w.deps.Endpoints.Revoke(w.Ctx, human, endpoint))

	_, err := cs.ListTools(context.Background(), nil)
	require.Error(t, err, "the open session stops working at once")
	res := w.post(t, "Bearer "+cred, initialize)
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.True(t, strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer"))
}

func TestToolsListFollowsTheGrant(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	todos := mcpserver.ToolsOf(notifytype.GrantTodos)
	notifications := mcpserver.ToolsOf(notifytype.GrantNotifications)
	rules := mcpserver.ToolsOf(notifytype.GrantRules)
	require.Equal(t, []string{"claim", "heartbeat", "complete", "fail", "list_queues"}, todos)
	require.Equal(t, []string{"set_webhook_rules", "add_webhook_rule", "update_webhook_rule", "test_webhook_rules", "list_webhooks"}, rules)
	require.Equal(t, []string{"list_sinks", "list_connections", "set_sink", "delete_sink", "test_sink", "set_sink_subscriptions",
		"list_digests", "set_digest", "delete_digest"}, notifications)

	for _, tc := range []struct {
		grants []notifytype.Grant
		want   []string
	}{
		{[]notifytype.Grant{notifytype.GrantRules}, rules},
		{notifytype.DefaultGrants, slices.Concat(todos, rules)},
		{[]notifytype.Grant{notifytype.GrantTodos}, todos},
		{[]notifytype.Grant{notifytype.GrantNotifications}, notifications},
		{[]notifytype.Grant{notifytype.GrantNotifyOwner}, []string{"notify_owner"}},
		{notifytype.Grants, slices.Concat(todos, rules, notifications, []string{"notify_owner"})},
	} {
		_, cred := w.vend(t, human, scope, tc.grants...)
		cs := w.connect(t, cred)
		want := slices.Sorted(slices.Values(tc.want))
		if want == nil {
			want = []string{}
		}
		require.Equal(t, want, toolNames(t, cs), "grant %v", tc.grants)

		// Every verb outside the grant is refused as forbidden by name.
		for name := range slices.Values(slices.Concat(todos, rules, notifications, []string{"notify_owner"})) {
			if slices.Contains(tc.want, name) {
				continue
			}
			res := call(t, cs, name, map[string]any{})
			require.True(t, res.IsError, name)
			require.Contains(t, text(res), "forbidden", name)
		}
	}

	// Each tool carries an input and an output schema.
	_, cred := w.vend(t, human, scope, notifytype.Grants...)
	res, err := w.connect(t, cred).ListTools(context.Background(), nil)
	require.NoError(t, err)
	require.Equal(t, "private", res.CacheScope, "a tool list is the credential's own")
	for _, tool := range res.Tools {
		require.NotNil(t, tool.InputSchema, tool.Name)
		require.NotNil(t, tool.OutputSchema, tool.Name)
		require.NotEmpty(t, tool.Description, tool.Name)
	}
}

func TestOlderProtocolClient(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	w.sink(human, scope, "https://push.example.net")
	_, cred := w.vend(t, human, scope, notifytype.GrantNotifications)

	for _, version := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		cs := w.connect(t, cred, &mcp.ClientSessionOptions{ProtocolVersion: version})
		require.Equal(t, []string{"delete_digest", "delete_sink", "list_connections", "list_digests", "list_sinks", "set_digest", "set_sink", "set_sink_subscriptions", "test_sink"}, toolNames(t, cs), version)
		listed := succeeds[mcpserver.ListSinksOut](t, cs, mcpserver.ToolListSinks, map[string]any{})
		require.Len(t, listed.Sinks, 1, version)
		require.Equal(t, notifytype.CodeForbidden, refused(t, cs, mcpserver.ToolNotifyOwner, map[string]any{"title": "x"}).Code, version)
	}
}

func TestUnknownToolIsAProtocolError(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	_, cred := w.vend(t, human, scope)
	cs := w.connect(t, cred)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
	require.ErrorContains(t, err, "unknown tool")
}
