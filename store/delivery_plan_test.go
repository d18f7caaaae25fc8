package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// The statements that change the rows an instance holds find them through
// the primary key, even when the planner's statistics (taken before the
// claims, as after a storm's fan-out) say that almost no row is claimed:
// the plan must not read every row the instance holds to find the few it
// names.
func TestHeldRowStatementsFindTheirRowsByID(t *testing.T) {
	t.Parallel()
	pool := storetest.New(t)
	ctx := context.Background()
	f := storetest.NewFactory(t, pool)
	sink := f.Sink(storetest.SinkOpts{Owner: notifytype.Human(1)})
	_, err := pool.Exec(ctx, `
		INSERT INTO outbox (sink_id, owner, event_type, severity, payload, due_at)
		SELECT $1, 'human:1', 'dead_letter', 'normal', '{"title": "t"}', now() FROM generate_series(1, 3000)`, sink)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE outbox`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		UPDATE outbox SET state = 'claimed', claimed_by = 'instance-a', claim_expires_at = now() + interval '1 minute'
		WHERE id IN (SELECT id FROM outbox ORDER BY id LIMIT 2500)`)
	require.NoError(t, err)
	for _, n := range []int{5, 300} { // a lone row, and a group of many
		var ids []int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(id) FROM (SELECT id FROM outbox ORDER BY id LIMIT $1) x`, n).Scan(&ids))
		explainHeldRowStatements(t, pool, ids)
	}

	// The constraint that lets them leave state out: a claimed row names
	// its instance, and a row naming an instance is claimed.
	_, err = pool.Exec(ctx, `UPDATE outbox SET claimed_by = NULL WHERE id = (SELECT min(id) FROM outbox)`)
	require.ErrorContains(t, err, "outbox_claimed_by_claimed")
	_, err = pool.Exec(ctx, `UPDATE outbox SET claimed_by = 'instance-b' WHERE state = 'pending'`)
	require.ErrorContains(t, err, "outbox_claimed_by_claimed")
}

func explainHeldRowStatements(t *testing.T, pool *pgxpool.Pool, ids []int64) {
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, store.HeldRowsPlanForTest)
	require.NoError(t, err)
	for sql, args := range store.HeldRowStatementsForTest(ids, "instance-a") {
		text := explain(t, tx, sql, args...)
		name := strings.Join(strings.Fields(sql), " ")[:60]
		require.Contains(t, text, "outbox_pkey", "%d rows, %s…: %s", len(ids), name, text)
		require.NotContains(t, text, "outbox_claimed_sink", "%d rows, %s…: %s", len(ids), name, text)
		require.NotContains(t, text, "Seq Scan on outbox", "%d rows, %s…: %s", len(ids), name, text)
	}
}

// explain returns the plan of sql with args, one line a row.
func explain(t *testing.T, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, args ...any) string {
	t.Helper()
	rows, err := db.Query(context.Background(), `EXPLAIN `+sql, args...)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}
