package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/pages"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

// TestEveryWriteRecordsItsAuthor drives every write of the management
// service, as an endpoint where an endpoint may write and as a human
// otherwise, and checks each left a write-log record naming the acting
// endpoint and its accountable human (REQ-5), deletions and send tests
// included, which leave no row of their own to carry an author.
func TestEveryWriteRecordsItsAuthor(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, human := b.human()
	owner := hostid.Human(h)
	epID := b.f.Endpoint(hosttest.EndpointOpts{Owner: owner, Human: h, Grants: []string{"notifications", "notify_owner"}})
	ep := engine.EndpointPrincipal(epID, hostid.String(h), owner, notifytype.GrantNotifications, notifytype.GrantNotifyOwner)

	writes := func(kind string, id int64) []store.Write {
		t.Helper()
		ws, err := store.ListWrites(b.ctx, b.pool, kind, id)
		require.NoError(t, err)
		return ws
	}
	requireAuthor := func(kind string, id int64, action string, p engine.Principal) {
		t.Helper()
		for _, w := range writes(kind, id) {
			if w.Action == action {
				require.Equal(t, p.HumanID, w.HumanID, action)
				require.Equal(t, p.EndpointID, w.EndpointID, action)
				require.Equal(t, owner.String(), w.Owner, action)
				return
			}
		}
		t.Fatalf("no %s recorded for %s %d: %+v", action, kind, id, writes(kind, id))
	}

	// A loopback base URL: the send test is refused by the guard at dial
	// time, after its write is recorded.
	conn, err := b.eng.CreateConnection(b.ctx, human, engine.ConnectionInput{
		Owner: owner, Kind: engine.KindGotify, Name: "gotify", BaseURL: "https://127.0.0.1:1",
		Secret: notifytype.NewSecret("gtfya.token"),
	})
	require.NoError(t, err)
	requireAuthor("connection", conn.ID, "connection.create", human)
	// An edit (issue 25): a human's write; an endpoint may not.
	newName := "home gotify"
	_, err = b.eng.UpdateConnection(b.ctx, human, conn.ID, engine.ConnectionPatch{Name: &newName})
	require.NoError(t, err)
	requireAuthor("connection", conn.ID, "connection.update", human)
	_, err = b.eng.UpdateConnection(b.ctx, ep, conn.ID, engine.ConnectionPatch{Name: &newName})
	require.ErrorIs(t, err, notifytype.ErrForbidden)
	_, stranger := b.human()
	otherName := "mine now"
	_, err = b.eng.UpdateConnection(b.ctx, stranger, conn.ID, engine.ConnectionPatch{Name: &otherName})
	require.Error(t, err, "another human's connection is not theirs to change")
	conns, err := b.eng.ListConnections(b.ctx, human, owner)
	require.NoError(t, err)
	require.Equal(t, newName, conns[0].Name)

	sink, err := b.eng.CreateSink(b.ctx, ep, engine.SinkInput{Owner: owner, Name: "phone", Kind: engine.KindGotify, ConnectionID: conn.ID})
	require.NoError(t, err)
	requireAuthor("sink", sink.ID, "sink.create", ep)

	_, err = b.eng.SetSinkEnabled(b.ctx, ep, sink.ID, false)
	require.NoError(t, err)
	requireAuthor("sink", sink.ID, "sink.update", ep)

	subs, err := b.eng.SetSubscriptions(b.ctx, ep, sink.ID, []engine.SubscriptionInput{
		{EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}},
	})
	require.NoError(t, err)
	requireAuthor("sink", sink.ID, "subscriptions.replace", ep)
	requireAuthor("subscription", subs[0].ID, "subscription.create", ep)

	// Replacing them again records the replacement, though the deleted
	// subscriptions are gone.
	_, err = b.eng.SetSubscriptions(b.ctx, ep, sink.ID, []engine.SubscriptionInput{
		{EventTypes: []notifytype.EventType{engine.EventAgentNotify}},
	})
	require.NoError(t, err)
	replaced := 0
	for _, w := range writes("sink", sink.ID) {
		if w.Action == "subscriptions.replace" {
			replaced++
		}
	}
	require.Equal(t, 2, replaced)

	sub, err := b.eng.AddSubscription(b.ctx, ep, sink.ID, engine.SubscriptionInput{EventTypes: []notifytype.EventType{engine.EventDigest}})
	require.NoError(t, err)
	require.NoError(t, b.eng.DeleteSubscription(b.ctx, ep, sink.ID, sub.ID))
	requireAuthor("subscription", sub.ID, "subscription.delete", ep)

	_, err = b.eng.SendTestMessage(b.ctx, ep, sink.ID)
	require.NoError(t, err)
	requireAuthor("sink", sink.ID, "sink.test", ep)

	require.NoError(t, pages.NotifyOwner(b.ctx, b.eng, ep, pages.NotifyOwnerInput{Title: "device QA needed"}))
	requireAuthor("endpoint", epID, "agent.notify", ep)

	require.NoError(t, b.eng.DeleteSink(b.ctx, ep, sink.ID))
	requireAuthor("sink", sink.ID, "sink.delete", ep)

	require.NoError(t, b.eng.DeleteConnection(b.ctx, human, conn.ID))
	requireAuthor("connection", conn.ID, "connection.delete", human)

	// A refused write records nothing.
	before := b.count(t, "write_log")
	_, err = b.eng.CreateSink(b.ctx, ep, engine.SinkInput{Owner: owner, Name: "bad\x00", Kind: engine.KindGotify, ConnectionID: conn.ID})
	require.Error(t, err)
	require.Equal(t, before, b.count(t, "write_log"))
}
