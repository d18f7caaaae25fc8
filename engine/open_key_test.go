package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store/storetest"
)

// A repeat of a key whose row is open (pending or held) joins that row,
// in a later fan-out as in the same one: a sink never has two open rows
// of one key (outbox_open_key), and the row counts every windowed repeat
// while an occurrence key is one event however often it comes.
func TestARepeatFannedOutLaterJoinsTheOpenRowOfItsKey(t *testing.T) {
	t.Parallel()
	b := setupEmit(t)
	alice := hostid.Human(b.f.Human(""))
	hook := b.f.Webhook(alice, "github")
	sink := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: []notifytype.EventType{host.EventDeliveryQuarantined}, Webhooks: []int64{hook}})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}})

	for i := range 3 { // each in a fan-out of its own (rows fans out)
		b.emit(t, engine.Event{Type: host.EventDeliveryQuarantined, Owner: alice, WebhookID: hook, Subject: host.QuarantineSubject(hook), Content: sinks.Content{Place: "github"}})
		b.emit(t, deadLetter(alice, 0, 5, 1))
		rows := b.rows(t)
		require.Len(t, rows, 2, "one open row per key after %d repeats", i+1)
		for _, r := range rows {
			if r.EventType == string(host.EventDeliveryQuarantined) {
				require.Equal(t, i+1, r.Count, "the windowed key counts every repeat")
			} else {
				require.Equal(t, 1, r.Count, "an occurrence key is one event")
			}
		}
	}
}
