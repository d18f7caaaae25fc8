package host_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/pages"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// TestEndpointWritesRecordTheirAuthor: vending and revoking an endpoint
// record the human who did it (REQ-5), in the write's transaction.
func TestEndpointWritesRecordTheirAuthor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := hosttest.New(t)
	f := hosttest.NewFactory(t, pool)
	dir := host.NewDirectory(pool)
	eng, err := engine.New(engine.Config{Pool: pool, Events: host.Events(), Links: host.Links(), Directory: dir})
	require.NoError(t, err)
	endpoints := host.NewEndpoints(pool, dir, host.NewTodos(pool, eng, nil), nil)
	h := f.Human("")

	ep, _, err := endpoints.Vend(ctx, h, hostid.Human(h), "agent", nil)
	require.NoError(t, err)
	require.NoError(t, endpoints.Revoke(ctx, h, ep.ID))

	writes, err := store.ListWrites(ctx, pool, host.ObjectEndpoint, ep.ID)
	require.NoError(t, err)
	require.Len(t, writes, 2)
	for i, action := range []string{host.WriteEndpointVend, host.WriteEndpointRevoke} {
		require.Equal(t, action, writes[i].Action)
		require.Equal(t, hostid.String(h), writes[i].HumanID)
		require.Zero(t, writes[i].EndpointID)
		require.Equal(t, hostid.Human(h).String(), writes[i].Owner)
	}

	// A refused vend records nothing.
	_, _, err = endpoints.Vend(ctx, h, hostid.Human(h), "bad\x00name", nil)
	require.ErrorIs(t, err, notifytype.ErrInvalidArgument)
	require.Equal(t, 2, f.Count(`SELECT count(*) FROM switchboard.write_log`))
}

// TestTeamEndpointOutlivesNoMembership: a team endpoint acts with its
// accountable human's role in the team, checked at use: once the human
// has left the team, the endpoint's credential no longer authenticates and
// notify_owner (called with the principal it had) pages nobody.
func TestTeamEndpointOutlivesNoMembership(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := hosttest.New(t)
	f := hosttest.NewFactory(t, pool)
	dir := host.NewDirectory(pool)
	eng, err := engine.New(engine.Config{Pool: pool, Events: host.Events(), Links: host.Links(), Directory: dir})
	require.NoError(t, err)
	endpoints := host.NewEndpoints(pool, dir, host.NewTodos(pool, eng, nil), nil)

	h, team := f.Human(""), f.Team("")
	f.Member(team, h, "admin")
	scope := hostid.Team(team)
	sink := f.Sink(storetest.SinkOpts{Owner: scope})
	f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: []notifytype.EventType{engine.EventAgentNotify}})
	_, credential, err := endpoints.Vend(ctx, h, scope, "pager", []notifytype.Grant{notifytype.GrantNotifyOwner})
	require.NoError(t, err)
	events := func() int {
		return f.Count(`SELECT count(*) FROM switchboard.outbox_events`) + f.Count(`SELECT count(*) FROM switchboard.outbox`)
	}

	p, _, err := endpoints.Authenticate(ctx, credential.Reveal())
	require.NoError(t, err)
	require.NoError(t, pages.NotifyOwner(ctx, eng, p, pages.NotifyOwnerInput{Title: "while a member"}))
	paged := events()
	require.Positive(t, paged)

	_, err = pool.Exec(ctx, `DELETE FROM team_members WHERE team_id = $1 AND human_id = $2`, team, h)
	require.NoError(t, err)

	_, _, err = endpoints.Authenticate(ctx, credential.Reveal())
	require.ErrorIs(t, err, notifytype.ErrNotFound, "the credential stops working with its human's membership")
	err = pages.NotifyOwner(ctx, eng, p, pages.NotifyOwnerInput{Title: "after leaving"})
	require.ErrorIs(t, err, notifytype.ErrForbidden)
	require.Equal(t, paged, events(), "nothing is enqueued")
}
