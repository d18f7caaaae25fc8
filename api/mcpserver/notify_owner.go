package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard/notify/engine/pages"
	"github.com/switchboard/notify/notifytype"
)

// NotifyOwnerIn is notify_owner's input (REQ-6).
type NotifyOwnerIn struct {
	Title    string `json:"title" jsonschema:"what the owner should know, one line; shown truncated to 120 characters as an agent-written title"`
	Severity string `json:"severity,omitempty" jsonschema:"low, normal or high; defaults to normal"`
	TodoID   int64  `json:"todo_id,omitempty" jsonschema:"a todo of this endpoint's owner the page is about; the message links it"`
}

// NotifyOwnerOut is notify_owner's output. A page is fire-and-forget: there
// is nothing to acknowledge or follow up (REQ-1).
type NotifyOwnerOut struct {
	Accepted bool `json:"accepted" jsonschema:"the page was accepted; it reaches the owner's sinks subscribed to agent.notify"`
}

func addNotifyOwner(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:  ToolNotifyOwner,
		Title: "Page the owner",
		Description: "Send the endpoint's owner a short page through their sinks subscribed to agent.notify. " +
			"Fire-and-forget: it assigns nothing and changes no todo. At most 5 an hour per endpoint.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(true)},
	}, func(ctx context.Context, c *caller, in NotifyOwnerIn) (NotifyOwnerOut, error) {
		err := pages.NotifyOwner(ctx, s.d.Engine, c.p, pages.NotifyOwnerInput{
			Title: in.Title, Severity: notifytype.Severity(in.Severity), TodoID: in.TodoID,
		})
		if err != nil {
			return NotifyOwnerOut{}, err
		}
		return NotifyOwnerOut{Accepted: true}, nil
	})
}
