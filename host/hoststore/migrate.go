package hoststore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/store"
)

// DBTX is what a statement needs: a pgx.Tx or a *pgxpool.Pool.
type DBTX = store.DBTX

// Beginner starts a transaction: a *pgx.Conn, a *pgxpool.Pool or a pgx.Tx.
type Beginner = store.Beginner

//go:embed schema/host/*.sql
var hostFS embed.FS

// History is the table, in the connection's current schema, that records
// which of the host's migrations a database has applied.
const History = "host_migrations"

// setName names the host's set in MigrationsHash.
const setName = "host"

var files = func() fs.FS {
	sub, err := fs.Sub(hostFS, "schema/host")
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	return sub
}()

// Migrations is the reference host's migration set (humans, teams,
// endpoints, queues, todos, webhooks, ...), in the connection's current
// schema. It runs after the engine's.
func Migrations() fs.FS { return files }

// MigrationList lists the host's files in the order they apply.
func MigrationList() []store.Migration { return store.MigrationFiles(files) }

// MigrationsHash identifies the engine's and the host's sets together;
// test helpers key template databases on it.
func MigrationsHash() string {
	return store.HashMigrations(
		store.MigrationSet{Name: "engine", Files: store.EngineMigrationList()},
		store.MigrationSet{Name: setName, Files: MigrationList()})
}

// Migrate applies the host's files not yet applied, recording them in
// host_migrations, each in its own transaction under the migration lock
// the engine's set takes too (store.LockMigrations), so concurrent
// callers apply each file once. The engine's set must have been applied
// first: the host's tables use its owner_scope domain.
func Migrate(ctx context.Context, db Beginner) error {
	ms := MigrationList()
	for i, m := range ms {
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return applyIn(ctx, tx, m, i == 0) })
		if err != nil {
			return fmt.Errorf("error applying %s migration %s: %w", setName, m.Name, err)
		}
	}
	return nil
}

// baselineTables are tables the host's baseline creates, first and last
// by name: a database that has them without the baseline recorded was
// converted from the legacy set (store.MigrateEngine moved the engine's
// tables out and left these as the baseline makes them).
var baselineTables = []string{"api_tokens", "webhooks"}

func applyIn(ctx context.Context, tx pgx.Tx, m store.Migration, baseline bool) error {
	if err := store.LockMigrations(ctx, tx); err != nil {
		return err
	}
	var engine bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, store.EngineSchema+".outbox").Scan(&engine); err != nil {
		return fmt.Errorf("error reading %s.outbox: %w", store.EngineSchema, err)
	}
	if !engine {
		return errors.New("the engine's migrations must be applied before the host's")
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+History+` (
		name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("error creating %s: %w", History, err)
	}
	var done bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+History+` WHERE name = $1)`, m.Name).Scan(&done); err != nil {
		return fmt.Errorf("error reading %s: %w", History, err)
	}
	if done {
		return nil
	}
	if baseline {
		var converted bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL`,
			baselineTables[0], baselineTables[1]).Scan(&converted); err != nil {
			return fmt.Errorf("error looking for the host's tables: %w", err)
		}
		if converted {
			return record(ctx, tx, m.Name)
		}
	}
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return err
	}
	return record(ctx, tx, m.Name)
}

func record(ctx context.Context, tx pgx.Tx, name string) error {
	_, err := tx.Exec(ctx, `INSERT INTO `+History+` (name) VALUES ($1)`, name)
	return err
}
