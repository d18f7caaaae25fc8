package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// Emit reads the database's clock through the host's own transaction: with
// every connection of the pool held by host transactions, an emit still
// goes through instead of waiting for a connection that never comes.
func TestEmitReadsTheDatabaseClockInTheHostTransaction(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(storetest.URL(t))
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	f := storetest.NewFactory(t, pool)
	human := f.Human("")
	sink := f.Sink(storetest.SinkOpts{Owner: notifytype.Human(human)})
	f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: []notifytype.EventType{notifytype.EventTodoDeadLettered}})

	eng, err := engine.New(engine.Config{Pool: pool, Directory: emitDirectory{}}) // production: the database's clock
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var before, due time.Time
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&before); err != nil {
			return err
		}
		return eng.Emit(ctx, tx, deadLetterOf(notifytype.Human(human), 1))
	}))
	require.NoError(t, pool.QueryRow(ctx, `SELECT due_at FROM switchboard.outbox_events`).Scan(&due))
	require.WithinDuration(t, before, due, time.Second, "due at the database's now")
}
