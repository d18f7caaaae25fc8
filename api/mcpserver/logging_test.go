package mcpserver_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/mcpserver"
	"github.com/switchboard/notify/notifytype"
)

// logLines decodes the world's JSON log lines.
func (w *world) logLines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(w.Logs.String()))
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), sc.Text())
		out = append(out, line)
	}
	return out
}

// requestLines are the "mcp request" lines of the world's log.
func (w *world) requestLines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range w.logLines(t) {
		if line["msg"] == "mcp request" {
			out = append(out, line)
		}
	}
	return out
}

func TestOneLogLinePerRequest(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	queue := w.F.Queue(scope, "forge")
	endpoint, cred := w.vend(t, human, scope, notifytype.GrantTodos)
	canary := "canary" + rand.Text()

	cs := w.connect(t, cred)
	// However the client opened the session (initialize and
	// notifications/initialized, or server/discover with the newest
	// protocol), each of its requests got one INFO line.
	connected := w.requestLines(t)
	require.NotEmpty(t, connected)
	for _, line := range connected {
		require.Equal(t, "INFO", line["level"], line)
		require.Equal(t, "ok", line["outcome"], line)
		require.EqualValues(t, endpoint, line["endpoint_id"], line)
		require.NotEmpty(t, line["method"], line)
	}
	toolNames(t, cs)
	succeeds[mcpserver.ClaimOut](t, cs, mcpserver.ToolClaim, map[string]any{"queue_id": queue})
	require.Equal(t, notifytype.CodeNotFound, refused(t, cs, mcpserver.ToolHeartbeat, map[string]any{"todo_id": 999999}).Code)
	require.Equal(t, notifytype.CodeInvalidArgument, refused(t, cs, mcpserver.ToolClaim, map[string]any{"queue_id": queue, "note": canary}).Code)
	_, err := cs.ListPrompts(context.Background(), nil)
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, w.post(t, "Bearer sbe_"+canary, initialize).StatusCode)
	require.Equal(t, http.StatusBadRequest, w.post(t, "Bearer "+cred, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":`+canary).StatusCode)
	require.Equal(t, http.StatusForbidden, w.postWithOrigin(t, cred, "https://"+canary+".example").StatusCode)

	type want struct {
		level, method, tool, outcome, code string
		endpoint                           bool
	}
	wants := []want{
		{"INFO", "tools/list", "", "ok", "", true},
		{"INFO", "tools/call", "claim", "ok", "", true},
		{"INFO", "tools/call", "heartbeat", "tool_error", "not_found", true},
		{"INFO", "tools/call", "claim", "tool_error", "invalid_argument", true},
		{"WARN", "prompts/list", "", "protocol_error", "-32601", true},
		{"WARN", "initialize", "", "unauthenticated", "", false},
		{"WARN", "", "", "protocol_error", "", true},
		{"WARN", "initialize", "", "forbidden_origin", "", false},
	}

	for _, line := range w.logLines(t) {
		if line["msg"] != "mcp request" {
			// Nothing else of MCP's is logged at INFO or above for these.
			require.NotContains(t, []string{"INFO", "WARN", "ERROR"}, line["level"], "an extra line: %v", line)
		}
	}
	requests := w.requestLines(t)[len(connected):]
	require.Len(t, requests, len(wants), "one line per request: %v", requests)
	for i, want := range wants {
		got := requests[i]
		require.Equal(t, want.level, got["level"], "%d: %v", i, got)
		require.Equal(t, want.method, orEmpty(got["method"]), "%d: %v", i, got)
		require.Equal(t, want.tool, orEmpty(got["tool"]), "%d: %v", i, got)
		require.Equal(t, want.outcome, got["outcome"], "%d: %v", i, got)
		require.Equal(t, want.code, orEmpty(got["code"]), "%d: %v", i, got)
		if want.endpoint {
			require.EqualValues(t, endpoint, got["endpoint_id"], "%d: %v", i, got)
		} else {
			require.NotContains(t, got, "endpoint_id", "%d: %v", i, got)
		}
		require.Contains(t, got, "duration", "%d", i)
		require.Contains(t, got, "status", "%d", i)
	}

	logs := w.Logs.String()
	require.NotContains(t, logs, `"session_id":""`)
	require.NotContains(t, logs, canary, "nothing a client sent is logged")
	require.NotContains(t, logs, cred, "the credential is never logged")
}

func orEmpty(v any) string {
	if v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		b, _ := json.Marshal(v)
		return string(b)
	}
	return s
}
