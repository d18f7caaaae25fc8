package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// A claim takes a run of each sink's due rows, sink by sink in the order
// their first rows fell due, rather than one row of each of many sinks:
// spread over 1,000 sinks, a backlog taken in due order gave each actor's
// step 1.4 rows (docs/BENCHMARKS.md, session 15). Three sinks' rows fall
// due in turn (a, b, c, a, b, c, ...); a claim of 7 rows with 4 a sink
// takes a's four rows, then b's first three, and none of c's, though c's
// first row fell due before a's last three.
func TestAClaimTakesARunOfEachSinksDueRows(t *testing.T) {
	t.Parallel()
	pool := storetest.New(t)
	f := storetest.NewFactory(t, pool)
	ctx := context.Background()
	owner := notifytype.Human("1")
	sinks := []int64{f.Sink(storetest.SinkOpts{Owner: owner}), f.Sink(storetest.SinkOpts{Owner: owner}), f.Sink(storetest.SinkOpts{Owner: owner})}
	now := time.Now()
	rowsOf := map[int64][]int64{} // each sink's rows, in the order they fall due
	for i := range 12 {
		sink := sinks[i%3]
		id := openRow(t, pool, sink, "", 1, "todo.dead_lettered", false)
		_, err := pool.Exec(ctx, `UPDATE switchboard.outbox SET due_at = $2 WHERE id = $1`, id, now.Add(time.Duration(i-12)*time.Second))
		require.NoError(t, err)
		rowsOf[sink] = append(rowsOf[sink], id)
	}
	rows, err := store.ClaimDue(ctx, pool, store.ClaimParams{Instance: "instance-a", Now: now, TTL: time.Minute, Limit: 7, PerSink: 4})
	require.NoError(t, err)
	var got []int64
	for _, r := range rows {
		got = append(got, r.ID)
	}
	a, b := rowsOf[sinks[0]], rowsOf[sinks[1]]
	// The claim returns its rows in the order they fell due.
	want := []int64{a[0], b[0], a[1], b[1], a[2], b[2], a[3]}
	require.Equal(t, want, got, "the first sink's four rows and the second's first three, in due order")
}
