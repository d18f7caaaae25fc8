package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard/notify/notifytype"
)

// Tool names, by family (D5).
const (
	ToolClaim     = "claim"
	ToolHeartbeat = "heartbeat"
	ToolComplete  = "complete"
	ToolFail      = "fail"

	ToolListSinks            = "list_sinks"
	ToolSetSink              = "set_sink"
	ToolDeleteSink           = "delete_sink"
	ToolTestSink             = "test_sink"
	ToolSetSinkSubscriptions = "set_sink_subscriptions"

	ToolNotifyOwner = "notify_owner"
)

// verb is one tool and how to add it to a server.
type verb struct {
	name string
	add  func(*mcp.Server, *surface)
}

// families lists each family's verbs; a grant adds exactly these tools.
var families = map[notifytype.Grant][]verb{
	notifytype.GrantTodos: {
		{ToolClaim, addClaim},
		{ToolHeartbeat, addHeartbeat},
		{ToolComplete, addComplete},
		{ToolFail, addFail},
	},
	notifytype.GrantRules: rulesVerbs,
	notifytype.GrantNotifications: {
		{ToolListSinks, addListSinks},
		{ToolSetSink, addSetSink},
		{ToolDeleteSink, addDeleteSink},
		{ToolTestSink, addTestSink},
		{ToolSetSinkSubscriptions, addSetSinkSubscriptions},
	},
	notifytype.GrantNotifyOwner: {
		{ToolNotifyOwner, addNotifyOwner},
	},
}

// verbFamily maps every tool name served here to its family.
var verbFamily = func() map[string]notifytype.Grant {
	m := map[string]notifytype.Grant{}
	for g, vs := range families {
		for _, v := range vs {
			m[v.name] = g
		}
	}
	return m
}()

// ToolsOf returns the tool names of family g, in order.
func ToolsOf(g notifytype.Grant) []string {
	var out []string
	for _, v := range families[g] {
		out = append(out, v.name)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// jsonObject decodes a stored JSON object for output, numbers kept exact;
// an empty or non-object value is an empty object.
func jsonObject(raw json.RawMessage) (map[string]any, error) {
	out := map[string]any{}
	if len(bytes.TrimSpace(raw)) == 0 {
		return out, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("error decoding stored JSON object: %w", err)
	}
	if out == nil {
		out = map[string]any{}
	}
	return out, nil
}

// timePtr is t, or nil for the zero time.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
