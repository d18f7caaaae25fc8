package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	pool := storetest.New(t)
	ctx := context.Background()

	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = store.Migrate(ctx, pool) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n))
	require.Equal(t, len(store.Migrations()), n)
}
