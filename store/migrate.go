package store

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrateLockKey is the advisory lock taken while migrating (an arbitrary
// constant: "sbnotify" in ASCII).
const migrateLockKey int64 = 0x73626e6f74696679

// Migration is one embedded SQL file.
type Migration struct {
	Name string
	SQL  string
}

// Migrations returns the embedded migrations in the order they apply.
func Migrations() []Migration {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		panic(err) // the pattern is a constant
	}
	sort.Strings(names)
	out := make([]Migration, 0, len(names))
	for _, n := range names {
		b, err := migrationFS.ReadFile(n)
		if err != nil {
			panic(err) // embedded at build time
		}
		out = append(out, Migration{Name: n[len("migrations/"):], SQL: string(b)})
	}
	return out
}

// MigrationsHash identifies the embedded migrations as a whole; test helpers
// key template databases on it.
func MigrationsHash() string {
	h := sha256.New()
	for _, m := range Migrations() {
		h.Write([]byte(m.Name))
		h.Write([]byte{0})
		h.Write([]byte(m.SQL))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Migrate applies every embedded migration not yet applied. Each runs in its
// own transaction holding the migration advisory lock, so concurrent
// callers apply each file exactly once.
func Migrate(ctx context.Context, db Beginner) error {
	for _, m := range Migrations() {
		if err := applyOne(ctx, db, m); err != nil {
			return fmt.Errorf("error applying migration %s: %w", m.Name, err)
		}
	}
	return nil
}

// Beginner starts a transaction: a *pgx.Conn, a *pgxpool.Pool or a pgx.Tx.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

func applyOne(ctx context.Context, db Beginner, m Migration) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLockKey); err != nil {
			return fmt.Errorf("error taking migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("error creating schema_migrations: %w", err)
		}
		var done bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE name = $1)`, m.Name).Scan(&done); err != nil {
			return fmt.Errorf("error reading schema_migrations: %w", err)
		}
		if done {
			return nil
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (name) VALUES ($1)`, m.Name)
		return err
	})
}
