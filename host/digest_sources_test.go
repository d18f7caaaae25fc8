package host_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/host/hosttest"
)

// TestDigestSectionQueriesUseIndexes fills a database as a busy owner's
// would be (50 queues, 20,000 todos, most done, others' todos beside them)
// and checks that each section query reads through its partial index, not
// a scan of every todo (REQ-13's performance; docs/BENCHMARKS.md has the
// timings).
func TestDigestSectionQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	pool := hosttest.New(t)
	f := hosttest.NewFactory(t, pool)
	ctx := context.Background()
	owner := hostid.Human(f.Human(""))
	other := hostid.Human(f.Human(""))
	var queues []int64
	for range 50 {
		queues = append(queues, f.Queue(owner, ""))
		f.Queue(other, "")
	}
	_, err := pool.Exec(ctx, `
		INSERT INTO todos (queue_id, owner, title, state, lease_expires_at, updated_at, created_at)
		SELECT q.id, q.owner, 'todo ' || g,
		       (ARRAY['done','done','done','done','done','done','pending','claimed','dead','done'])[g % 10 + 1],
		       CASE WHEN g % 10 = 7 THEN now() + interval '5 minutes' END,
		       now() - (g % 1000) * interval '1 minute', now() - (g % 1000) * interval '1 minute'
		FROM generate_series(1, 20000) g
		JOIN LATERAL (SELECT id, owner FROM queues ORDER BY id OFFSET ((g / 10) % 100) LIMIT 1) q ON true`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE todos`)
	require.NoError(t, err)

	since := time.Now().Add(-24 * time.Hour)
	for name, q := range map[string]struct {
		sql   string
		args  []any
		index string // a partial index on the todos of one state
	}{
		"pending":      {hoststore.PendingSQL, []any{owner.String(), queues}, "todos_(digest_pending|claimable)"},
		"claimed":      {hoststore.ClaimedSQL, []any{owner.String(), queues}, "todos_(digest_claimed|lease)"},
		"dead letters": {hoststore.DeadLettersSQL, []any{owner.String(), queues, since, 5}, "todos_digest_dead"},
	} {
		rows, err := pool.Query(ctx, "EXPLAIN "+q.sql, q.args...)
		require.NoError(t, err)
		var plan []string
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			plan = append(plan, line)
		}
		require.NoError(t, rows.Err())
		text := strings.Join(plan, "\n")
		t.Logf("%s:\n%s", name, text)
		require.Regexp(t, `(Bitmap Index|Index|Index Only) Scan (Backward )?(using|on) `+q.index, text, name)
		require.NotContains(t, text, "Seq Scan on todos", name)
	}

	// And the figures are the owner's alone.
	pending, err := hoststore.PendingByQueue(ctx, pool, owner, queues)
	require.NoError(t, err)
	total := 0
	for _, p := range pending {
		total += p.Count
	}
	require.Equal(t, 1000, total, "half the 2,000 pending todos are the other owner's")
}
