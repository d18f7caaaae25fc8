// Package pages is the reference product's messages to one person, sent
// through the engine outside the embedder's own events: an agent paging
// its owner (NotifyOwner, the MCP verb notify_owner, REQ-6) and a one-time
// sign-in link sent to a human's own sinks (SendSignInLink, the web UI's
// "send me a sign-in link").
package pages

import (
	"context"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/internal/enginecore"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// Limits of an agent's pages.
const (
	// AgentPagesPerHour is how many notify_owner calls one endpoint may
	// make an hour (D12).
	AgentPagesPerHour = 5
	// AgentTitleMaxLen bounds a page's title as given; the message shows
	// at most 120 characters of it (REQ-9).
	AgentTitleMaxLen = 1000
)

// The write log's action and object kind for a page.
const (
	writeAgentPage = "agent.notify"
	objectEndpoint = "endpoint"
)

// NotifyOwnerInput is an agent's page (REQ-6).
type NotifyOwnerInput struct {
	// Title is agent-written: required, at most AgentTitleMaxLen
	// characters, shown truncated to 120 and control-stripped.
	Title string
	// Severity defaults to normal.
	Severity notifytype.Severity
	// TodoID, when set, must be one of the endpoint's owner's todos.
	TodoID int64
}

// NotifyOwner enqueues, through e, one agent.notify event in the
// endpoint's owner scope (REQ-6): only for an endpoint granted notify_owner, at most
// AgentPagesPerHour an hour per endpoint (counted in the database, so
// across instances), inside the sink budget like any event. It creates no
// acknowledgement, assignment or state of any todo (REQ-1).
func NotifyOwner(ctx context.Context, e *engine.Engine, p engine.Principal, in NotifyOwnerInput) error {
	return enginecore.WrapErr(notifyOwner(ctx, e, p, in), "paging owner")
}

func notifyOwner(ctx context.Context, e *engine.Engine, p engine.Principal, in NotifyOwnerInput) error {
	core := enginecore.Of(e)
	if p.EndpointID == 0 {
		return notifytype.Forbidden("notify_owner is an endpoint's verb")
	}
	if !slices.Contains(p.Grants, notifytype.GrantNotifyOwner) {
		return notifytype.Forbidden("this endpoint's grant lacks notify_owner")
	}
	if err := core.CheckEndpointMember(ctx, enginecore.Principal(p)); err != nil {
		return err
	}
	switch {
	case in.Title == "":
		return notifytype.InvalidArgument("title", "is required")
	case !utf8.ValidString(in.Title):
		return notifytype.InvalidArgument("title", "must be UTF-8 text")
	case utf8.RuneCountInString(in.Title) > AgentTitleMaxLen:
		return notifytype.InvalidArgumentf("title", "must be at most %d characters", AgentTitleMaxLen)
	}
	sev, err := notifytype.ParseSeverity("severity", string(in.Severity), notifytype.SeverityNormal)
	if err != nil {
		return err
	}
	content := sinks.Content{Title: in.Title, Summary: "An agent paged its owner."}
	if in.TodoID != 0 {
		owned, err := core.Owned(ctx, p.EndpointScope, string(engine.ResourceTodo), []int64{in.TodoID})
		if err != nil {
			return fmt.Errorf("error checking todo: %w", err)
		}
		if len(owned) != 1 {
			return notifytype.NotFound("todo")
		}
		content.LinkPath = core.ItemLink(p.EndpointScope, string(engine.ResourceTodo), in.TodoID)
	}
	now, err := core.Now(ctx)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, core.Pool, func(tx pgx.Tx) error {
		ok, first, err := store.RecordAgentPage(ctx, tx, p.EndpointID, now, now.Add(-enginecore.AgentPageWindow), AgentPagesPerHour)
		if err != nil {
			return err
		}
		if !ok {
			return notifytype.RateLimitedFor(fmt.Sprintf("at most %d pages an hour per endpoint", AgentPagesPerHour),
				first.Add(enginecore.AgentPageWindow).Sub(now))
		}
		if err := enginecore.RecordWrite(ctx, tx, enginecore.Principal(p), p.EndpointScope, writeAgentPage, objectEndpoint, p.EndpointID); err != nil {
			return err
		}
		return e.Emit(ctx, tx, engine.Event{
			Type: engine.EventAgentNotify, Owner: p.EndpointScope, Severity: sev,
			EndpointID: p.EndpointID, Content: content,
		})
	})
}
