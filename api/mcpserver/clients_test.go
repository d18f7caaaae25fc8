package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/mcpserver"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
)

// tsClientDir holds the TypeScript SDK client fixture; .ci/run installs
// its node_modules with npm ci.
const tsClientDir = "testdata/tsclient"

// nodeOrSkip returns the node binary with the fixture's dependencies
// installed. Without them the test skips on a developer's machine and
// fails under CI=true.
func nodeOrSkip(t *testing.T) string {
	t.Helper()
	missing := func(what string) {
		msg := what + ": run `npm ci` in api/mcpserver/" + tsClientDir + " (node and npm from Debian's nodejs)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	if _, err := os.Stat(filepath.Join(tsClientDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		missing("the TypeScript SDK is not installed")
	}
	return node
}

// tsCall is one call the TypeScript client makes, and what it saw.
type tsCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Result    *struct {
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		Content           []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Meta map[string]mcpserver.ToolError `json:"_meta"`
	} `json:"result,omitempty"`
	Error *tsError `json:"error,omitempty"`
}

type tsError struct {
	Message string `json:"message"`
	Code    *int   `json:"code"`
}

type tsMethod struct {
	Method string          `json:"method"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *tsError        `json:"error,omitempty"`
}

type tsRun struct {
	Capabilities map[string]json.RawMessage `json:"capabilities"`
	Instructions string                     `json:"instructions"`
	Tools        []string                   `json:"tools"`
	Schemas      map[string]json.RawMessage `json:"schemas"`
	Calls        []tsCall                   `json:"calls"`
	Methods      []tsMethod                 `json:"methods"`
	Fatal        *tsError                   `json:"fatal"`
}

// runTSClient runs the TypeScript SDK client against the server with the
// credential: it connects, lists tools, makes the calls and sends the
// methods.
func runTSClient(t *testing.T, node, url, cred string, calls []tsCall, methods []string) tsRun {
	t.Helper()
	plan, err := json.Marshal(map[string]any{"calls": calls, "methods": methods})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", url, cred, string(plan))
	cmd.Dir = tsClientDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "node client.mjs: %s", stderr.String())
	var run tsRun
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &run), stdout.String())
	require.Nil(t, run.Fatal, "the client connects and lists tools")
	return run
}

func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	node := nodeOrSkip(t)
	w := newWorld(t)
	human, scope := w.person()
	queue := w.F.Queue(scope, "forge")
	stranger, strangerScope := w.person()
	theirQueue := w.F.Queue(strangerScope, "theirs")
	theirSink := w.sink(stranger, strangerScope, "https://push.example.net")
	_, cred := w.vend(t, human, scope, notifytype.GrantTodos, notifytype.GrantNotifyOwner)
	_, mgmt := w.vend(t, human, scope, notifytype.GrantNotifications)

	// Every outcome: successes, and each code a client meets.
	type want struct {
		code  notifytype.Code // "" for success
		field string
	}
	cases := []struct {
		call tsCall
		want want
	}{
		{tsCall{Name: mcpserver.ToolClaim, Arguments: map[string]any{"queue_id": queue}}, want{}},
		{tsCall{Name: mcpserver.ToolNotifyOwner, Arguments: map[string]any{"title": "build 812 needs a look"}}, want{}},
		{tsCall{Name: mcpserver.ToolListSinks, Arguments: map[string]any{}}, want{code: notifytype.CodeForbidden}},
		{tsCall{Name: mcpserver.ToolClaim, Arguments: map[string]any{"queue_id": theirQueue}}, want{code: notifytype.CodeNotFound}},
		{tsCall{Name: mcpserver.ToolHeartbeat, Arguments: map[string]any{"todo_id": 987654321012}}, want{code: notifytype.CodeNotFound}},
		{tsCall{Name: mcpserver.ToolNotifyOwner, Arguments: map[string]any{"title": "x", "severity": "urgent"}},
			want{code: notifytype.CodeInvalidArgument, field: "severity"}},
		{tsCall{Name: mcpserver.ToolClaim, Arguments: map[string]any{"queue_id": "forge"}},
			want{code: notifytype.CodeInvalidArgument, field: "queue_id"}},
		{tsCall{Name: mcpserver.ToolComplete, Arguments: map[string]any{}},
			want{code: notifytype.CodeInvalidArgument, field: "todo_id"}},
	}
	calls := make([]tsCall, len(cases))
	for i, c := range cases {
		calls[i] = c.call
	}
	run := runTSClient(t, node, w.url, cred, calls, []string{"prompts/list", "resources/list", "resources/templates/list", "completion/complete", "logging/setLevel"})

	require.ElementsMatch(t, []string{"claim", "heartbeat", "complete", "fail", "list_queues", "notify_owner"}, run.Tools)
	require.Len(t, run.Calls, len(cases))
	for i, c := range cases {
		// Before the fix, SDK 1.32 threw "-32602 Structured content does
		// not match the tool's output schema" here for every refusal.
		require.Nil(t, run.Calls[i].Error, "%s %v: the client threw instead of showing the result", c.call.Name, c.call.Arguments)
	}
	for i, c := range cases {
		got := run.Calls[i]
		require.NotNil(t, got.Result, c.call.Name)
		if c.want.code == "" {
			require.False(t, got.Result.IsError, "%s: %+v", c.call.Name, got.Result.Content)
			require.NotEmpty(t, got.Result.StructuredContent, "%s: a success carries structured content", c.call.Name)
			continue
		}
		require.True(t, got.Result.IsError, c.call.Name)
		require.Empty(t, got.Result.StructuredContent, "%s: an error carries no structured content", c.call.Name)
		require.NotEmpty(t, got.Result.Content, c.call.Name)
		require.Contains(t, got.Result.Content[0].Text, string(c.want.code), c.call.Name)
		e := got.Result.Meta[mcpserver.MetaKeyError]
		require.Equal(t, c.want.code, e.Code, "%s %v", c.call.Name, c.call.Arguments)
		require.Equal(t, c.want.field, e.Field, "%s %v", c.call.Name, c.call.Arguments)
	}

	// Only tools are declared, and only tools are served.
	require.Contains(t, run.Capabilities, "tools")
	for name := range run.Capabilities {
		require.Equal(t, "tools", name, "declared capability %s", name)
	}
	require.Len(t, run.Methods, 5)
	for _, m := range run.Methods {
		require.NotNil(t, m.Error, "%s is answered although undeclared", m.Method)
		require.NotNil(t, m.Error.Code, m.Method)
		require.Equal(t, -32601, *m.Error.Code, "%s: method not found", m.Method)
	}

	// The notifications verbs, with their richer output schemas.
	run = runTSClient(t, node, w.url, mgmt, []tsCall{
		{Name: mcpserver.ToolListSinks, Arguments: map[string]any{}},
		{Name: mcpserver.ToolSetSinkSubscriptions, Arguments: map[string]any{"sink_id": theirSink, "subscriptions": []any{}}},
		{Name: mcpserver.ToolSetSink, Arguments: map[string]any{"name": "phone", "kind": "smoke-signal", "connection_id": 1}},
	}, nil)
	require.Nil(t, run.Calls[0].Error)
	require.False(t, run.Calls[0].Result.IsError)
	for _, c := range run.Calls[1:] {
		require.Nil(t, c.Error, "%s: the client threw instead of showing the result", c.Name)
		require.True(t, c.Result.IsError, c.Name)
		require.Empty(t, c.Result.StructuredContent, c.Name)
	}
	require.Equal(t, notifytype.CodeNotFound, run.Calls[1].Result.Meta[mcpserver.MetaKeyError].Code)
	require.Equal(t, notifytype.CodeInvalidArgument, run.Calls[2].Result.Meta[mcpserver.MetaKeyError].Code)
}

func TestTypeScriptClientDefaultGrant(t *testing.T) {
	t.Parallel()
	// Scenario: Sink verbs are off until granted
	node := nodeOrSkip(t)
	w := newWorld(t)
	human, scope := w.person()
	w.sink(human, scope, "https://push.example.net")
	_, cred := w.vend(t, human, scope) // the default grant: todos and rules

	run := runTSClient(t, node, w.url, cred, []tsCall{{Name: mcpserver.ToolListSinks, Arguments: map[string]any{}}}, nil)
	require.ElementsMatch(t, append(mcpserver.ToolsOf(notifytype.GrantTodos), mcpserver.ToolsOf(notifytype.GrantRules)...), run.Tools)
	require.NotContains(t, run.Tools, mcpserver.ToolListSinks)
	require.NotContains(t, run.Instructions, mcpserver.ToolListSinks, "the instructions describe only the granted verbs")
	require.NotContains(t, run.Instructions, mcpserver.ToolNotifyOwner)
	got := run.Calls[0]
	require.Nil(t, got.Error, "the client shows the refusal")
	require.True(t, got.Result.IsError)
	require.Equal(t, notifytype.CodeForbidden, got.Result.Meta[mcpserver.MetaKeyError].Code)
	require.Equal(t, 1, w.count(t, `SELECT count(*) FROM switchboard.sinks`), "nothing changed")
}

func TestOnlyToolsAreDeclaredAndServed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	_, cred := w.vend(t, human, scope)
	cs := w.connect(t, cred)

	caps := cs.InitializeResult().Capabilities
	require.NotNil(t, caps.Tools)
	require.Nil(t, caps.Prompts)
	require.Nil(t, caps.Resources)
	require.Nil(t, caps.Completions)
	require.Nil(t, caps.Logging)

	_, err := cs.ListPrompts(context.Background(), nil)
	require.ErrorContains(t, err, "method not found")
	_, err = cs.ListResources(context.Background(), nil)
	require.ErrorContains(t, err, "method not found")
	_, err = cs.ListResourceTemplates(context.Background(), nil)
	require.ErrorContains(t, err, "method not found")
	require.NotEmpty(t, toolNames(t, cs), "tools are still served")
}

// postWithOrigin sends initialize with the credential and an Origin header
// ("" for none).
func (w *world) postWithOrigin(t *testing.T, cred, origin string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, w.url, strings.NewReader(initialize))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+cred)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Body.Close() })
	return res
}

func TestOriginIsValidated(t *testing.T) {
	t.Parallel()
	const base = "https://notify.example.com"
	w := newWorld(t, withBaseURL(base))
	human, scope := w.person()
	_, cred := w.vend(t, human, scope)

	// The httptest server listens on loopback: a page on the machine itself
	// (the MCP Inspector's, say) may connect, as may the server's own origin
	// and a client that sends no Origin at all.
	for _, origin := range []string{"", base, "http://localhost:6274", "http://127.0.0.1:6274", "http://[::1]:6274"} {
		res := w.postWithOrigin(t, cred, origin)
		require.Equal(t, http.StatusOK, res.StatusCode, "origin %q", origin)
	}
	// A foreign page is refused, whether or not it holds a credential: a
	// DNS-rebinding page has the attacker's origin.
	for _, origin := range []string{"https://evil.example", "http://notify.example.com", "https://notify.example.com:8443", "null",
		"https://notify.example.com.evil.example", "http://localhost.evil.example"} {
		res := w.postWithOrigin(t, cred, origin)
		require.Equal(t, http.StatusForbidden, res.StatusCode, "origin %q", origin)
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.Contains(t, string(body), "forbidden", "origin %q", origin)
	}
	res := w.postWithOrigin(t, "sbe_not-a-credential", "https://evil.example")
	require.Equal(t, http.StatusForbidden, res.StatusCode, "the origin is checked before the credential")
}

func TestLoopbackOriginsOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	// A server reached on a public address takes no loopback origin: a
	// page on some visitor's machine is not the server's.
	allowed := mcpserver.OriginAllowed("https://notify.example.com")
	for _, tc := range []struct {
		origin, local string
		ok            bool
	}{
		{"", "203.0.113.7:443", true},
		{"https://notify.example.com", "203.0.113.7:443", true},
		{"HTTPS://Notify.Example.com", "203.0.113.7:443", true},
		{"http://localhost:6274", "203.0.113.7:443", false},
		{"http://localhost:6274", "127.0.0.1:8080", true},
		{"http://127.0.0.1:6274", "[::1]:8080", true},
		{"https://evil.example", "127.0.0.1:8080", false},
	} {
		require.Equal(t, tc.ok, allowed(tc.origin, tc.local), "%q on %s", tc.origin, tc.local)
	}
}

func TestInstructionsDescribeOnlyGrantedFamilies(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()

	_, cred := w.vend(t, human, scope) // the default grant: todos and rules
	got := w.connect(t, cred).InitializeResult().Instructions
	for _, verb := range mcpserver.ToolsOf(notifytype.GrantTodos) {
		require.Contains(t, got, verb)
	}
	for _, verb := range append(mcpserver.ToolsOf(notifytype.GrantNotifications), mcpserver.ToolNotifyOwner) {
		require.NotContains(t, got, verb, "a verb the endpoint does not have")
	}

	_, cred = w.vend(t, human, scope, notifytype.GrantNotifyOwner)
	got = w.connect(t, cred).InitializeResult().Instructions
	require.Contains(t, got, mcpserver.ToolNotifyOwner)
	for _, verb := range append(mcpserver.ToolsOf(notifytype.GrantNotifications), mcpserver.ToolsOf(notifytype.GrantTodos)...) {
		require.NotContains(t, got, verb)
	}

	_, cred = w.vend(t, human, scope, notifytype.GrantRules)
	got = w.connect(t, cred).InitializeResult().Instructions
	for _, verb := range append(mcpserver.ToolsOf(notifytype.GrantNotifications), mcpserver.ToolsOf(notifytype.GrantTodos)...) {
		require.NotContains(t, got, verb)
	}
	require.NotContains(t, got, mcpserver.ToolNotifyOwner)
}

func TestArgumentErrorsNameTheField(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	_, cred := w.vend(t, human, scope, notifytype.Grants...)
	cs := w.connect(t, cred)

	for _, tc := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{mcpserver.ToolSetSink, map[string]any{"nmae": "phone"}, "nmae"},
		{mcpserver.ToolSetSink, map[string]any{"id": "12"}, "id"},
		{mcpserver.ToolSetSink, map[string]any{"id": 1.5}, "id"},
		{mcpserver.ToolSetSink, map[string]any{"id": json.Number("123456789012345678901234")}, "id"},
		{mcpserver.ToolSetSink, map[string]any{"name": 5}, "name"},
		{mcpserver.ToolSetSink, map[string]any{"options": "loud"}, "options"},
		{mcpserver.ToolSetSink, map[string]any{"budget_per_hour": 1e30}, "budget_per_hour"},
		{mcpserver.ToolSetSinkSubscriptions, map[string]any{"subscriptions": []any{}}, "sink_id"},
		{mcpserver.ToolSetSinkSubscriptions, map[string]any{"sink_id": 1}, "subscriptions"},
		{mcpserver.ToolSetSinkSubscriptions, map[string]any{"sink_id": 1, "subscriptions": []any{map[string]any{}}}, "subscriptions[0].event_types"},
		{mcpserver.ToolSetSinkSubscriptions, map[string]any{"sink_id": 1, "subscriptions": []any{
			map[string]any{"event_types": []string{"agent.notify"}, "queues": []any{7, "forge"}}}}, "subscriptions[0].queues[1]"},
		{mcpserver.ToolSetSinkSubscriptions, map[string]any{"sink_id": 1, "subscriptions": "all"}, "subscriptions"},
		{mcpserver.ToolHeartbeat, map[string]any{"todo_id": nil}, "todo_id"},
		{mcpserver.ToolClaim, map[string]any{"queue_id": 3, "relay": "yes"}, "relay"},
	} {
		e := refused(t, cs, tc.tool, tc.args)
		require.Equal(t, notifytype.CodeInvalidArgument, e.Code, "%s %v", tc.tool, tc.args)
		require.Equal(t, tc.field, e.Field, "%s %v", tc.tool, tc.args)
		for _, leak := range []string{"Go struct", "mcpserver.", "SetSinkIn", "validating", "/properties", "e+", "json:"} {
			require.NotContains(t, e.Message, leak, "%s %v: %s", tc.tool, tc.args, e.Message)
		}
	}
}

// withBaseURL sets the server's SWITCHBOARD_BASE_URL.
func withBaseURL(base string) func(*httpx.Deps) {
	return func(d *httpx.Deps) { d.BaseURL = base }
}

// Issue 19 items 13 and 14 through the real TypeScript SDK, which checks
// every result's structuredContent against the tool's output schema: the
// schemas declare no null, the list verbs answer, every success validates,
// and the refusals name their field.
func TestTypeScriptClientListsAndPaths(t *testing.T) {
	t.Parallel()
	node := nodeOrSkip(t)
	w := rulesWorld(t)
	human, scope := w.person()
	queue := w.F.Queue(scope, "forge")
	w.F.Todo(hosttest.TodoOpts{Queue: queue, Title: "build 812"})
	p := engine.HumanPrincipal(hostid.String(human))
	conn, err := w.eng.CreateConnection(w.Ctx, p, engine.ConnectionInput{
		Owner: scope, Kind: engine.KindGotify, Name: "phone", BaseURL: "https://push.example.net", Secret: notifytype.NewSecret(gotifyToken),
	})
	require.NoError(t, err)
	hook, _, err := w.deps.Webhooks.Create(w.Ctx, p, host.WebhookInput{Owner: scope, Name: "forge"})
	require.NoError(t, err)
	_, other := w.person()
	theirQueue := w.F.Queue(other, "theirs")
	_, cred := w.vend(t, human, scope, notifytype.Grants...)

	good := map[string]any{"event_types": []any{"todo.dead_lettered"}, "queues": []any{queue}}
	type want struct {
		code  notifytype.Code
		field string
	}
	cases := []struct {
		call tsCall
		want want
	}{
		{tsCall{Name: mcpserver.ToolListQueues, Arguments: map[string]any{}}, want{}},
		{tsCall{Name: mcpserver.ToolListConnections, Arguments: map[string]any{}}, want{}},
		{tsCall{Name: mcpserver.ToolSetWebhookRules, Arguments: map[string]any{"webhook_id": hook.ID, "rules": []any{
			map[string]any{"name": "inbox", "expr": "true", "action": map[string]any{"queue": queue}}}}}, want{}},
		{tsCall{Name: mcpserver.ToolListWebhooks, Arguments: map[string]any{}}, want{}},
		{tsCall{Name: mcpserver.ToolTestWebhookRules, Arguments: map[string]any{"webhook_id": hook.ID}}, want{}},
		{tsCall{Name: mcpserver.ToolClaim, Arguments: map[string]any{"queue_id": queue}}, want{}},
		{tsCall{Name: mcpserver.ToolSetSink, Arguments: map[string]any{"name": "phone", "kind": "gotify", "connection_id": conn.ID}}, want{}},
		{tsCall{Name: mcpserver.ToolListSinks, Arguments: map[string]any{}}, want{}},
		{tsCall{Name: mcpserver.ToolListDigests, Arguments: map[string]any{}}, want{}},
		{tsCall{Name: mcpserver.ToolSetSinkSubscriptions, Arguments: map[string]any{"sink_id": 0, "subscriptions": nil}},
			want{notifytype.CodeInvalidArgument, "subscriptions"}},
		{tsCall{Name: mcpserver.ToolSetWebhookRules, Arguments: map[string]any{"webhook_id": hook.ID, "rules": nil}},
			want{notifytype.CodeInvalidArgument, "rules"}},
		{tsCall{Name: mcpserver.ToolSetSinkSubscriptions, Arguments: map[string]any{"sink_id": 0, "subscriptions": []any{good,
			map[string]any{"event_types": []any{"digest"}, "min_severity": "urgent"}}}}, want{notifytype.CodeInvalidArgument, "subscriptions[1].min_severity"}},
		{tsCall{Name: mcpserver.ToolAddWebhookRule, Arguments: map[string]any{"webhook_id": hook.ID, "rule": map[string]any{
			"name": "theirs", "expr": "true", "action": map[string]any{"queue": theirQueue}}}}, want{notifytype.CodeInvalidArgument, "rule.action.queue"}},
		{tsCall{Name: mcpserver.ToolSetSink, Arguments: map[string]any{"name": "pager", "kind": "gotify", "connection_id": 987654321}},
			want{notifytype.CodeInvalidArgument, "connection_id"}},
	}
	calls := make([]tsCall, len(cases))
	for i, c := range cases {
		calls[i] = c.call
	}
	run := runTSClient(t, node, w.url, cred, calls, nil)

	require.NotEmpty(t, run.Schemas)
	for name, schemas := range run.Schemas {
		require.NotContains(t, string(schemas), `"null"`, "%s declares null", name)
	}
	require.Len(t, run.Calls, len(cases))
	var sink struct {
		ID int64 `json:"id"`
	}
	for i, c := range cases {
		got := run.Calls[i]
		require.Nil(t, got.Error, "%s %v: the client threw instead of showing the result", c.call.Name, c.call.Arguments)
		if c.want.code == "" {
			require.False(t, got.Result.IsError, "%s: %+v", c.call.Name, got.Result.Content)
			require.NotEmpty(t, got.Result.StructuredContent, c.call.Name)
			require.False(t, holdsNull(t, got.Result.StructuredContent), "%s sends no null: %s", c.call.Name, got.Result.StructuredContent)
			if c.call.Name == mcpserver.ToolSetSink {
				require.NoError(t, json.Unmarshal(got.Result.StructuredContent, &sink))
			}
			continue
		}
		require.True(t, got.Result.IsError, c.call.Name)
		e := got.Result.Meta[mcpserver.MetaKeyError]
		require.Equal(t, c.want.code, e.Code, "%s %v", c.call.Name, c.call.Arguments)
		require.Equal(t, c.want.field, e.Field, "%s %v: %s", c.call.Name, c.call.Arguments, e.Message)
	}
	var queues mcpserver.ListQueuesOut
	require.NoError(t, json.Unmarshal(run.Calls[0].Result.StructuredContent, &queues))
	require.Len(t, queues.Queues, 1)
	require.Equal(t, queue, queues.Queues[0].ID)
	var hooks mcpserver.ListWebhooksOut
	require.NoError(t, json.Unmarshal(run.Calls[3].Result.StructuredContent, &hooks))
	require.Len(t, hooks.Webhooks, 1)
	require.Len(t, hooks.Webhooks[0].Rules, 1)
	require.NotZero(t, sink.ID)
	require.Equal(t, 1, w.count(t, `SELECT count(*) FROM webhook_rules`), "the null list cleared nothing")
}

// holdsNull reports whether a JSON value holds a null anywhere.
func holdsNull(t *testing.T, raw json.RawMessage) bool {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	var walk func(any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case nil:
			return true
		case map[string]any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}
