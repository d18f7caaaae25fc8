package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store"
)

// emitKeyed writes one event of key for sink, as Emit would (the sink
// set decided at commit).
func emitKeyed(t *testing.T, pool *pgxpool.Pool, sink int64, eventType, key string, windowed bool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		INSERT INTO switchboard.outbox_events (owner, event_type, match_types, severity, severity_rank, queue_id, endpoint_id,
		                                       webhook_id, dedup_key, windowed, payload, due_at, sink_ids)
		VALUES ('human:1', $2, ARRAY[$2], 'high', 2, 0, 0, 0, $3, $4, '{"title": "nightly build"}', now() - interval '1 second', ARRAY[$1::bigint])`,
		sink, eventType, key, windowed)
	require.NoError(t, err)
	_, err = store.FanOut(context.Background(), pool, 100, time.Now(), hostReplaces)
	require.NoError(t, err)
}

func claimAll(t *testing.T, pool *pgxpool.Pool) []store.OutboxRow {
	t.Helper()
	rows, err := store.ClaimDue(context.Background(), pool, store.ClaimParams{
		Instance: "instance-a", Now: time.Now(), TTL: time.Minute, Limit: 100, PerSink: 100})
	require.NoError(t, err)
	return rows
}

func deliver(t *testing.T, pool *pgxpool.Pool, rows []store.OutboxRow) {
	t.Helper()
	require.NoError(t, store.RecordFinished(context.Background(), pool, []store.Finished{{Rows: store.Claims(rows), Status: "delivered",
		Outcome: store.RowOutcome{State: "delivered"}, At: time.Now()}}, "instance-a", hostReplaces))
}

// A dead letter's key names one occurrence: a repeat of it that arrives
// while its row's attempt is succeeding, or after the row was delivered,
// is not sent again ("Dead letter in forge: nightly build ×2" on e6a7fa7,
// where the repeat opened a row of its own beside the claimed one, and
// that row went out once the first was delivered). The statements run in
// the racing order: claim, repeat, delivered, repeat, claim.
func TestARepeatedOccurrenceKeyIsNotSentAgain(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	const key = "todo:42:1"
	emitKeyed(t, pool, sink, "todo.dead_lettered", key, false)
	first := claimAll(t, pool)
	require.Len(t, first, 1)

	emitKeyed(t, pool, sink, "todo.dead_lettered", key, false) // while its attempt is on the way
	deliver(t, pool, first)
	emitKeyed(t, pool, sink, "todo.dead_lettered", key, false) // after it was delivered

	require.Empty(t, claimAll(t, pool), "the dead letter went out once")
	var rows int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM switchboard.outbox WHERE dedup_key = $1`, key).Scan(&rows))
	require.Equal(t, 1, rows)
}

// What the occurrence rule leaves alone: a windowed key (a quarantine's
// webhook) is a new message once its row went out, and a relay exhaustion
// arriving while its todo's dead letter is being sent still opens a row,
// which replaces the dead letter if that attempt fails (absorbRepeats).
func TestWindowedKeysAndRelayExhaustionStillOpenRows(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	emitKeyed(t, pool, sink, "delivery.quarantined", "webhook:9", true)
	deliver(t, pool, claimAll(t, pool))
	emitKeyed(t, pool, sink, "delivery.quarantined", "webhook:9", true)
	require.Len(t, claimAll(t, pool), 1, "a new quarantine window is a new message")

	emitKeyed(t, pool, sink, "todo.dead_lettered", "todo:7:1", false)
	dead := claimAll(t, pool)
	require.Len(t, dead, 1)
	emitKeyed(t, pool, sink, "relay.exhausted", "todo:7:1", false)
	require.NoError(t, store.FinishRows(context.Background(), pool, store.Claims(dead), "instance-a",
		store.RowOutcome{State: "pending", Class: "server", DueAt: time.Now().Add(-time.Second)}, time.Now(), hostReplaces))
	again := claimAll(t, pool)
	require.Len(t, again, 1)
	require.Equal(t, dead[0].ID, again[0].ID)
	require.Equal(t, "relay.exhausted", again[0].EventType)
}

// hostReplaces is what the reference host declares (host.Events): a relay
// exhaustion replaces the dead letter of its todo.
var hostReplaces = store.Replacements{By: []string{"relay.exhausted"}, Of: []string{"todo.dead_lettered"}}
