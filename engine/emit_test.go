package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store/storetest"
)

// emitDirectory answers nothing: Emit never asks the directory.
type emitDirectory struct{}

func (emitDirectory) TeamRole(context.Context, string, string) (engine.Role, error) {
	return engine.RoleNone, nil
}

func (emitDirectory) Owned(context.Context, notifytype.OwnerScope, engine.Resource, []int64) ([]int64, error) {
	return nil, nil
}

func (emitDirectory) KnownActor(context.Context, string, int64) (bool, error) { return true, nil }

type emitBundle struct {
	pool *pgxpool.Pool
	f    *hosttest.Factory
	eng  *engine.Engine
	now  time.Time
}

func setupEmit(t *testing.T) *emitBundle {
	t.Helper()
	pool := hosttest.New(t)
	now := time.Now().UTC().Truncate(time.Second)
	eng, err := engine.New(testhooks.WithDatabaseClock(engine.Config{Pool: pool, Events: host.Events(), Links: host.Links(), Directory: emitDirectory{}, Clock: clockwork.NewFakeClockAt(now)}, clockwork.NewFakeClockAt(now)))
	require.NoError(t, err)
	return &emitBundle{pool: pool, f: hosttest.NewFactory(t, pool), eng: eng, now: now}
}

func (b *emitBundle) emit(t *testing.T, ev engine.Event) {
	t.Helper()
	require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		return b.eng.Emit(context.Background(), tx, ev)
	}))
}

type outboxRow struct {
	SinkID    int64
	EventType string
	Severity  string
	DedupKey  *string
	Payload   sinks.Content
	Excerpt   bool
	DueAt     time.Time
	Count     int
}

func (b *emitBundle) rows(t *testing.T) []outboxRow {
	t.Helper()
	_, err := testhooks.FanOut(context.Background(), b.eng)
	require.NoError(t, err)
	rows, err := b.pool.Query(context.Background(), `
		SELECT sink_id, event_type, severity, dedup_key, payload, include_excerpt, due_at, count
		FROM switchboard.outbox o ORDER BY id`)
	require.NoError(t, err)
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		var payload []byte
		require.NoError(t, rows.Scan(&r.SinkID, &r.EventType, &r.Severity, &r.DedupKey, &payload, &r.Excerpt, &r.DueAt, &r.Count))
		require.NoError(t, json.Unmarshal(payload, &r.Payload))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

func deadLetter(owner notifytype.OwnerScope, queue, todo int64, n int) engine.Event {
	return engine.Event{
		Type: host.EventTodoDeadLettered, Owner: owner, QueueID: queue, OccurrenceKey: host.DeadLetterKey(todo, n),
		Content: sinks.Content{Title: "flaky build", Place: "forge", Body: "the issue body"},
	}
}

func TestEmitOneRowPerMatchingSink(t *testing.T) {
	t.Parallel()
	b := setupEmit(t)
	alice := hostid.Human(b.f.Human("alice"))
	q := b.f.Queue(alice, "forge")
	sink := b.f.Sink(storetest.SinkOpts{Owner: alice})
	// Two subscriptions of one sink match: still one row.
	b.f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered, engine.EventDigest}, Queues: []int64{q}})
	other := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: other, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}})

	b.emit(t, deadLetter(alice, q, 7, 1))

	rows := b.rows(t)
	require.Len(t, rows, 2)
	require.ElementsMatch(t, []int64{sink, other}, []int64{rows[0].SinkID, rows[1].SinkID})
	for _, r := range rows {
		require.Equal(t, "todo.dead_lettered", r.EventType)
		require.Equal(t, "high", r.Severity, "dead letters default to high")
		require.Equal(t, "todo:7:1", *r.DedupKey)
		require.True(t, r.DueAt.Equal(b.now), "due at once")
		require.Equal(t, "flaky build", r.Payload.Title)
	}
}

func TestEmitWritesNothingWithoutAMatch(t *testing.T) {
	t.Parallel()
	b := setupEmit(t)
	alice := hostid.Human(b.f.Human(""))
	q := b.f.Queue(alice, "")
	otherQ := b.f.Queue(alice, "")
	wrongType := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: wrongType, EventTypes: []notifytype.EventType{engine.EventDigest}})
	wrongQueue := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: wrongQueue, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}, Queues: []int64{otherQ}})
	disabled := b.f.Sink(storetest.SinkOpts{Owner: alice, Disabled: true})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: disabled, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}})
	tooLow := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: tooLow, EventTypes: []notifytype.EventType{engine.EventAgentNotify}, MinSeverity: notifytype.SeverityHigh})

	b.emit(t, deadLetter(alice, q, 1, 1))
	b.emit(t, engine.Event{Type: engine.EventAgentNotify, Owner: alice, Content: sinks.Content{Title: "look"}})
	// An event of a scope with no sinks at all.
	b.emit(t, deadLetter(notifytype.Team("99"), 0, 2, 1))

	require.Empty(t, b.rows(t))
}

func TestEmitReachesOnlyTheEventsScope(t *testing.T) {
	t.Parallel()
	b := setupEmit(t)
	alice := hostid.Human(b.f.Human(""))
	bob := hostid.Human(b.f.Human(""))
	aliceSink := b.f.Sink(storetest.SinkOpts{Owner: alice})
	bobSink := b.f.Sink(storetest.SinkOpts{Owner: bob})
	for _, s := range []int64{aliceSink, bobSink} {
		b.f.Subscription(storetest.SubscriptionOpts{Sink: s, EventTypes: host.EventTypes})
	}
	b.emit(t, deadLetter(bob, 0, 3, 1))
	rows := b.rows(t)
	require.Len(t, rows, 1)
	require.Equal(t, bobSink, rows[0].SinkID)
}

func TestEmitExcerptOnlyForOptedInSubscriptions(t *testing.T) {
	t.Parallel()
	b := setupEmit(t)
	alice := hostid.Human(b.f.Human(""))
	plain := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: plain, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}})
	optedIn := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: optedIn, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}, IncludeExcerpt: true})

	b.emit(t, deadLetter(alice, 0, 4, 1))
	for _, r := range b.rows(t) {
		if r.SinkID == plain {
			require.False(t, r.Excerpt)
			require.Empty(t, r.Payload.Body, "the body is not stored where nobody opted in")
		} else {
			require.True(t, r.Excerpt)
			require.Equal(t, "the issue body", r.Payload.Body)
		}
	}
}

func TestEmitRelayExhaustionReplacesTheDeadLetter(t *testing.T) {
	t.Parallel()
	b := setupEmit(t)
	alice := hostid.Human(b.f.Human(""))
	both := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: both, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered, host.EventRelayExhausted}})
	deadOnly := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: deadOnly, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}})

	b.emit(t, deadLetter(alice, 0, 5, 1))
	relay := deadLetter(alice, 0, 5, 1)
	relay.Type = host.EventRelayExhausted
	b.emit(t, relay)
	// The same dead letter emitted again adds nothing.
	b.emit(t, deadLetter(alice, 0, 5, 1))

	rows := b.rows(t)
	require.Len(t, rows, 2, "one row per sink")
	for _, r := range rows {
		require.Equal(t, "relay.exhausted", r.EventType)
		require.Equal(t, 1, r.Count)
	}

	// A re-queued todo that dead-letters again is a new dead letter.
	b.emit(t, deadLetter(alice, 0, 5, 2))
	require.Len(t, b.rows(t), 4)
}

func TestEmitQuarantineStormIsOneRowWithACount(t *testing.T) {
	t.Parallel()
	b := setupEmit(t)
	alice := hostid.Human(b.f.Human(""))
	hook := b.f.Webhook(alice, "github")
	sink := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: []notifytype.EventType{host.EventDeliveryQuarantined}, Webhooks: []int64{hook}})

	for range 20 {
		b.emit(t, engine.Event{Type: host.EventDeliveryQuarantined, Owner: alice, WebhookID: hook, Subject: host.QuarantineSubject(hook), Content: sinks.Content{Place: "github"}})
	}
	rows := b.rows(t)
	require.Len(t, rows, 1)
	require.Equal(t, 20, rows[0].Count)
	require.Equal(t, "normal", rows[0].Severity)
	require.True(t, rows[0].DueAt.Equal(b.now.Add(10*time.Minute)), "due when the window closes")
}

func TestEmitRefusesAnIncompleteEvent(t *testing.T) {
	t.Parallel()
	b := setupEmit(t)
	alice := notifytype.Human("1")
	for name, tc := range map[string]struct {
		ev    engine.Event
		field string
	}{
		"unknown type":         {engine.Event{Type: "todo.exploded", Owner: alice}, "type"},
		"no owner":             {engine.Event{Type: engine.EventDigest}, "owner"},
		"bad severity":         {engine.Event{Type: engine.EventDigest, Owner: alice, Severity: "urgent"}, "severity"},
		"dead letter, no todo": {engine.Event{Type: host.EventTodoDeadLettered, Owner: alice}, "occurrence_key"},
		"quarantine, no hook":  {engine.Event{Type: host.EventDeliveryQuarantined, Owner: alice}, "subject"},
		"rule, no rule":        {engine.Event{Type: host.EventRuleNotify, Owner: alice}, "subject"},
	} {
		t.Run(name, func(t *testing.T) {
			err := pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
				return b.eng.Emit(context.Background(), tx, tc.ev)
			})
			require.ErrorIs(t, err, notifytype.ErrInvalidArgument)
			e, _ := notifytype.AsError(err)
			require.Equal(t, tc.field, e.Field)
		})
	}
}

func TestEmitRolledBackLeavesNoRow(t *testing.T) {
	t.Parallel()
	b := setupEmit(t)
	alice := hostid.Human(b.f.Human(""))
	sink := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: host.EventTypes})
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, b.eng.Emit(ctx, tx, deadLetter(alice, 0, 9, 1)))
	require.NoError(t, tx.Rollback(ctx))
	require.Empty(t, b.rows(t))
}
