package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
)

func TestSubscriptions(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, p := b.human()
	owner := hostid.Human(h)
	conn := b.gotifyConnection(t, p, owner)
	s := b.gotifySink(t, p, owner, conn, "phone")
	other := b.gotifySink(t, p, owner, conn, "other")
	forge, inbox := b.f.Queue(owner, "forge"), b.f.Queue(owner, "inbox")
	endpoint := b.f.Endpoint(hosttest.EndpointOpts{Owner: owner, Human: h})
	webhook := b.f.Webhook(owner, "")

	subs, err := b.eng.SetSubscriptions(b.ctx, p, s.ID, []engine.SubscriptionInput{
		{
			EventTypes: []notifytype.EventType{host.EventTodoDeadLettered, host.EventRelayExhausted, host.EventTodoDeadLettered},
			Queues:     []int64{inbox, forge, inbox}, Endpoints: []int64{endpoint},
			MinSeverity: notifytype.SeverityHigh, IncludeExcerpt: true,
		},
		{EventTypes: []notifytype.EventType{host.EventDeliveryQuarantined}, Webhooks: []int64{webhook}},
	})
	require.NoError(t, err)
	require.Len(t, subs, 2)
	first := subs[0]
	require.Equal(t, []notifytype.EventType{host.EventTodoDeadLettered, host.EventRelayExhausted}, first.EventTypes)
	require.Equal(t, []int64{min(forge, inbox), max(forge, inbox)}, first.Queues)
	require.Equal(t, []int64{endpoint}, first.Endpoints)
	require.Empty(t, first.Webhooks)
	require.Equal(t, notifytype.SeverityHigh, first.MinSeverity)
	require.True(t, first.IncludeExcerpt)
	require.Equal(t, owner, first.Owner)
	require.Equal(t, hostid.String(h), first.CreatedByHumanID)
	require.Zero(t, first.CreatedByEndpointID)
	second := subs[1]
	require.Equal(t, notifytype.SeverityLow, second.MinSeverity, "min_severity defaults to low")
	require.False(t, second.IncludeExcerpt, "include_excerpt defaults to false")

	added, err := b.eng.AddSubscription(b.ctx, p, s.ID, engine.SubscriptionInput{EventTypes: []notifytype.EventType{engine.EventDigest}})
	require.NoError(t, err)
	list, err := b.eng.ListSubscriptions(b.ctx, p, s.ID)
	require.NoError(t, err)
	require.Equal(t, append(subs, added), list)

	// A subscription is deleted through its own sink only.
	requireRefusal(t, b.eng.DeleteSubscription(b.ctx, p, other.ID, added.ID), notifytype.CodeNotFound, "")
	require.NoError(t, b.eng.DeleteSubscription(b.ctx, p, s.ID, added.ID))
	requireRefusal(t, b.eng.DeleteSubscription(b.ctx, p, s.ID, added.ID), notifytype.CodeNotFound, "")

	// Set replaces the whole set; an empty set clears it.
	subs, err = b.eng.SetSubscriptions(b.ctx, p, s.ID, []engine.SubscriptionInput{{EventTypes: []notifytype.EventType{engine.EventAgentNotify}}})
	require.NoError(t, err)
	require.Len(t, subs, 1)
	require.Equal(t, 1, b.count(t, "subscriptions"))
	subs, err = b.eng.SetSubscriptions(b.ctx, p, s.ID, nil)
	require.NoError(t, err)
	require.Empty(t, subs)
	require.Zero(t, b.count(t, "subscriptions"))
}

func TestSubscriptionBadInput(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, p := b.human()
	owner := hostid.Human(h)
	s := b.gotifySink(t, p, owner, b.gotifyConnection(t, p, owner), "phone")
	queue := b.f.Queue(owner, "forge")

	// Objects of another human, and of a team the human belongs to, are
	// not the sink's.
	o := b.f.Human("")
	theirs := hostid.Human(o)
	team := b.f.Team("")
	b.f.Member(team, h, "owner")
	foreignQueue := b.f.Queue(theirs, "forge")
	teamQueue := b.f.Queue(hostid.Team(team), "forge")
	foreignEndpoint := b.f.Endpoint(hosttest.EndpointOpts{Owner: theirs, Human: o})
	foreignWebhook := b.f.Webhook(theirs, "")

	_, err := b.eng.SetSubscriptions(b.ctx, p, s.ID, []engine.SubscriptionInput{{EventTypes: []notifytype.EventType{engine.EventDigest}}})
	require.NoError(t, err)
	dead := []notifytype.EventType{host.EventTodoDeadLettered}

	for _, tc := range []struct {
		name  string
		in    engine.SubscriptionInput
		field string
	}{
		{"no event type", engine.SubscriptionInput{}, "event_types"},
		{"unknown event type", engine.SubscriptionInput{EventTypes: []notifytype.EventType{"todo.done"}}, "event_types"},
		{"one unknown among known", engine.SubscriptionInput{EventTypes: append(dead, "")}, "event_types"},
		{"another owner's queue", engine.SubscriptionInput{EventTypes: dead, Queues: []int64{queue, foreignQueue}}, "queues"},
		{"a team's queue", engine.SubscriptionInput{EventTypes: dead, Queues: []int64{teamQueue}}, "queues"},
		{"a queue that does not exist", engine.SubscriptionInput{EventTypes: dead, Queues: []int64{1 << 40}}, "queues"},
		{"a negative queue id", engine.SubscriptionInput{EventTypes: dead, Queues: []int64{-1}}, "queues"},
		{"another owner's endpoint", engine.SubscriptionInput{EventTypes: dead, Endpoints: []int64{foreignEndpoint}}, "endpoints"},
		{"another owner's webhook", engine.SubscriptionInput{EventTypes: dead, Webhooks: []int64{foreignWebhook}}, "webhooks"},
		{"a queue id given as webhook", engine.SubscriptionInput{EventTypes: dead, Webhooks: []int64{queue + 1000}}, "webhooks"},
		{"unknown severity", engine.SubscriptionInput{EventTypes: dead, MinSeverity: "urgent"}, "min_severity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.eng.AddSubscription(b.ctx, p, s.ID, tc.in)
			requireRefusal(t, err, notifytype.CodeInvalidArgument, tc.field)
			// Set is all or nothing: a bad input among good ones stores
			// nothing and keeps the set it would have replaced.
			_, err = b.eng.SetSubscriptions(b.ctx, p, s.ID, []engine.SubscriptionInput{{EventTypes: dead}, tc.in})
			requireRefusal(t, err, notifytype.CodeInvalidArgument, tc.field)
			require.Equal(t, 1, b.f.Count(`SELECT count(*) FROM switchboard.subscriptions WHERE event_types = '{digest}'`))
			require.Equal(t, 1, b.count(t, "subscriptions"))
		})
	}

	// The refusal of another scope's id reads as the refusal of no id.
	_, errForeign := b.eng.AddSubscription(b.ctx, p, s.ID, engine.SubscriptionInput{EventTypes: dead, Queues: []int64{foreignQueue}})
	_, errMissing := b.eng.AddSubscription(b.ctx, p, s.ID, engine.SubscriptionInput{EventTypes: dead, Queues: []int64{1 << 40}})
	require.Equal(t, errMissing.Error(), errForeign.Error())

	_, err = b.eng.AddSubscription(b.ctx, p, s.ID+1000, engine.SubscriptionInput{EventTypes: dead})
	requireRefusal(t, err, notifytype.CodeNotFound, "")
	_, err = b.eng.ListSubscriptions(b.ctx, p, s.ID+1000)
	requireRefusal(t, err, notifytype.CodeNotFound, "")
}
