package hoststore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	pool := hosttest.New(t)
	ctx := context.Background()

	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = host.Migrate(ctx, pool) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchboard.migrations`).Scan(&n))
	require.Equal(t, len(store.EngineMigrationList()), n)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM host_migrations`).Scan(&n))
	require.Equal(t, len(hoststore.MigrationList()), n)
}

// The host's set is the product's, never an embedder's: it needs the
// engine's first, and says so.
func TestHostMigrationsNeedTheEnginesFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	empty := open(t, storetest.EmptyURL(t))
	require.ErrorContains(t, hoststore.Migrate(ctx, empty), "the engine's migrations must be applied before the host's")
}

// The host's migrations moved from store/schema/host with their names and
// bytes unchanged, and keep their history table: a database an earlier
// build migrated (host_migrations naming these files) is up to date, and
// Migrate runs nothing on it. A landed migration is never edited: add a
// file, and its name and hash here.
func TestLandedHostMigrationsAreUnchanged(t *testing.T) {
	landed := map[string]string{
		"0021_host_baseline.up.sql": "190b367a15cf6039694576b36eb207d7625219cd6e2dd4fab698d139994152ec",
	}
	got := map[string]string{}
	for _, m := range hoststore.MigrationList() {
		sum := sha256.Sum256([]byte(m.SQL))
		got[m.Name] = hex.EncodeToString(sum[:])
	}
	require.Equal(t, landed, got)
	require.Equal(t, "host_migrations", hoststore.History)
}

// A database as the build before the move left it (the engine's set, then
// the host's baseline applied and recorded in host_migrations by name) is
// accepted as it is: Migrate applies nothing and changes nothing.
func TestDatabaseMigratedBeforeTheMoveIsUpToDate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := open(t, storetest.EmptyURL(t))
	require.NoError(t, store.MigrateEngine(ctx, pool))
	for _, m := range hoststore.MigrationList() {
		_, err := pool.Exec(ctx, m.SQL)
		require.NoError(t, err)
	}
	_, err := pool.Exec(ctx, `CREATE TABLE host_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
		INSERT INTO host_migrations (name) VALUES ('0021_host_baseline.up.sql')`)
	require.NoError(t, err)
	var before string
	require.NoError(t, pool.QueryRow(ctx, `SELECT string_agg(name || applied_at::text, ',' ORDER BY name) FROM host_migrations`).Scan(&before))

	require.NoError(t, host.Migrate(ctx, pool))

	var after string
	require.NoError(t, pool.QueryRow(ctx, `SELECT string_agg(name || applied_at::text, ',' ORDER BY name) FROM host_migrations`).Scan(&after))
	require.Equal(t, before, after, "nothing was applied again")
}

func open(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}
