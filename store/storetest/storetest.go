// Package storetest gives each test its own PostgreSQL database with the
// engine's tables (or, through URLOf, any template's: host/hosttest adds
// the reference host's) on the real server, cloned from a template that is migrated once per
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
	"crypto/rand"
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver pgtestdb uses
	"github.com/peterldowns/pgtestdb"

	"github.com/switchboard/notify/store"
)

// Template is how a template database is migrated: Hash identifies the
// migrations (a template is migrated once per hash), Migrate applies
// them.
type Template struct {
	Hash    string
	Migrate func(ctx context.Context, pool *pgxpool.Pool) error
}

// Engine is the template of the engine's migrations alone.
var Engine = Template{Hash: store.MigrationsHash(), Migrate: func(ctx context.Context, pool *pgxpool.Pool) error {
	return store.MigrateEngine(ctx, pool)
}}

// migrator applies a template's migrations to pgtestdb's template database.
type migrator struct{ t Template }

func (m migrator) Hash() (string, error) { return m.t.Hash, nil }

func (m migrator) Migrate(ctx context.Context, _ *sql.DB, conf pgtestdb.Config) error {
	pool, err := pgxpool.New(ctx, conf.URL())
	if err != nil {
		return err
	}
	defer pool.Close()
	return m.t.Migrate(ctx, pool)
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

// URL creates a fresh database with the engine's tables for t and returns
// its connection string, for tests that open their own pools (two engines
// on one database).
func URL(tb testing.TB) string {
	tb.Helper()
	return URLOf(tb, Engine)
}

// URLOf is URL for a database migrated by t (host/hosttest's adds the
// reference host's tables).
func URLOf(tb testing.TB, t Template) string {
	tb.Helper()
	return pgtestdb.Custom(tb, config(), migrator{t}).URL()
}

// New creates a fresh database with the engine's tables for tb and
// returns a pool on it, closed at cleanup.
func New(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	return Open(tb, URL(tb))
}

// Open returns a pool on url, closed at cleanup.
func Open(tb testing.TB, url string) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), url)
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

// engineTables are the tables of the engine's schema (store.EngineSchema).
var engineTables = map[string]bool{
	"connections": true, "sinks": true, "subscriptions": true, "outbox_events": true, "outbox": true,
	"outbox_instances": true, "delivery_records": true, "digests": true, "digest_runs": true,
	"write_log": true, "agent_pages": true, "migrations": true, "due_sinks": true,
}

// Table qualifies a table name for a statement a test builds: the
// engine's tables live in the schema switchboard, a host's in the
// current schema. A name already qualified is returned as it is.
func Table(name string) string {
	if engineTables[name] {
		return store.EngineSchema + "." + name
	}
	return name
}

// TablesQuery lists every table of the engine's schema and of the
// current schema, unqualified (no name is in both), one a row.
const TablesQuery = `SELECT table_name FROM information_schema.tables
	WHERE table_schema IN (current_schema(), 'switchboard') AND table_type = 'BASE TABLE' ORDER BY 1`

// EmptyURL creates an empty database (no migration applied) for tb and
// returns its connection string; it is dropped at cleanup when tb passed
// and kept, its name logged, when it failed. For tests of the migrations
// themselves.
func EmptyURL(tb testing.TB) string {
	tb.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, ServerURL("postgres"))
	if err != nil {
		tb.Fatalf("error reaching the test server: %v", err)
	}
	name := "sbempty_" + strings.ToLower(rand.Text()[:12])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		_ = admin.Close(ctx)
		tb.Fatalf("error creating database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		defer admin.Close(ctx)
		if tb.Failed() {
			tb.Logf("database %s kept for inspection", name)
			return
		}
		if _, err := admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("error dropping database %s: %v", name, err)
		}
	})
	return ServerURL(name)
}
