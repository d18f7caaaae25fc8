package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/clocks"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// Emit reads the database's clock through the host's own transaction: with
// every connection of the pool held by host transactions, an emit still
// goes through instead of waiting for a connection that never comes.
func TestEmitReadsTheDatabaseClockInTheHostTransaction(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(hosttest.URL(t))
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	f := hosttest.NewFactory(t, pool)
	human := f.Human("")
	sink := f.Sink(storetest.SinkOpts{Owner: hostid.Human(human)})
	f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}})

	eng, err := engine.New(engine.Config{Pool: pool, Events: host.Events(), Links: host.Links(), Directory: emitDirectory{}}) // production: the database's clock
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var before, due time.Time
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&before); err != nil {
			return err
		}
		return eng.Emit(ctx, tx, deadLetterOf(hostid.Human(human), 1))
	}))
	require.NoError(t, pool.QueryRow(ctx, `SELECT due_at FROM switchboard.outbox_events`).Scan(&due))
	require.WithinDuration(t, before, due, time.Second, "due at the database's now")
}

// With every connection of the pool held, a caller whose reading waits for
// a connection holds up nobody: every other caller with a deadline gets
// its ctx's error when its deadline passes, and once a connection frees,
// every caller waiting gets the database's time (issue 18, item 5).
func TestDatabaseClockFullPoolBlocksNoCaller(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(hosttest.URL(t))
	require.NoError(t, err)
	cfg.MaxConns = 2
	signal := enginetest.NewAcquireSignal(16)
	cfg.ConnConfig.Tracer = signal
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // frees what the old code left blocked

	held := []*pgxpool.Conn{}
	for range 2 {
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		held = append(held, c)
	}
	var releaseOnce sync.Once
	release := func() {
		releaseOnce.Do(func() {
			for _, c := range held {
				c.Release()
			}
		})
	}
	t.Cleanup(release) // before pool.Close, which waits for them
	drain := func() {
		for {
			select {
			case <-signal.Started:
			default:
				return
			}
		}
	}
	drain()
	clock := clocks.NewDatabase(pool, nil)

	type result struct {
		at  time.Time
		err error
	}
	// The first caller has no deadline: it waits for a connection.
	first := make(chan result, 1)
	go func() {
		at, err := clock.Now(ctx)
		first <- result{at, err}
	}()
	select {
	case <-signal.Started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first caller never asked the pool for a connection")
	}

	// Callers with a deadline meanwhile: each returns its ctx's error.
	const bounded = 4
	timedOut := make(chan result, bounded)
	for range bounded {
		go func() {
			bctx, bcancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer bcancel()
			at, err := clock.Now(bctx)
			timedOut <- result{at, err}
		}()
	}
	bound := time.After(10 * time.Second)
	for range bounded {
		select {
		case r := <-timedOut:
			require.ErrorIs(t, r.err, context.DeadlineExceeded)
		case <-bound:
			t.Fatal("a caller with a deadline is still waiting 10 s on: the clock holds it behind the one waiting for a connection")
		}
	}

	// More callers without a deadline, then the pool frees: all get the
	// database's time.
	const waiting = 3
	later := make(chan result, waiting)
	for range waiting {
		go func() {
			at, err := clock.Now(ctx)
			later <- result{at, err}
		}()
	}
	release()
	var dbNow time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&dbNow))
	bound = time.After(10 * time.Second)
	for i := range waiting + 1 {
		var r result
		select {
		case r = <-first:
		case r = <-later:
		case <-bound:
			t.Fatalf("%d callers still waiting 10 s after the pool freed", waiting+1-i)
		}
		require.NoError(t, r.err)
		require.WithinDuration(t, dbNow, r.at, 5*time.Second, "the database's time")
	}
}
