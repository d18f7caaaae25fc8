package host_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

func TestScenarioDeadLetterIsAnnouncedNotAssigned(t *testing.T) {
	// Scenario: A dead letter is announced, not assigned
	t.Parallel()

	// One world per run, the same steps in each at the same fake instants;
	// only one has a sink.
	start := newFakeClock().Now()
	run := func(t *testing.T, withSink bool) (w *todoWorld, todoID int64) {
		w, ctx := newTodoWorldOn(t, hosttest.New(t), clockwork.NewFakeClockAt(start)), context.Background()
		p := w.person(t, "forge")
		if withSink {
			w.subscribedSink(p.scope, storetest.SubscriptionOpts{}, host.EventTodoDeadLettered)
		}
		todo := w.enqueue(t, ctx, p.queue, host.TodoInput{AttemptCap: 2, OriginDisplay: "org/repo#1"})
		w.failToDeath(t, ctx, p.endpoint, p.queue)
		return w, todo.ID
	}
	with, id := run(t, true)
	without, id2 := run(t, false)
	require.Equal(t, id, id2)
	require.Len(t, with.outbox(t), 1, "the subscribed sink is notified")
	require.Empty(t, without.outbox(t))

	a := row(t, with.pool, `SELECT * FROM todos WHERE id = $1`, id)
	b := row(t, without.pool, `SELECT * FROM todos WHERE id = $1`, id)
	require.Len(t, a, len(b))
	for col, v := range b {
		require.Equal(t, v, a[col], "todos.%s", col)
	}
	require.Equal(t, "dead", a["state"])
	require.Nil(t, a["claimed_by"])

	const attempts = `SELECT * FROM attempts WHERE todo_id = $1 ORDER BY number`
	require.Equal(t, allRows(t, without.pool, attempts, id), allRows(t, with.pool, attempts, id))
}

func TestScenarioFilteredSubscription(t *testing.T) {
	// Scenario: Filtered subscription
	t.Parallel()
	w, ctx := newTodoWorld(t)
	p := w.person(t, "forge")
	inbox := w.f.Queue(p.scope, "inbox")
	sink := w.subscribedSink(p.scope, storetest.SubscriptionOpts{Queues: []int64{p.queue}}, host.EventTodoDeadLettered)
	onForge := w.enqueue(t, ctx, p.queue, host.TodoInput{AttemptCap: 1})
	w.enqueue(t, ctx, inbox, host.TodoInput{AttemptCap: 1})

	w.failToDeath(t, ctx, p.endpoint, p.queue)
	w.failToDeath(t, ctx, p.endpoint, inbox)

	require.Len(t, w.rec.Events(), 2, "both dead letters are emitted")
	require.Equal(t, []outboxRow{{
		SinkID: sink, Owner: p.scope.String(), EventType: string(host.EventTodoDeadLettered),
		DedupKey: fmt.Sprintf("todo:%d:1", onForge.ID),
	}}, w.outbox(t))
}

func TestScenarioFriendshipFanOut(t *testing.T) {
	// Scenario: Friendship fan-out
	t.Parallel()
	w, ctx := newTodoWorld(t)
	a, b := w.person(t, ""), w.person(t, "")
	aWebhook := w.f.Webhook(a.scope, "a-forge")
	w.subscribedSink(a.scope, storetest.SubscriptionOpts{}, host.EventTodoDeadLettered)
	w.subscribedSink(a.scope, storetest.SubscriptionOpts{Webhooks: []int64{aWebhook}}, host.EventTodoDeadLettered)
	bSink := w.subscribedSink(b.scope, storetest.SubscriptionOpts{}, host.EventTodoDeadLettered)

	// A's webhook routed a delivery to B's queue; B's endpoint works it.
	todo := w.enqueue(t, ctx, b.queue, host.TodoInput{AttemptCap: 1, WebhookID: aWebhook})
	require.Equal(t, b.scope, todo.Owner)
	w.failToDeath(t, ctx, b.endpoint, b.queue)

	require.Equal(t, []outboxRow{{
		SinkID: bSink, Owner: b.scope.String(), EventType: string(host.EventTodoDeadLettered),
		DedupKey: fmt.Sprintf("todo:%d:1", todo.ID),
	}}, w.outbox(t))
}

func TestScenarioTeamTodo(t *testing.T) {
	// Scenario: Team todo
	t.Parallel()
	w, ctx := newTodoWorld(t)
	m := w.person(t, "")
	teamID := w.f.Team("")
	team := hostid.Team(teamID)
	w.f.Member(teamID, m.human, "member")
	teamQueue := w.f.Queue(team, "team-forge")
	teamSink := w.subscribedSink(team, storetest.SubscriptionOpts{}, host.EventTodoDeadLettered)
	w.subscribedSink(m.scope, storetest.SubscriptionOpts{}, host.EventTodoDeadLettered)
	w.subscribedSink(m.scope, storetest.SubscriptionOpts{Endpoints: []int64{m.endpoint}}, host.EventTodoDeadLettered)

	todo := w.enqueue(t, ctx, teamQueue, host.TodoInput{AttemptCap: 1})
	claimed := w.claim(t, ctx, m.endpoint, teamQueue)
	require.Equal(t, m.endpoint, claimed.ClaimedBy)
	dead, err := w.todos.Fail(ctx, m.endpoint, todo.ID, host.AttemptReport{Summary: "no luck"})
	require.NoError(t, err)
	require.Equal(t, host.TodoDead, dead.State)
	require.Equal(t, team, dead.Owner)

	require.Equal(t, []outboxRow{{
		SinkID: teamSink, Owner: team.String(), EventType: string(host.EventTodoDeadLettered),
		DedupKey: fmt.Sprintf("todo:%d:1", todo.ID),
	}}, w.outbox(t))
}

// failAfterEmit lets the real Emit write its event in the transaction,
// notes how many events the transaction then sees, and fails.
type failAfterEmit struct {
	inner    host.Emitter
	rowsInTx int
}

var errAfterEmit = errors.New("boom after emit")

func (e *failAfterEmit) Emit(ctx context.Context, tx pgx.Tx, ev engine.Event) error {
	if err := e.inner.Emit(ctx, tx, ev); err != nil {
		return err
	}
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM switchboard.outbox_events`).Scan(&e.rowsInTx); err != nil {
		return err
	}
	return errAfterEmit
}

func TestScenarioRolledBackDeadLetter(t *testing.T) {
	// Scenario: Rolled-back dead letter
	t.Parallel()
	w, ctx := newTodoWorld(t)
	p := w.person(t, "")
	w.subscribedSink(p.scope, storetest.SubscriptionOpts{}, host.EventTodoDeadLettered)
	todo := w.enqueue(t, ctx, p.queue, host.TodoInput{AttemptCap: 1})
	w.claim(t, ctx, p.endpoint, p.queue)
	const todoSQL, attemptsSQL = `SELECT * FROM todos WHERE id = $1`, `SELECT * FROM attempts WHERE todo_id = $1`
	before, beforeAttempts := row(t, w.pool, todoSQL, todo.ID), allRows(t, w.pool, attemptsSQL, todo.ID)

	failing := &failAfterEmit{inner: w.engine}
	_, err := host.NewTodos(w.pool, failing, w.clock).Fail(ctx, p.endpoint, todo.ID, host.AttemptReport{Summary: "x"})
	require.ErrorIs(t, err, errAfterEmit)
	require.Equal(t, 1, failing.rowsInTx, "the event was written in the transaction")

	require.Empty(t, w.outbox(t), "and rolled back with it")
	require.Equal(t, before, row(t, w.pool, todoSQL, todo.ID))
	require.Equal(t, beforeAttempts, allRows(t, w.pool, attemptsSQL, todo.ID))

	// The same dead letter, committed, is announced once.
	_, err = w.todos.Fail(ctx, p.endpoint, todo.ID, host.AttemptReport{Summary: "x"})
	require.NoError(t, err)
	require.Len(t, w.outbox(t), 1)
}

func TestScenarioRelayExhaustionIsOneMessage(t *testing.T) {
	// Scenario: Relay exhaustion is one message
	t.Parallel()
	w, ctx := newTodoWorld(t)
	p := w.person(t, "")
	sink := w.f.Sink(storetest.SinkOpts{Owner: p.scope})
	w.f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: []notifytype.EventType{
		host.EventTodoDeadLettered, host.EventRelayExhausted}})
	w.f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: []notifytype.EventType{
		host.EventTodoDeadLettered}})
	todo := w.enqueue(t, ctx, p.queue, host.TodoInput{AttemptCap: 2})

	// A relay attempt, then the agent's own: the history has a relay.
	w.claim(t, ctx, p.endpoint, p.queue, host.ClaimOpts{Relay: true})
	_, err := w.todos.Fail(ctx, p.endpoint, todo.ID, host.AttemptReport{Summary: "relay timed out"})
	require.NoError(t, err)
	dead := w.failToDeath(t, ctx, p.endpoint, p.queue)
	require.Equal(t, host.TodoDead, dead.State)

	evs := w.rec.Events()
	require.Len(t, evs, 1)
	require.Equal(t, host.EventRelayExhausted, evs[0].Type)
	require.Equal(t, "Relay exhausted after 2 attempts", evs[0].Content.Summary)
	require.Equal(t, []outboxRow{{
		SinkID: sink, Owner: p.scope.String(), EventType: string(host.EventRelayExhausted),
		DedupKey: fmt.Sprintf("todo:%d:1", todo.ID),
	}}, w.outbox(t))
}
