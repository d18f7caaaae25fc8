package mcpserver

import (
	"context"
	"errors"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/notifytype"
)

// codeInternal is the code of an error the caller may not see the detail
// of (httpx.Public's "internal").
const codeInternal notifytype.Code = "internal"

// codeHints is the one table from the spec's codes (REQ-15) to MCP tool
// errors: every coded refusal becomes a tool result with IsError set, its
// {code, field, scheme, message} as structured content, and this hint after
// the message, written for the agent reading it. A code not in the table
// is answered as internal and logged.
var codeHints = map[notifytype.Code]string{
	notifytype.CodeInvalidArgument:    "Fix the named field and call again.",
	notifytype.CodeForbiddenScheme:    "Use an Apprise URL scheme this instance allows.",
	notifytype.CodeEncryptionRequired: "The operator must set SWITCHBOARD_SECRET_KEY before a secret can be stored.",
	notifytype.CodeForbidden:          "This endpoint may not do this: its owner decides its grant, and its human's role decides what it may change.",
	notifytype.CodeNotFound:           "Nothing of that id exists in this endpoint's owner scope.",
	notifytype.CodeRateLimited:        "A limit is spent for now; try again later.",
	codeInternal:                      "Something went wrong on the server; try again later.",
}

// ToolError is a tool error's structured content: always all four keys,
// the same code, field, scheme and message the REST API answers.
type ToolError struct {
	Code    notifytype.Code `json:"code"`
	Field   string          `json:"field"`
	Scheme  string          `json:"scheme"`
	Message string          `json:"message"`
}

// handlerError marks an error a verb's own code returned (the engine's or
// the host's), as opposed to one the SDK made while decoding arguments.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

// toolError answers err as a tool error. An error of the verb's own code
// goes through the table; an uncoded one is logged and answered as
// internal, with no detail. An error the SDK made (arguments that do not
// match the input schema) is invalid_argument on field arguments.
func toolError(ctx context.Context, log *slog.Logger, tool string, endpointID int64, err error) *mcp.CallToolResult {
	var pub *notifytype.Error
	var he *handlerError
	if errors.As(err, &he) {
		pub = httpx.Public(he.err)
		if _, ok := codeHints[pub.Code]; !ok || pub.Code == codeInternal {
			log.ErrorContext(ctx, "mcp tool failed", "tool", tool, "endpoint_id", endpointID, "error", he.err)
			pub = &notifytype.Error{Code: codeInternal, Message: "internal error"}
		}
	} else {
		pub = notifytype.InvalidArgument("arguments", err.Error())
	}
	text := pub.Error()
	if hint := codeHints[pub.Code]; hint != "" {
		text += ". " + hint
	}
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: ToolError{Code: pub.Code, Field: pub.Field, Scheme: pub.Scheme, Message: pub.Message},
	}
}
