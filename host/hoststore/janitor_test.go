package hoststore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/host/hosttest"
)

// The janitor's delete of old webhook deliveries finds its batch through
// the index on their age, not by scanning the table.
func TestPruneExpiredUsesTheAgeIndex(t *testing.T) {
	t.Parallel()
	pool := hosttest.New(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET enable_seqscan = off`)
	require.NoError(t, err)
	_, sel, _ := strings.Cut(hoststore.WebhookDeliveriesExpiryForTest, "IN (")
	rows, err := conn.Query(ctx, "EXPLAIN "+strings.TrimSuffix(sel, ")"), time.Now(), 1000)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	text := strings.Join(lines, "\n")
	require.Regexp(t, `(using|on) webhook_deliveries_age\b`, text)
	require.Contains(t, text, "Index Cond: (received_at < ")
	require.NotContains(t, text, "Seq Scan")
}

// PruneExpired deletes in batches until no delivery older than the
// cut-off is left, and keeps the newer ones.
func TestPruneExpiredDeletesInBatches(t *testing.T) {
	t.Parallel()
	pool := hosttest.New(t)
	ctx := context.Background()
	f := hosttest.NewFactory(t, pool)
	h := f.Human("")
	wh := f.Webhook(hostid.Human(h), "")
	now := time.Now().UTC()
	old, fresh := now.Add(-31*24*time.Hour), now.Add(-29*24*time.Hour)
	f.Exec(`INSERT INTO webhook_deliveries (webhook_id, owner, received_at, outcome, payload, trace)
		SELECT $1, owner, CASE WHEN g <= 7 THEN $2::timestamptz ELSE $3::timestamptz END, 'routed', '{}', '[]'
		FROM webhooks, generate_series(1, 10) g WHERE id = $1`, wh, old, fresh)

	x, err := hoststore.PruneExpired(ctx, pool, now.Add(-30*24*time.Hour), 3)
	require.NoError(t, err)
	require.Equal(t, hoststore.Expired{WebhookDeliveries: 7}, x, "7 old rows in batches of 3, 3 and 1")
	require.Equal(t, 3, f.Count(`SELECT count(*) FROM webhook_deliveries`))
}
