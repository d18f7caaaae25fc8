package host_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
)

func TestDirectory(t *testing.T) {
	t.Parallel()

	type bundle struct {
		dir *host.Directory
		f   *hosttest.Factory
	}
	setup := func(t *testing.T) (*bundle, context.Context) {
		t.Helper()
		pool := hosttest.New(t)
		return &bundle{dir: host.NewDirectory(pool), f: hosttest.NewFactory(t, pool)}, context.Background()
	}

	t.Run("TeamRole", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)
		team, otherTeam := b.f.Team(""), b.f.Team("")
		owner, admin, member, outsider := b.f.Human(""), b.f.Human(""), b.f.Human(""), b.f.Human("")
		b.f.Member(team, owner, "owner")
		b.f.Member(team, admin, "admin")
		b.f.Member(team, member, "member")
		b.f.Member(otherTeam, outsider, "owner")

		for human, want := range map[int64]engine.Role{
			owner: engine.RoleOwner, admin: engine.RoleAdmin, member: engine.RoleMember, outsider: engine.RoleNone,
		} {
			got, err := b.dir.TeamRole(ctx, hostid.String(human), hostid.String(team))
			require.NoError(t, err)
			require.Equal(t, want, got)
		}
		got, err := b.dir.TeamRole(ctx, hostid.String(owner), "999999")
		require.NoError(t, err)
		require.Equal(t, engine.RoleNone, got)
	})

	t.Run("Owned", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)
		a, other := hostid.Human(b.f.Human("")), hostid.Team(b.f.Team(""))

		mk := map[engine.Resource]func(notifytype.OwnerScope) int64{
			engine.ResourceQueue: func(s notifytype.OwnerScope) int64 { return b.f.Queue(s, "") },
			engine.ResourceEndpoint: func(s notifytype.OwnerScope) int64 {
				return b.f.Endpoint(hosttest.EndpointOpts{Owner: s, Human: b.f.Human("")})
			},
			engine.ResourceWebhook: func(s notifytype.OwnerScope) int64 { return b.f.Webhook(s, "") },
			engine.ResourceTodo: func(s notifytype.OwnerScope) int64 {
				return b.f.Todo(hosttest.TodoOpts{Queue: b.f.Queue(s, "")})
			},
		}
		for kind, make := range mk {
			mine1, theirs, mine2 := make(a), make(other), make(a)
			got, err := b.dir.Owned(ctx, a, kind, []int64{mine2, theirs, 999999, mine1, mine2})
			require.NoError(t, err, kind)
			require.Equal(t, []int64{mine1, mine2}, got, kind)

			got, err = b.dir.Owned(ctx, other, kind, []int64{mine1, theirs})
			require.NoError(t, err, kind)
			require.Equal(t, []int64{theirs}, got, kind)

			got, err = b.dir.Owned(ctx, a, kind, nil)
			require.NoError(t, err, kind)
			require.Empty(t, got, kind)
		}

		_, err := b.dir.Owned(ctx, a, engine.Resource("sink"), []int64{1})
		require.Error(t, err)
	})
}
