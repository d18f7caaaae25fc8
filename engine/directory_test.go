package engine_test

import (
	"context"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

// tableDirectory is a Directory over the foundation schema's own tables
// (team_members, queues, endpoints, webhooks), for the management service's
// tests; the host's Directory is the real one.
type tableDirectory struct{ db store.DBTX }

func (d tableDirectory) TeamRole(ctx context.Context, humanID, teamID string) (engine.Role, error) {
	role, err := hoststore.TeamRole(ctx, d.db, hostid.Number(teamID), hostid.Number(humanID))
	return engine.Role(role), err
}

func (d tableDirectory) KnownActor(ctx context.Context, humanID string, endpointID int64) (bool, error) {
	return hoststore.KnownActor(ctx, d.db, hostid.Number(humanID), endpointID)
}

func (d tableDirectory) Owned(ctx context.Context, scope notifytype.OwnerScope, kind engine.Resource, ids []int64) ([]int64, error) {
	return hoststore.OwnedIDs(ctx, d.db, scope.String(), string(kind), ids)
}
