package store_test

import (
	"context"
	"crypto/rand"
	"slices"
	"strings"
	"testing"
	"time"

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
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at)
		SELECT $1, 'human:1', 'dead_letter', 'normal', '{"title": "t"}', now() FROM generate_series(1, 3000)`, sink)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE switchboard.outbox`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		UPDATE switchboard.outbox SET state = 'claimed', claimed_by = 'instance-a', claim_expires_at = now() + interval '1 minute',
		       claim_token = 1
		WHERE id IN (SELECT id FROM switchboard.outbox ORDER BY id LIMIT 2500)`)
	require.NoError(t, err)
	for _, n := range []int{5, 300} { // a lone row, and a group of many
		var ids []int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(id) FROM (SELECT id FROM switchboard.outbox ORDER BY id LIMIT $1) x`, n).Scan(&ids))
		rows := make([]store.Claimed, len(ids))
		for i, id := range ids {
			rows[i] = store.Claimed{ID: id, Token: 1}
		}
		for _, state := range []string{"delivered", "pending"} { // "pending" looks for repeats to absorb
			explainHeldRowStatements(t, pool, rows, state)
		}
	}

	// A claim lists the sinks other instances hold from their claimed rows
	// alone: two ranges of the index led by the instance, around its own.
	sql, args := store.ClaimDueForTest(store.ClaimParams{Instance: "instance-a", Now: time.Now(), TTL: time.Minute, Limit: 10, PerSink: 5})
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	text := explainGeneric(t, tx, sql, len(args))
	require.Contains(t, text, "Index Cond: (claimed_by < $1)", text)
	require.Contains(t, text, "Index Cond: (claimed_by > $1)", text)

	// The constraint that lets them leave state out: a claimed row names
	// its instance, and a row naming an instance is claimed.
	_, err = pool.Exec(ctx, `UPDATE switchboard.outbox SET claimed_by = NULL WHERE id = (SELECT min(id) FROM switchboard.outbox)`)
	require.ErrorContains(t, err, "outbox_claimed_by_claimed")
	_, err = pool.Exec(ctx, `UPDATE switchboard.outbox SET claimed_by = 'instance-b' WHERE state = 'pending'`)
	require.ErrorContains(t, err, "outbox_claimed_by_claimed")
}

func explainHeldRowStatements(t *testing.T, pool *pgxpool.Pool, rows []store.Claimed, state string) {
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, store.HeldRowsPlanForTest)
	require.NoError(t, err)
	for sql, args := range store.HeldRowStatementsForTest(rows, "instance-a", state) {
		text := explainGeneric(t, tx, sql, len(args))
		name := strings.Join(strings.Fields(sql), " ")[:60]
		for _, scan := range outboxScans(text) {
			require.True(t, scan.Lookup(), "%d rows, %s…: the outbox is read by %q, not looked up by id or tid:\n%s",
				len(rows), name, scan.Node, text)
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
// or by the primary key with a condition on it, or (for the open row a
// repeat opened, absorbed by a row going back to pending or held) by its
// sink and key in outbox_open_key. An index scan with only a
// filter reads the whole index (the plan a planner with stale statistics
// chose, joined in a nested loop against the list of rows: quadratic).
func (s outboxScan) Lookup() bool {
	switch {
	case strings.HasPrefix(s.Node, "Tid Scan on outbox"):
		return slices.ContainsFunc(s.Conds, func(c string) bool { return strings.HasPrefix(c, "TID Cond:") })
	case strings.Contains(s.Node, "Scan using outbox_pkey on outbox"), strings.Contains(s.Node, "Scan on outbox_pkey"),
		strings.Contains(s.Node, "Scan using outbox_open_key on outbox"), strings.Contains(s.Node, "Scan on outbox_open_key"):
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

// explainGeneric returns the generic plan of sql, one line a row: the
// plan the engine runs it on (genericPlans), which knows none of its
// arguments' values (they are NULL here, and a generic plan does not read
// them; n is how many). sql is prepared in tx, whose transaction then
// plans generically.
func explainGeneric(t *testing.T, tx pgx.Tx, sql string, n int) string {
	t.Helper()
	ctx := context.Background()
	_, err := tx.Exec(ctx, `SELECT set_config('plan_cache_mode', 'force_generic_plan', true)`)
	require.NoError(t, err)
	name := "explained_" + strings.ToLower(rand.Text()[:8])
	_, err = tx.Conn().Prepare(ctx, name, sql)
	require.NoError(t, err)
	defer func() { _ = tx.Conn().Deallocate(ctx, name) }()
	rows, err := tx.Query(ctx, `EXPLAIN EXECUTE `+name+`(`+strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ")+`)`)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
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

// A statement on held rows finds each row by the tid it has in the
// statement's snapshot, and leaves out a row another transaction changes
// meanwhile. The writers of outcomes try such rows once more: a change
// that leaves the row with this instance is kept and the outcome applied
// on top of it; a row another instance took is left alone.
func TestHeldRowStatementsFollowARowChangedMeanwhile(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()

	// Each writer, and the state it leaves a row in that stays with
	// instance-a.
	writers := map[string]struct {
		write func(id int64) error
		state string
	}{
		"FinishRows": {func(id int64) error {
			return store.FinishRows(ctx, pool, []store.Claimed{{ID: id, Token: 1}}, "instance-a", store.RowOutcome{State: "delivered"}, time.Now(), hostReplaces)
		}, "delivered"},
		"RecordFinished": {func(id int64) error {
			return store.RecordFinished(ctx, pool, []store.Finished{{Rows: []store.Claimed{{ID: id, Token: 1}}, Status: "delivered",
				Outcome: store.RowOutcome{State: "delivered"}, At: time.Now()}}, "instance-a", hostReplaces)
		}, "delivered"},
		// A stop giving back a queued row (its second statement).
		"ReleaseRows": {func(id int64) error {
			_, err := store.ReleaseRows(ctx, pool, []store.Claimed{{ID: id, Token: 1}}, "instance-a", hostReplaces)
			return err
		}, "pending"},
	}
	for writer, wr := range writers {
		write := wr.write
		for _, tc := range []struct {
			name, change string
			// want is the row's state and holder once both have committed
			// ("": the writer's own state).
			wantState, wantBy string
		}{
			{"kept", `UPDATE switchboard.outbox SET claim_expires_at = claim_expires_at + interval '1 minute' WHERE id = $1`, "", ""},
			{"taken", `UPDATE switchboard.outbox SET claimed_by = 'instance-b' WHERE id = $1`, "claimed", "instance-b"},
		} {
			t.Run(writer+"/"+tc.name, func(t *testing.T) {
				var id int64
				require.NoError(t, pool.QueryRow(ctx, `
				INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at, state, claimed_by, claim_expires_at, claim_token)
				VALUES ($1, 'human:1', 'dead_letter', 'normal', '{"title": "t"}', now(), 'claimed', 'instance-a', now() + interval '1 minute', 1)
				RETURNING id`, sink).Scan(&id))

				other, err := pool.Begin(ctx)
				require.NoError(t, err)
				defer func() { _ = other.Rollback(ctx) }()
				_, err = other.Exec(ctx, tc.change, id)
				require.NoError(t, err)

				done := make(chan error, 1)
				go func() {
					done <- write(id)
				}()
				// The statement has read the row's tid and waits for the other
				// transaction's lock on it.
				require.Eventually(t, func() bool {
					var waiting bool
					err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%u AS MATERIALIZED (%')`).Scan(&waiting)
					return err == nil && waiting
				}, 10*time.Second, 5*time.Millisecond)
				require.NoError(t, other.Commit(ctx))
				require.NoError(t, <-done)

				var state string
				var by *string
				require.NoError(t, pool.QueryRow(ctx, `SELECT state, claimed_by FROM switchboard.outbox WHERE id = $1`, id).Scan(&state, &by))
				want := tc.wantState
				if want == "" {
					want = wr.state
				}
				require.Equal(t, want, state)
				if tc.wantBy == "" {
					require.Nil(t, by)
				} else {
					require.NotNil(t, by)
					require.Equal(t, tc.wantBy, *by)
				}
			})
		}
	}
}

// newHeldRowsDB returns a database of its own with one sink, whose rows
// the tests write.
func newHeldRowsDB(t *testing.T) (*pgxpool.Pool, int64) {
	pool := storetest.New(t)
	f := storetest.NewFactory(t, pool)
	// instance-a, which these tests hold rows as, beats: its starts pass
	// the dispatch fence, and what they test is the rest of each statement.
	require.NoError(t, store.Beat(context.Background(), pool, "instance-a", time.Now(), time.Hour, time.Minute))
	return pool, f.Sink(storetest.SinkOpts{Owner: notifytype.Human("1")})
}
