package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store"
)

// emitEventsFrom writes n keyless events for sink, the first with event id
// first, all due at the same instant (equal due times: only the order of
// their rows' ids orders them), each carrying its event id in its payload.
func emitEventsFrom(t *testing.T, pool *pgxpool.Pool, sink int64, first int64, n int, due time.Time) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, fmt.Sprintf(`ALTER TABLE switchboard.outbox_events ALTER COLUMN id RESTART WITH %d`, first))
	require.NoError(t, err)
	for i := range n {
		_, err := pool.Exec(ctx, `
			INSERT INTO switchboard.outbox_events (owner, event_type, match_types, severity, severity_rank, queue_id, endpoint_id,
			                                       webhook_id, windowed, payload, due_at, sink_ids)
			VALUES ('human:1', 'agent.notify', '{agent.notify}', 'normal', 1, 0, 0, 0, false,
			        jsonb_build_object('title', $2::bigint), $3, ARRAY[$1::bigint])`, sink, first+int64(i), due)
		require.NoError(t, err)
	}
}

// claimedTitles claims every due row and returns their titles (the event
// ids emitEventsFrom put there) in the order the claim returned them.
func claimedTitles(t *testing.T, pool *pgxpool.Pool, now time.Time) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := store.ClaimDue(ctx, pool, store.ClaimParams{Instance: "instance-a", Now: now, TTL: time.Minute, Limit: 100, PerSink: 100})
	require.NoError(t, err)
	var titles []string
	for _, r := range rows {
		var title string
		require.NoError(t, pool.QueryRow(ctx, `SELECT payload->>'title' FROM switchboard.outbox WHERE id = $1`, r.ID).Scan(&title))
		titles = append(titles, title)
	}
	return titles
}

// Within one instance a sink's rows go out in the order their events were
// emitted, at every digit boundary of the event ids: the fan-out writes a
// sink's rows in numeric event order (on e6a7fa7 it wrote them in the
// text order of 'event:<id>', so event 10 came before 9 and 100 before
// 99), and the claim returns them in the order they fell due, equal due
// times in row order.
func TestFanOutAndClaimKeepEventOrderAtEveryDigitBoundary(t *testing.T) {
	t.Parallel()
	for _, first := range []int64{8, 98, 998} {
		t.Run(fmt.Sprint(first), func(t *testing.T) {
			t.Parallel()
			pool, sink := newHeldRowsDB(t)
			ctx := context.Background()
			due := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
			emitEventsFrom(t, pool, sink, first, 4, due) // e.g. 8, 9, 10, 11
			fr, err := store.FanOut(ctx, pool, 100, time.Now(), hostReplaces)
			require.NoError(t, err)
			require.Equal(t, 4, fr.Events)
			var want []string
			for i := range int64(4) {
				want = append(want, fmt.Sprint(first+i))
			}
			require.Equal(t, want, claimedTitles(t, pool, time.Now()), "the claim hands the rows over in event order")
		})
	}
}

// The claim returns the rows it took in the order they fell due, not in
// the order the UPDATE met them: rows written in the order of due times
// [4 3 2 1] come back as [1 2 3 4] (on e6a7fa7, as [4 3 2 1]).
func TestClaimReturnsRowsInDueOrder(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	for _, k := range []int{4, 3, 2, 1} {
		_, err := pool.Exec(ctx, `
			INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at)
			VALUES ($1, 'human:1', 'agent.notify', 'normal', jsonb_build_object('title', $2::int), $3)`,
			sink, k, base.Add(time.Duration(k)*time.Second))
		require.NoError(t, err)
	}
	require.Equal(t, []string{"1", "2", "3", "4"}, claimedTitles(t, pool, time.Now()))
}
