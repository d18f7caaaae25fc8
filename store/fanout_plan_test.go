package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store"
)

// The fan-out looks up each new row's occurrence key among the finished
// and claimed rows by index, whatever the planner believes of the outbox:
// here a plan made while the outbox was empty (the connection's cached
// generic plan, as a storm finds it) is used once the outbox holds
// thousands of finished rows. Read from the plan the server ran
// (auto_explain, sent to this connection as a notice).
func TestTheFanOutLooksUpOccurrenceKeysByIndex(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `ANALYZE switchboard.outbox`)
	require.NoError(t, err)

	var plans []string
	cfg := pool.Config().ConnConfig.Copy()
	cfg.User, cfg.Password = "postgres", "" // LOAD 'auto_explain' is a superuser's
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "outbox_events") {
			plans = append(plans, n.Message)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, set := range []string{`LOAD 'auto_explain'`, `SET auto_explain.log_min_duration = 0`,
		`SET auto_explain.log_level = 'notice'`, `SET plan_cache_mode = force_generic_plan`} {
		_, err := conn.Exec(ctx, set)
		require.NoError(t, err, set)
	}
	emit := func(keys int, from int) { emitDeadLetters(t, pool, sink, from, keys) }

	emit(1, 0) // the outbox is empty: the plan is made and kept
	_, err = store.FanOut(ctx, conn, 500, time.Now(), hostReplaces)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at, dedup_key, state, finished_at)
		SELECT $1, 'human:1', 'todo.dead_lettered', 'high', '{}', now(), 'todo:' || k || ':1', 'delivered', now()
		FROM generate_series(1000, 4999) AS k`, sink)
	require.NoError(t, err)
	emit(200, 900)
	plans = nil
	r, err := store.FanOut(ctx, conn, 500, time.Now(), hostReplaces)
	require.NoError(t, err)
	require.Equal(t, 200, r.Events)
	require.Equal(t, 100, r.Rows, "the keys already delivered write nothing")
	require.Len(t, plans, 1, "the fan-out's plan")
	var lookups []string
	for _, line := range strings.Split(plans[0], "\n") {
		if strings.Contains(line, " on outbox x") {
			lookups = append(lookups, strings.TrimSpace(line))
		}
	}
	require.NotEmpty(t, lookups, plans[0])
	for _, l := range lookups {
		require.NotContains(t, l, "Seq Scan", "the occurrence keys are read by a scan of the whole outbox: %s", l)
	}
}

// The fan-out rules out sequential scans for itself only: the statements
// after it in its transaction (the claim, in the claimer's batch) are
// planned with the value the session had before, whether that is the
// server's default or one the session set itself.
func TestTheFanOutPutsTheScanSettingBackForTheStatementsAfterIt(t *testing.T) {
	t.Parallel()
	pool, _ := newHeldRowsDB(t)
	ctx := context.Background()
	for _, session := range []string{"on", "off"} {
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `SELECT set_config('enable_seqscan', $1, false)`, session)
		require.NoError(t, err)
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = store.FanOut(ctx, tx, 500, time.Now(), hostReplaces)
		require.NoError(t, err)
		var inside string
		require.NoError(t, tx.QueryRow(ctx, `SHOW enable_seqscan`).Scan(&inside))
		require.NoError(t, tx.Commit(ctx))
		var after string
		require.NoError(t, conn.QueryRow(ctx, `SHOW enable_seqscan`).Scan(&after))
		_, err = conn.Exec(ctx, `RESET enable_seqscan`)
		conn.Release()
		require.NoError(t, err)
		require.Equal(t, session, inside, "after the fan-out, in its transaction")
		require.Equal(t, session, after, "after the fan-out's transaction")
	}
}

// emitDeadLetters commits n dead-letter events for sink, of keys
// todo:<from>:1 to todo:<from+n-1>:1, due a second ago, as Emit writes
// them: waiting for a fan-out.
func emitDeadLetters(t *testing.T, pool *pgxpool.Pool, sink int64, from, n int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		INSERT INTO switchboard.outbox_events (owner, event_type, match_types, severity, severity_rank, queue_id, endpoint_id,
		                                       webhook_id, dedup_key, windowed, payload, due_at, sink_ids)
		SELECT 'human:1', 'todo.dead_lettered', ARRAY['todo.dead_lettered'], 'high', 2, 0, 0, 0, 'todo:' || k || ':1', false,
		       '{"title": "nightly build"}', now() - interval '1 second', ARRAY[$1::bigint]
		FROM generate_series($2::int, $2::int + $3::int - 1) AS k`, sink, from, n)
	require.NoError(t, err)
}
