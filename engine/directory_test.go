package engine_test

import (
	"context"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

// tableDirectory is a Directory over the foundation schema's own tables
// (team_members, queues, endpoints, webhooks), for the management service's
// tests; the host's Directory is the real one.
type tableDirectory struct{ db store.DBTX }

func (d tableDirectory) TeamRole(ctx context.Context, humanID, teamID int64) (engine.Role, error) {
	role, err := store.TeamRole(ctx, d.db, teamID, humanID)
	return engine.Role(role), err
}

func (d tableDirectory) KnownActor(ctx context.Context, humanID, endpointID int64) (bool, error) {
	return store.KnownActor(ctx, d.db, humanID, endpointID)
}

func (d tableDirectory) Owned(ctx context.Context, scope notifytype.OwnerScope, kind engine.Resource, ids []int64) ([]int64, error) {
	return store.OwnedIDs(ctx, d.db, scope.String(), string(kind), ids)
}
