package host

import (
	"context"
	"fmt"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/notifytype"
)

// Directory answers the engine's questions about owners and ownership over
// the reference host's tables. It implements engine.Directory. Human and
// team ids come from the engine as strings and the host's tables key them
// by bigint (hostid): an id that is not one of the host's names nobody (no
// role, no actor, no teams).
type Directory struct {
	db hoststore.DBTX
}

var (
	_ engine.Directory  = (*Directory)(nil)
	_ engine.TeamLister = (*Directory)(nil)
)

// NewDirectory returns a directory reading db: a *pgxpool.Pool, or a pgx.Tx
// to answer inside a transaction.
func NewDirectory(db hoststore.DBTX) *Directory {
	if db == nil {
		panic("host: NewDirectory needs a database")
	}
	return &Directory{db: db}
}

// TeamRole returns the human's role in the team, engine.RoleNone when the
// human is not a member (or the team does not exist).
func (d *Directory) TeamRole(ctx context.Context, humanID, teamID string) (engine.Role, error) {
	h, okH := hostid.Parse(humanID)
	t, okT := hostid.Parse(teamID)
	if !okH || !okT {
		return engine.RoleNone, nil
	}
	role, err := hoststore.TeamRole(ctx, d.db, t, h)
	if err != nil {
		return engine.RoleNone, err
	}
	return engine.Role(role), nil
}

// KnownActor reports whether humanID is a human and, when endpointID is
// not 0, whether endpointID is an endpoint accountable to that human.
func (d *Directory) KnownActor(ctx context.Context, humanID string, endpointID int64) (bool, error) {
	h, ok := hostid.Parse(humanID)
	if !ok {
		return false, nil
	}
	return hoststore.KnownActor(ctx, d.db, h, endpointID)
}

// MemberTeams returns the ids of the teams the human is a member of, in
// any role: the engine's TeamLister, which scopes the ops view by the
// human's sinks (read by index) rather than every actor.
func (d *Directory) MemberTeams(ctx context.Context, humanID string) ([]string, error) {
	h, ok := hostid.Parse(humanID)
	if !ok {
		return nil, nil
	}
	ids, err := hoststore.MemberTeamIDs(ctx, d.db, h)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = hostid.String(id)
	}
	return out, nil
}

// Owned returns, in ascending order and without repeats, which of ids are
// queues, endpoints, webhooks or todos (by kind) of scope. An id of another
// scope, or of no object, is left out.
func (d *Directory) Owned(ctx context.Context, scope notifytype.OwnerScope, kind engine.Resource, ids []int64) ([]int64, error) {
	switch kind {
	case engine.ResourceQueue, engine.ResourceEndpoint, engine.ResourceWebhook, engine.ResourceTodo:
	default:
		return nil, fmt.Errorf("error reading owned ids: unknown resource %q", kind)
	}
	if !scope.Valid() {
		return []int64{}, nil
	}
	return hoststore.OwnedIDs(ctx, d.db, scope.String(), string(kind), ids)
}
