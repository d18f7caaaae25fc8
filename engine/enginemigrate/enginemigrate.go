// Package enginemigrate creates and upgrades the engine's tables, and only
// those: they live in their own PostgreSQL schema, switchboard, with their
// own migration history, switchboard.migrations. A database's other tables
// (its schema_migrations of golang-migrate, dbmate or goose, its queues)
// are never touched, so an embedder runs Up beside its own migrations:
//
//	if err := enginemigrate.Up(ctx, pool); err != nil { ... }
//
// The same migrations are plain SQL files (FS): a host that runs all its
// migrations with golang-migrate or goose may run them instead of Up (see
// FS). Either way, the engine's statements name their tables in the
// schema switchboard, so the embedder's connections need no search_path.
//
// A database migrated by an older build (store.Migrate, one history in
// schema_migrations for the engine's and the reference host's tables) is
// converted in place on the first Up, in one transaction: the engine's
// tables move into the schema switchboard with their data, their foreign
// keys into the host's tables are dropped, and the old history gives way
// to switchboard.migrations and host_migrations.
package enginemigrate

import (
	"context"
	"io/fs"

	"github.com/switchboard/notify/store"
)

// Schema is the PostgreSQL schema that holds the engine's tables.
const Schema = store.EngineSchema

// Beginner starts a transaction: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Beginner = store.Beginner

// Up applies every migration of the engine not yet applied. Each file runs
// in its own transaction under an advisory lock, so instances starting
// together apply each one once. It is safe to call at every start.
func Up(ctx context.Context, db Beginner) error { return store.MigrateEngine(ctx, db) }

// FS holds the engine's migrations as plain SQL files, one per version,
// named NNNN_title.up.sql as golang-migrate reads them, and each marked
// "-- +goose Up" as goose reads it; every statement is schema-qualified
// and none references a table outside the schema switchboard. To run them
// with golang-migrate, keep their history apart from yours with the
// x-migrations-table option (say "switchboard_migrations") and copy FS to
// a directory, or use iofs.New(enginemigrate.FS(), "."); with goose, use a
// separate version table (goose -table) likewise. A database migrated that
// way must not also be given to Up, which keeps its own history.
func FS() fs.FS { return store.EngineMigrations() }

// Versions lists the file names of FS in the order they apply; the last
// one is the schema version this build expects.
func Versions() []string {
	ms := store.EngineMigrationList()
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}
