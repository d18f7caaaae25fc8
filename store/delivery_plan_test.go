package store_test

import (
	"context"
	"slices"
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
		for _, scan := range outboxScans(text) {
			require.True(t, scan.Lookup(), "%d rows, %s…: the outbox is read by %q, not looked up by id or tid:\n%s",
				len(ids), name, scan.Node, text)
		}
	}
}

// outboxScan is one node of a plan that reads the outbox, with the
// conditions that bound what it reads.
type outboxScan struct {
	Node  string
	Conds []string
}

// Lookup reports a scan that reads only the rows it is asked for: by tid,
// or by the primary key with a condition on it. An index scan with only a
// filter reads the whole index (the plan a planner with stale statistics
// chose, joined in a nested loop against the list of rows: quadratic).
func (s outboxScan) Lookup() bool {
	switch {
	case strings.HasPrefix(s.Node, "Tid Scan on outbox"):
		return slices.ContainsFunc(s.Conds, func(c string) bool { return strings.HasPrefix(c, "TID Cond:") })
	case strings.Contains(s.Node, "Scan using outbox_pkey on outbox"), strings.Contains(s.Node, "Scan on outbox_pkey"):
		return slices.ContainsFunc(s.Conds, func(c string) bool { return strings.HasPrefix(c, "Index Cond:") })
	}
	return false
}

// outboxScans lists the nodes of an EXPLAIN text that scan the outbox.
func outboxScans(plan string) []outboxScan {
	lines := strings.Split(plan, "\n")
	var out []outboxScan
	for i, l := range lines {
		node := strings.TrimLeft(strings.TrimSpace(l), "-> ")
		if !strings.Contains(node, "Scan") || !(strings.Contains(node, " on outbox ") || strings.Contains(node, " on outbox_pkey")) {
			continue
		}
		s := outboxScan{Node: node}
		depth := len(l) - len(strings.TrimLeft(l, " "))
		for _, c := range lines[i+1:] {
			if len(c)-len(strings.TrimLeft(c, " ")) <= depth || strings.Contains(c, "->") {
				break
			}
			s.Conds = append(s.Conds, strings.TrimSpace(c))
		}
		out = append(out, s)
	}
	return out
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
