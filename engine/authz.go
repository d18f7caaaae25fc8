package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchboard/notify/internal/enginecore"
	"github.com/switchboard/notify/notifytype"
)

// authorize is the one permission check of the management service: every
// read and write calls it with the owner scope it acts on (the target scope
// of a create, the stored scope of a resource it read).
//
//   - A human acts on human:<self>; on team:<id> a member reads, and only an
//     owner or admin writes (D2): a member's write is forbidden.
//   - An endpoint needs the notifications grant (off by default), and acts
//     only in its own owner scope, with its accountable human's permissions
//     there (REQ-5).
//   - A scope the caller has no part in answers not_found, so that nothing
//     of another owner is ever revealed, not even that it exists (D3).
func (e *Engine) authorize(ctx context.Context, p Principal, scope notifytype.OwnerScope, write bool) error {
	if err := e.checkActor(ctx, p); err != nil {
		return err
	}
	return e.authorizeScope(ctx, p, scope, write)
}

// authorizeScope is authorize for an actor already known.
func (e *Engine) authorizeScope(ctx context.Context, p Principal, scope notifytype.OwnerScope, write bool) error {
	if !scope.Valid() {
		return notifytype.NotFound("owner scope")
	}
	if p.EndpointID != 0 && scope != p.EndpointScope {
		return notifytype.NotFound("owner scope")
	}
	switch scope.Kind {
	case notifytype.ScopeHuman:
		if scope.ID != p.HumanID {
			return notifytype.NotFound("owner scope")
		}
		return nil
	case notifytype.ScopeTeam:
		role, err := e.cfg.Directory.TeamRole(ctx, p.HumanID, scope.ID)
		if err != nil {
			return fmt.Errorf("error reading team role: %w", err)
		}
		switch {
		case role == RoleNone:
			return notifytype.NotFound("owner scope")
		case write && !role.CanConfigure():
			return notifytype.Forbidden("only a team owner or admin may change the team's notifications")
		}
		return nil
	}
	return notifytype.NotFound("owner scope")
}

// checkActor refuses a principal with no human or, for an endpoint,
// without the notifications grant, and an acting human, or endpoint, that
// the Directory does not know: owners and actors are opaque ids the engine records without a
// foreign key, so this is what keeps a write from naming nobody.
func (e *Engine) checkActor(ctx context.Context, p Principal) error {
	if p.HumanID == "" {
		return notifytype.Forbidden("no acting human")
	}
	if !notifytype.ValidOwnerID(p.HumanID) {
		return notifytype.InvalidArgument("human_id", "not a human id (1 to 128 of A-Z a-z 0-9 . _ ~ : @ -)")
	}
	if p.EndpointID != 0 && !p.Has(notifytype.GrantNotifications) {
		return notifytype.Forbidden("this endpoint's grant lacks the notifications verbs")
	}
	ok, err := e.cfg.Directory.KnownActor(ctx, p.HumanID, p.EndpointID)
	switch {
	case err != nil:
		return fmt.Errorf("error looking up the acting human: %w", err)
	case ok:
		return nil
	case p.EndpointID != 0:
		return notifytype.NotFound("acting endpoint")
	}
	return notifytype.NotFound("acting human")
}

// checkEndpointMember refuses an endpoint of a team whose accountable
// human is no longer a member of it: an endpoint acts with its human's
// role in its scope, checked at use, so it does not outlive the human's
// membership (REQ-5). A human principal, or an endpoint of a human scope,
// passes.
func (e *Engine) checkEndpointMember(ctx context.Context, p Principal) error {
	if p.EndpointID == 0 || p.EndpointScope.Kind != notifytype.ScopeTeam {
		return nil
	}
	role, err := e.cfg.Directory.TeamRole(ctx, p.HumanID, p.EndpointScope.ID)
	if err != nil {
		return fmt.Errorf("error reading team role: %w", err)
	}
	if role == RoleNone {
		return notifytype.Forbidden("this endpoint's accountable human is no longer a member of its team")
	}
	return nil
}

// authorizeResource authorizes access to a resource read from the store,
// answering not_found for what (a "sink", a "connection") when the caller
// has no part in its scope.
func (e *Engine) authorizeResource(ctx context.Context, p Principal, scope notifytype.OwnerScope, write bool, what string) error {
	if err := e.checkActor(ctx, p); err != nil {
		return err
	}
	err := e.authorizeScope(ctx, p, scope, write)
	if errors.Is(err, notifytype.ErrNotFound) {
		return notifytype.NotFound(what)
	}
	return err
}

// authorizeTarget authorizes a create in the scope the caller names. An
// invalid scope is invalid_argument on field owner.
func (e *Engine) authorizeTarget(ctx context.Context, p Principal, scope notifytype.OwnerScope) error {
	if !scope.Valid() {
		return notifytype.InvalidArgument("owner", "must be human:<id> or team:<id>")
	}
	return e.authorize(ctx, p, scope, true)
}

// rejectEndpoint refuses an action no endpoint may take (REQ-5: the
// notifications verbs never create a connection or read a secret).
func rejectEndpoint(p Principal, action string) error {
	if p.EndpointID != 0 {
		return notifytype.Forbidden("an endpoint may not " + action)
	}
	return nil
}

// wrapErr adds context to an error crossing the service boundary. A coded
// refusal (*notifytype.Error) passes through unchanged, so callers and
// surfaces see exactly the code, field and message it was made with.
func wrapErr(err error, doing string) error { return enginecore.WrapErr(err, doing) }

// notFoundIfNoRows turns a missing row into not_found for what.
func notFoundIfNoRows(err error, what string) error { return enginecore.NotFoundIfNoRows(err, what) }

// ItemError is the refusal of one item of a list input (SetSubscriptions'
// ins[Index]). It reads, matches and answers as its refusal (Err), field
// included, and tells a surface which item was refused, so that one taking
// the list under a name can name the field's whole path
// ("subscriptions[1].min_severity").
type ItemError struct {
	Index int
	Err   *notifytype.Error
}

func (e *ItemError) Error() string { return e.Err.Error() }
func (e *ItemError) Unwrap() error { return e.Err }

// connectionRefusal is connectionFor's refusal of the connection a sink or
// digest names: forbidden on the human surfaces (REQ-2), and the same
// refusal whether the connection is missing, of another scope or of
// another kind.
type connectionRefusal struct{ err *notifytype.Error }

func (e *connectionRefusal) Error() string { return e.err.Error() }
func (e *connectionRefusal) Unwrap() error { return e.err }

// IsConnectionRefusal reports whether err refuses the connection a sink or
// digest write named (missing, of another owner scope, or of another
// kind: one refusal for the three, so it reveals nothing of another
// scope). A surface that answers it otherwise than forbidden (the MCP
// verbs: invalid_argument on the connection's field) finds it so.
func IsConnectionRefusal(err error) bool {
	var r *connectionRefusal
	return errors.As(err, &r)
}
