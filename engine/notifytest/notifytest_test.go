package notifytest_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/notifytest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// setup is an engine (not started) with one Gotify stand-in sink of the
// sole owner subscribed to dead letters.
func setup(t *testing.T) (*pgxpool.Pool, *engine.Engine, *notifytest.Gotify) {
	t.Helper()
	ctx := context.Background()
	pool := hosttest.New(t)
	g := notifytest.NewGotify(t)
	cfg := engine.Config{Pool: pool, Events: host.Events(), Links: host.Links(), SecretKey: key(), BaseURL: "https://jobs.example.net"}
	g.Allow(&cfg)
	eng, err := engine.New(cfg)
	require.NoError(t, err)
	owner := engine.HumanPrincipal(engine.SoleOwner.ID)
	conn, err := eng.CreateConnection(ctx, owner, engine.ConnectionInput{Owner: engine.SoleOwner,
		Kind: engine.KindGotify, Name: "phone", BaseURL: g.URL, Secret: notifytype.NewSecret(g.Token)})
	require.NoError(t, err)
	sink, err := eng.CreateSink(ctx, owner, engine.SinkInput{Owner: engine.SoleOwner, Name: "phone",
		Kind: engine.KindGotify, ConnectionID: conn.ID})
	require.NoError(t, err)
	_, err = eng.AddSubscription(ctx, owner, sink.ID, engine.SubscriptionInput{
		EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}})
	require.NoError(t, err)
	return pool, eng, g
}

func key() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

func deadLetter(id int64) engine.Event {
	return engine.Event{Type: host.EventTodoDeadLettered, Owner: engine.SoleOwner, OccurrenceKey: host.DeadLetterKey(id, 1),
		Content: sinks.Content{Title: fmt.Sprintf("job %d", id), Place: "billing", LinkPath: fmt.Sprintf("/jobs/%d", id)}}
}

// An emit is seen inside the transaction that made it, and a rolled-back
// transaction leaves nothing, with no engine started.
func TestAnEmitInARolledBackTransactionLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, eng, _ := setup(t)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	require.NoError(t, eng.Emit(ctx, tx, deadLetter(7)))
	e := notifytest.RequireEmittedTx(ctx, t, tx, host.EventTodoDeadLettered, &notifytest.EmittedOpts{Owner: engine.SoleOwner.String()})
	require.Len(t, e.SinkIDs, 1, "the event carries the sink its subscription matched")
	require.NoError(t, tx.Rollback(ctx))

	notifytest.RequireNotEmittedTx(ctx, t, pool, host.EventTodoDeadLettered, nil)
}

// failing records a kit assertion's failure instead of failing the test.
type failing struct {
	testing.TB
	msg string
}

var errFailed = errors.New("failed")

func (f *failing) Helper() {}
func (f *failing) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(errFailed)
}

func fails(tb testing.TB, check func(testing.TB)) (msg string) {
	f := &failing{TB: tb}
	defer func() {
		if r := recover(); r != nil && r != errFailed { //nolint:errorlint // our own sentinel, by identity
			panic(r)
		}
		msg = f.msg
	}()
	check(f)
	return ""
}

// The assertions fail, saying what was emitted instead, when the event is
// not there (or is there when it should not be).
func TestTheAssertionsFailWithWhatWasEmitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, eng, _ := setup(t)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return eng.Emit(ctx, tx, deadLetter(3)) }))

	msg := fails(t, func(tb testing.TB) {
		notifytest.RequireEmittedTx(ctx, tb, pool, host.EventTodoDeadLettered, &notifytest.EmittedOpts{Owner: "team:9"})
	})
	require.Contains(t, msg, "no todo.dead_lettered event was emitted with owner team:9")
	require.Contains(t, msg, "owner "+engine.SoleOwner.String())

	msg = fails(t, func(tb testing.TB) {
		notifytest.RequireNotEmittedTx(ctx, tb, pool, host.EventTodoDeadLettered, nil)
	})
	require.True(t, strings.HasPrefix(msg, "notifytest: a todo.dead_lettered event was emitted"), msg)

	require.Empty(t, fails(t, func(tb testing.TB) {
		notifytest.RequireNotEmittedTx(ctx, tb, pool, host.EventRelayExhausted, nil)
	}), "another type was not emitted")
}

// Deliver sends what is due through the started engine and returns once
// its outcome is recorded: the stand-in has the message when it returns.
func TestDeliverReturnsOnceTheOutcomeIsRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, eng, g := setup(t)
	require.NoError(t, eng.Start(ctx))
	t.Cleanup(func() { _ = eng.Stop(context.Background()) })
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return eng.Emit(ctx, tx, deadLetter(12)) }))

	got, err := notifytest.Deliver(ctx, eng, pool)
	require.NoError(t, err)
	for _, state := range got {
		require.Equal(t, "delivered", state, "every row it saw is recorded")
	}
	var states []string
	rows, err := pool.Query(ctx, `SELECT state FROM switchboard.outbox`)
	require.NoError(t, err)
	states, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"delivered"}, states, "when Deliver returns, the row is recorded delivered")
	msgs := g.Messages()
	require.Len(t, msgs, 1)
	require.Contains(t, msgs[0].Title, "job 12")

	again, err := notifytest.Deliver(ctx, eng, pool)
	require.NoError(t, err)
	require.Empty(t, again, "nothing is left due")
}
