package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store"
)

// The engine's statements that run for every claim and every group of
// attempts run on generic plans (genericPlans): the claim and what its
// batch reads after it, the fan-out, and the statements of a transaction
// on held rows (a reservation, its starts, the outcomes). Each way sets it
// for the rest of its transaction, which then reads it back.
func TestTheEnginesStatementsRunOnGenericPlans(t *testing.T) {
	t.Parallel()
	pool, _ := newHeldRowsDB(t)
	ctx := context.Background()
	p := store.ClaimParams{Instance: "instance-a", Now: time.Now(), TTL: time.Minute, Limit: 10, PerSink: 5}
	ways := map[string]func(tx pgx.Tx) error{
		"claim": func(tx pgx.Tx) error {
			_, err := store.ClaimDue(ctx, tx, p)
			return err
		},
		"claim cycle": func(tx pgx.Tx) error {
			_, _, _, err := store.FanOutClaimAndWake(ctx, tx, 100, p, 10)
			return err
		},
		"fan-out": func(tx pgx.Tx) error {
			_, err := store.FanOut(ctx, tx, 100, time.Now(), store.Replacements{})
			return err
		},
		"held rows": func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, store.HeldRowsPlanForTest)
			return err
		},
	}
	for name, way := range ways {
		t.Run(name, func(t *testing.T) {
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			var mode string
			require.NoError(t, tx.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&mode))
			require.Equal(t, "auto", mode)
			require.NoError(t, way(tx))
			require.NoError(t, tx.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&mode))
			require.Equal(t, "force_generic_plan", mode)
		})
	}
}
