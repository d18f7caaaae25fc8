package engine

import (
	"context"
	"slices"

	"github.com/switchboard/notify/notifytype"
)

// Role is a human's role in a team: owners and admins configure the
// team's notifications, members read them.
type Role string

const (
	RoleNone   Role = ""
	RoleOwner  Role = "owner"
	RoleAdmin  Role = "admin"
	RoleMember Role = "member"
)

// CanConfigure reports whether the role may write a team's sinks,
// subscriptions and digests (owners and admins).
func (r Role) CanConfigure() bool { return r == RoleOwner || r == RoleAdmin }

// Resource names a kind of host object a subscription filter can name.
type Resource string

const (
	ResourceQueue    Resource = "queue"
	ResourceEndpoint Resource = "endpoint"
	ResourceWebhook  Resource = "webhook"
	ResourceTodo     Resource = "todo"
)

// SoleOwner is the one owner of an engine configured without a Directory
// (Config.Directory nil): human "1". Such an engine knows one acting human,
// SoleOwner.ID (HumanPrincipal(SoleOwner.ID)), no endpoint and no team (a
// team scope is not_found), and takes every id a subscription or digest
// names as the owner's own queue, endpoint, webhook or todo: the host has
// no one else. Emit events with Owner SoleOwner.
var SoleOwner = notifytype.Human("1")

// soleOwnerDirectory is the Directory of an engine configured without
// one: SoleOwner alone, no teams.
type soleOwnerDirectory struct{}

func (soleOwnerDirectory) TeamRole(context.Context, string, string) (Role, error) {
	return RoleNone, nil
}

func (soleOwnerDirectory) MemberTeams(context.Context, string) ([]string, error) { return nil, nil }

func (soleOwnerDirectory) KnownActor(_ context.Context, humanID string, endpointID int64) (bool, error) {
	return humanID == SoleOwner.ID && endpointID == 0, nil
}

func (soleOwnerDirectory) Owned(_ context.Context, scope notifytype.OwnerScope, _ Resource, ids []int64) ([]int64, error) {
	out := []int64{}
	if scope != SoleOwner {
		return out, nil
	}
	for _, id := range ids {
		if id > 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Directory is what the engine asks of the host. The reference host
// implements it over its own tables (host.Directory); an embedder with its
// own schema implements it over theirs.
type Directory interface {
	// TeamRole returns the human's role in the team, RoleNone when the
	// human is not a member.
	TeamRole(ctx context.Context, humanID, teamID string) (Role, error)

	// Owned returns which of ids are objects of the given kind in scope.
	// The engine refuses a filter naming any id not returned.
	Owned(ctx context.Context, scope notifytype.OwnerScope, kind Resource, ids []int64) ([]int64, error)

	// KnownActor reports whether humanID names a human of the host and,
	// when endpointID is not 0, whether endpointID names an endpoint
	// acting for that human. The engine keeps owners and actors as opaque
	// ids (on sinks, subscriptions, connections, digests, the write log),
	// with no foreign key into the host's tables: it asks here before
	// every read and write of the management service, and refuses an
	// actor the host does not know with not_found.
	//
	// Human and team ids are the host's own, as opaque strings (a uuid, an
	// integer, a slug: notifytype.ValidOwnerID): the same ids it puts in
	// notifytype.Human and notifytype.Team. Endpoint ids are int64.
	KnownActor(ctx context.Context, humanID string, endpointID int64) (bool, error)
}
