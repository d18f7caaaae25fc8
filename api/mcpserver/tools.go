package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
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
		{ToolListQueues, addListQueues},
	},
	notifytype.GrantRules: rulesVerbs,
	notifytype.GrantNotifications: {
		{ToolListSinks, addListSinks},
		{ToolListConnections, addListConnections},
		{ToolSetSink, addSetSink},
		{ToolDeleteSink, addDeleteSink},
		{ToolTestSink, addTestSink},
		{ToolSetSinkSubscriptions, addSetSinkSubscriptions},
		{ToolListDigests, addListDigests},
		{ToolSetDigest, addSetDigest},
		{ToolDeleteDigest, addDeleteDigest},
	},
	notifytype.GrantNotifyOwner: {
		{ToolNotifyOwner, addNotifyOwner},
	},
}

// familyGuides says in a line what each family's verbs are for; the
// initialize instructions carry the lines of the granted families only. A
// family without a line is described by its verbs' names alone.
var familyGuides = map[notifytype.Grant]string{
	notifytype.GrantTodos: "claim the oldest pending todo of a queue, keep the lease with heartbeat, " +
		"and end the attempt with complete or fail; list_queues lists the queues it may claim from",
	notifytype.GrantRules: "set, add, change and dry-run the routing rules of the webhooks of this endpoint's owner scope: " +
		"jq expressions whose actions route a delivery to a queue, drop it, or notify a sink by name; a dry run sends nothing; " +
		"list_webhooks lists the webhooks with their rules",
	notifytype.GrantNotifications: "manage the sinks (Gotify and Apprise servers) of this endpoint's owner scope " +
		"and what they are subscribed to, and its scheduled queue digests, using existing connections only (list_connections lists them)",
	notifytype.GrantNotifyOwner: "page this endpoint's owner through their sinks, at most 5 an hour",
}

// instructionsFor is what a server holding the tools of fams tells a
// client at initialize: the granted families only, and how errors come.
func instructionsFor(fams []notifytype.Grant) string {
	var b strings.Builder
	b.WriteString("Switchboard Notify, for one agent endpoint. ")
	if len(fams) == 0 {
		b.WriteString("This endpoint's grant holds no verbs served over MCP, so it lists no tools; its owner decides the grant.")
		return b.String()
	}
	b.WriteString("This endpoint's owner granted it these verbs: ")
	for i, f := range fams {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s)", f, strings.Join(ToolsOf(f), ", "))
		if g := familyGuides[f]; g != "" {
			b.WriteString(": " + g)
		}
	}
	b.WriteString(". A refusal is a tool result with isError set: its text says the code (invalid_argument, forbidden, " +
		"not_found, ...), the field and what to do, and _meta[\"" + MetaKeyError + "\"] holds {code, field, scheme, message}.")
	return b.String()
}

// addTool is how every verb is added to a server: the tool's input and
// output schemas are inferred from In and Out (descriptions from the
// jsonschema tags); the arguments are checked and decoded here, so a
// client's mistake is an invalid_argument naming the field
// (decodeArguments); fn runs as the caller; and its output is the result's
// structured content, checked against the output schema. Every error,
// of decoding or of fn, comes back marked for guard to answer through the
// one table (toolError): a tool result with isError set and no
// structured content.
func addTool[In, Out any](srv *mcp.Server, s *surface, t *mcp.Tool, fn func(context.Context, *caller, In) (Out, error)) {
	inSchema, err := schemaFor(reflect.TypeFor[In](), s.limits)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: input schema of %s: %v", t.Name, err))
	}
	inResolved, err := inSchema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: input schema of %s: %v", t.Name, err))
	}
	outSchema, err := schemaFor(reflect.TypeFor[Out](), s.limits)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: output schema of %s: %v", t.Name, err))
	}
	outResolved, err := outSchema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: output schema of %s: %v", t.Name, err))
	}
	tool := *t
	tool.InputSchema, tool.OutputSchema = inSchema, outSchema
	failed := func(err error) (*mcp.CallToolResult, error) {
		res := &mcp.CallToolResult{}
		res.SetError(&handlerError{err})
		return res, nil
	}
	srv.AddTool(&tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c, err := callerOf(req)
		if err != nil {
			return failed(err)
		}
		in, err := decodeArguments[In](req.Params.Arguments, inSchema, inResolved)
		if err != nil {
			return failed(err)
		}
		out, err := fn(ctx, c, in)
		if err != nil {
			return failed(err)
		}
		b, err := json.Marshal(out)
		if err != nil {
			return failed(fmt.Errorf("error encoding the output of %s: %w", t.Name, err))
		}
		// A nil list or map is sent as what the schema declares ([] or
		// {}), never null; then the output is checked against the schema.
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var check any
		if err := dec.Decode(&check); err != nil {
			return failed(fmt.Errorf("error decoding the output of %s: %w", t.Name, err))
		}
		check = normalise(check, outSchema)
		if b, err = json.Marshal(check); err != nil {
			return failed(fmt.Errorf("error encoding the output of %s: %w", t.Name, err))
		}
		var plain any
		if err := json.Unmarshal(b, &plain); err != nil {
			return failed(fmt.Errorf("error decoding the output of %s: %w", t.Name, err))
		}
		if err := outResolved.Validate(&plain); err != nil {
			return failed(fmt.Errorf("error checking the output of %s against its schema: %w", t.Name, err))
		}
		// The text block repeats the JSON for clients that read content
		// only, as the spec suggests.
		return &mcp.CallToolResult{
			StructuredContent: json.RawMessage(b),
			Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
		}, nil
	})
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

// bodyLimitNote ends the description of every verb whose arguments can
// exceed the request body limit (httpx.MaxBody, the spec's 16 KiB).
const bodyLimitNote = " The whole request is at most 16 KiB; a larger one is refused before the tool runs."

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
