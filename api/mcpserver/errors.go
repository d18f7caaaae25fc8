package mcpserver

import (
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/notifytype"
)

// codeInternal is the code of an error the caller may not see the detail
// of (httpx.Public's "internal").
const codeInternal notifytype.Code = "internal"

// codeHints is the one table from the spec's codes (REQ-15) to MCP tool
// errors: every coded refusal becomes a tool result with IsError set, its
// text the code, field and message with this hint after it, written for the
// agent reading it, and its {code, field, scheme, message} in the result's
// _meta under MetaKeyError. A code not in the table is answered as internal
// and logged.
var codeHints = map[notifytype.Code]string{
	notifytype.CodeInvalidArgument:    "Fix the named field and call again.",
	notifytype.CodeForbiddenScheme:    "Use an Apprise URL scheme this instance allows.",
	notifytype.CodeEncryptionRequired: "The operator must set SWITCHBOARD_SECRET_KEY before a secret can be stored.",
	notifytype.CodeForbidden:          "This endpoint may not do this: its owner decides its grant, and its human's role decides what it may change.",
	notifytype.CodeNotFound:           "Nothing of that id exists in this endpoint's owner scope.",
	notifytype.CodeRateLimited:        "A limit is spent for now; call again after retry_after_seconds.",
	codeInternal:                      "Something went wrong on the server; try again later.",
}

// MetaKeyError is the key, in a tool error result's _meta, of its
// ToolError.
const MetaKeyError = "switchboard/error"

// ToolError is a tool error's machine-readable form, in the result's _meta
// under MetaKeyError: always the four keys code, field, scheme and message
// the REST API answers, and retry_after_seconds on a rate_limited one.
//
// It is not the result's structuredContent: a tool's output schema
// describes its success, and clients (the TypeScript SDK, the MCP
// Inspector) check structuredContent against it even when isError is set,
// so an error carries none.
type ToolError struct {
	Code    notifytype.Code `json:"code"`
	Field   string          `json:"field"`
	Scheme  string          `json:"scheme"`
	Message string          `json:"message"`
	// RetryAfterSeconds, on rate_limited, is when to call again, in
	// seconds from now (the message says it too).
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`
}

// handlerError marks an error a verb's own code returned (addTool's
// argument check, the engine's or the host's), as opposed to one the SDK
// made.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

// toolError answers err as a tool error and notes its code on the
// request's log line. An error of the verb's own code goes through the
// table; an uncoded one is noted for the log line and answered as
// internal, with no detail. An error the SDK made (only for a tool added
// without addTool) is invalid_argument on field arguments, without the
// SDK's wording.
func toolError(rec *requestRecord, err error) *mcp.CallToolResult {
	var pub *notifytype.Error
	var he *handlerError
	if errors.As(err, &he) {
		pub = httpx.Public(he.err)
		if _, ok := codeHints[pub.Code]; !ok || pub.Code == codeInternal {
			rec.fail(he.err)
			pub = &notifytype.Error{Code: codeInternal, Message: "internal error"}
		}
	} else {
		pub = notifytype.InvalidArgument("arguments", "do not match the tool's input schema (see tools/list)")
	}
	rec.toolError(pub.Code)
	text := pub.Error()
	if hint := codeHints[pub.Code]; hint != "" {
		text += ". " + hint
	}
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
		Meta: mcp.Meta{MetaKeyError: ToolError{Code: pub.Code, Field: pub.Field, Scheme: pub.Scheme, Message: pub.Message,
			RetryAfterSeconds: pub.RetryAfterSeconds}},
	}
}

// itemPath names the field of a refused item of the list argument list by
// its whole path ("subscriptions[1].min_severity"): the engine names the
// item (engine.ItemError) and the field within it.
func itemPath(err error, list string) error {
	var item *engine.ItemError
	if !errors.As(err, &item) || item.Err.Field == "" {
		return err
	}
	e := *item.Err
	e.Field = fmt.Sprintf("%s[%d].%s", list, item.Index, e.Field)
	return &e
}

// connectionArgument refuses a connection id an MCP verb named that is
// not what must be: missing, of another owner scope, or of the wrong kind
// are one refusal, so that no id of another scope is revealed. The human
// surfaces answer it forbidden (REQ-2); an agent chose the id, so it is
// its argument that is wrong.
func connectionArgument(field, what string) error {
	return notifytype.InvalidArgument(field, "must be the id of an existing "+what+" in this endpoint's owner scope; list_connections lists them")
}
