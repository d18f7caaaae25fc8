package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard/notify/host"
)

// The todos family: thin over host.Todos, which refuses a revoked
// endpoint or one without the todos grant, and any todo or queue the
// endpoint may not touch.

// TodoOut is a todo as the todos verbs answer it.
type TodoOut struct {
	ID              int64          `json:"id"`
	QueueID         int64          `json:"queue_id"`
	Owner           string         `json:"owner" jsonschema:"the todo's owner scope, human:<id> or team:<id>"`
	Title           string         `json:"title"`
	Payload         map[string]any `json:"payload" jsonschema:"the todo's JSON payload"`
	State           string         `json:"state" jsonschema:"pending, claimed, done or dead"`
	Attempts        int            `json:"attempts" jsonschema:"claims since the todo was enqueued or re-queued"`
	AttemptCap      int            `json:"attempt_cap" jsonschema:"claims the todo gets; failing the last one dead-letters it"`
	LeaseExpiresAt  *time.Time     `json:"lease_expires_at,omitempty" jsonschema:"when the claim lapses without a heartbeat"`
	DeadLetterCount int            `json:"dead_letter_count"`
	DeadReason      string         `json:"dead_reason,omitempty"`
	OriginDisplay   string         `json:"origin_display,omitempty"`
	OriginPermalink string         `json:"origin_permalink,omitempty"`
}

func todoOut(t host.Todo) (TodoOut, error) {
	payload, err := jsonObject(t.Payload)
	if err != nil {
		return TodoOut{}, err
	}
	return TodoOut{
		ID: t.ID, QueueID: t.QueueID, Owner: t.Owner.String(), Title: t.Title, Payload: payload,
		State: string(t.State), Attempts: t.Attempts, AttemptCap: t.AttemptCap,
		LeaseExpiresAt: timePtr(t.LeaseExpiresAt), DeadLetterCount: t.DeadLetterCount,
		DeadReason: string(t.DeadReason), OriginDisplay: t.OriginDisplay, OriginPermalink: t.OriginPermalink,
	}, nil
}

// ClaimIn is claim's input.
type ClaimIn struct {
	QueueID int64 `json:"queue_id" jsonschema:"the queue to claim from: one of the endpoint's owner scope, or of a team its human belongs to"`
	Relay   bool  `json:"relay,omitempty" jsonschema:"record the attempt as made by a relay acting for the agent; defaults to false"`
}

// ClaimOut is claim's output.
type ClaimOut struct {
	Claimed bool     `json:"claimed" jsonschema:"false when the queue has no pending todo"`
	Todo    *TodoOut `json:"todo,omitempty" jsonschema:"the claimed todo, leased to this endpoint"`
}

// TodoIn names a todo this endpoint holds claimed.
type TodoIn struct {
	TodoID int64 `json:"todo_id" jsonschema:"a todo this endpoint holds claimed"`
}

// ReportIn closes the attempt on a claimed todo.
type ReportIn struct {
	TodoID         int64  `json:"todo_id" jsonschema:"a todo this endpoint holds claimed"`
	Summary        string `json:"summary,omitempty" jsonschema:"what the attempt did, in a line or two (at most 4000 characters)"`
	ArtifactHandle string `json:"artifact_handle,omitempty" jsonschema:"a handle to what the attempt produced, if anything"`
}

func addClaim(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:        ToolClaim,
		Title:       "Claim a todo",
		Description: "Claim the oldest pending todo of a queue. The claim is leased for the todo's TTL; renew it with heartbeat, and end it with complete or fail.",
	}, func(ctx context.Context, c *caller, in ClaimIn) (ClaimOut, error) {
		t, ok, err := s.d.Todos.Claim(ctx, c.p.EndpointID, in.QueueID, host.ClaimOpts{Relay: in.Relay})
		if err != nil || !ok {
			return ClaimOut{}, err
		}
		out, err := todoOut(t)
		return ClaimOut{Claimed: true, Todo: &out}, err
	})
}

func addHeartbeat(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:        ToolHeartbeat,
		Title:       "Renew a claim",
		Description: "Renew this endpoint's lease on a claimed todo for a full TTL from now.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: ptr(false)},
	}, func(ctx context.Context, c *caller, in TodoIn) (TodoOut, error) {
		t, err := s.d.Todos.Heartbeat(ctx, c.p.EndpointID, in.TodoID)
		if err != nil {
			return TodoOut{}, err
		}
		return todoOut(t)
	})
}

func addComplete(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:        ToolComplete,
		Title:       "Complete a todo",
		Description: "Mark a todo this endpoint holds claimed as done, with an optional report of the attempt." + bodyLimitNote,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false)},
	}, func(ctx context.Context, c *caller, in ReportIn) (TodoOut, error) {
		t, err := s.d.Todos.Complete(ctx, c.p.EndpointID, in.TodoID, host.AttemptReport{Summary: in.Summary, ArtifactHandle: in.ArtifactHandle})
		if err != nil {
			return TodoOut{}, err
		}
		return todoOut(t)
	})
}

func addFail(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:        ToolFail,
		Title:       "Fail a todo",
		Description: "Give up the attempt on a todo this endpoint holds claimed. Below its attempt cap the todo is pending again; at the cap it dead-letters and its owner's subscribed sinks are told." + bodyLimitNote,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false)},
	}, func(ctx context.Context, c *caller, in ReportIn) (TodoOut, error) {
		t, err := s.d.Todos.Fail(ctx, c.p.EndpointID, in.TodoID, host.AttemptReport{Summary: in.Summary, ArtifactHandle: in.ArtifactHandle})
		if err != nil {
			return TodoOut{}, err
		}
		return todoOut(t)
	})
}
