package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store/storetest"
)

func (b *emitBundle) emitToSink(t *testing.T, sink int64, ev engine.Event) bool {
	t.Helper()
	var ok bool
	require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) (err error) {
		ok, err = b.eng.EmitToSink(context.Background(), tx, sink, ev)
		return err
	}))
	return ok
}

func ruleNotify(owner notifytype.OwnerScope, rule int64, subject string) engine.Event {
	return engine.Event{
		Type: host.EventRuleNotify, Owner: owner, WebhookID: 7, Subject: host.RuleSubject(rule, subject, 99),
		Content: sinks.Content{Title: "The build is red", Place: "forge"},
	}
}

func TestEmitToSinkReachesOnlyTheNamedSinkOfItsScope(t *testing.T) {
	t.Parallel()
	b := setupEmit(t)
	alice, bob := hostid.Human(b.f.Human("")), hostid.Human(b.f.Human(""))
	phone := b.f.Sink(storetest.SinkOpts{Owner: alice})
	// A sink of the same scope subscribed to rule.notify is not the one named.
	other := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: other, EventTypes: []notifytype.EventType{host.EventRuleNotify}})
	off := b.f.Sink(storetest.SinkOpts{Owner: alice, Disabled: true})
	bobs := b.f.Sink(storetest.SinkOpts{Owner: bob})

	require.True(t, b.emitToSink(t, phone, ruleNotify(alice, 3, "acme/forge#12")))
	require.True(t, b.emitToSink(t, phone, ruleNotify(alice, 3, "acme/forge#12")), "a repeat counts on the open row")
	require.False(t, b.emitToSink(t, off, ruleNotify(alice, 3, "acme/forge#12")), "a disabled sink takes nothing")
	require.False(t, b.emitToSink(t, bobs, ruleNotify(alice, 3, "acme/forge#12")), "another scope's sink takes nothing")

	rows := b.rows(t)
	require.Len(t, rows, 1)
	require.Equal(t, phone, rows[0].SinkID)
	require.Equal(t, "rule:3:acme/forge#12", *rows[0].DedupKey)
	require.Equal(t, 2, rows[0].Count, `the message says "and 1 more"`)
	require.Equal(t, b.now, rows[0].DueAt.UTC(), "due at once")

	require.True(t, b.emitToSink(t, phone, ruleNotify(alice, 3, "")), "no subject: keyed by the event id")
	require.Equal(t, "rule:3:event:99", *b.rows(t)[1].DedupKey)
}

func TestEmitToSinkRollsBackWithItsTransaction(t *testing.T) {
	t.Parallel()
	b := setupEmit(t)
	alice := hostid.Human(b.f.Human(""))
	phone := b.f.Sink(storetest.SinkOpts{Owner: alice})
	boom := errors.New("the routed insert failed")
	err := pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		ok, err := b.eng.EmitToSink(context.Background(), tx, phone, ruleNotify(alice, 1, "s"))
		require.NoError(t, err)
		require.True(t, ok)
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Empty(t, b.rows(t), "a rolled-back state change leaves no outbox row")

	_, err = b.eng.EmitToSink(context.Background(), nil, 0, ruleNotify(alice, 1, "s"))
	require.Error(t, err)
}
