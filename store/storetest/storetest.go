// Package storetest gives each test its own migrated PostgreSQL database on
// the real server, cloned from a template that is migrated once per
// migration set (github.com/peterldowns/pgtestdb), and dropped when the test
// passes (a failed test's database is kept and its URL logged, to inspect).
//
// The server is found from SWITCHBOARD_TEST_PGHOST (default 127.0.0.1),
// SWITCHBOARD_TEST_PGPORT (5432) and SWITCHBOARD_TEST_PGUSER (postgres).
// When it cannot be reached the test fails: it never skips.
package storetest

import (
	"cmp"
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver pgtestdb uses
	"github.com/peterldowns/pgtestdb"

	"github.com/switchboard/notify/store"
)

// migrator applies the embedded migrations to pgtestdb's template database.
type migrator struct{}

func (migrator) Hash() (string, error) { return store.MigrationsHash(), nil }

func (migrator) Migrate(ctx context.Context, _ *sql.DB, conf pgtestdb.Config) error {
	pool, err := pgxpool.New(ctx, conf.URL())
	if err != nil {
		return err
	}
	defer pool.Close()
	return store.Migrate(ctx, pool)
}

func config() pgtestdb.Config {
	return pgtestdb.Config{
		DriverName: "pgx",
		Host:       cmp.Or(os.Getenv("SWITCHBOARD_TEST_PGHOST"), "127.0.0.1"),
		Port:       cmp.Or(os.Getenv("SWITCHBOARD_TEST_PGPORT"), "5432"),
		User:       cmp.Or(os.Getenv("SWITCHBOARD_TEST_PGUSER"), "postgres"),
		Password:   "unused-with-trust-auth",
		Database:   "postgres",
		Options:    "sslmode=disable",
		// Engines under test may still hold connections when cleanup runs.
		ForceTerminateConnections: true,
	}
}

// URL creates a fresh migrated database for t and returns its connection
// string, for tests that open their own pools (two engines on one database).
func URL(tb testing.TB) string {
	tb.Helper()
	return pgtestdb.Custom(tb, config(), migrator{}).URL()
}

// New creates a fresh migrated database for tb and returns a pool on it,
// closed at cleanup.
func New(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), URL(tb))
	if err != nil {
		tb.Fatalf("error opening test database: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// ServerURL is the connection string of database db on the test server.
func ServerURL(db string) string {
	c := config()
	c.Database = db
	c.User = cmp.Or(os.Getenv("SWITCHBOARD_TEST_PGUSER"), "postgres")
	return c.URL()
}
