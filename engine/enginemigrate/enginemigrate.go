// Package enginemigrate creates and upgrades the engine's tables, and only
// those: they live in their own PostgreSQL schema, switchboard, with their
// own migration history, switchboard.migrations. A database's other tables
// (its schema_migrations of golang-migrate, dbmate or goose, its queues)
// are never touched, so an embedder runs Up beside its own migrations:
//
//	if err := enginemigrate.Up(ctx, pool); err != nil { ... }
//
// The same migrations are plain SQL files (FS): a host that runs all its
// migrations with golang-migrate, goose or Atlas may run them instead of
// Up (see FS). Either way, the engine's statements name their tables in
// the schema switchboard, so the embedder's connections need no
// search_path, and the schema says which version it is
// (switchboard.schema_version()): the engine's Start, Up and Validate read
// that, never a history table, so a schema any tool applied is accepted.
//
// New(db).Migrate offers what Up does with a target version and a dry
// run, and lists what ran; Validate says whether this build can start on
// the database.
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
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/store"
)

// Schema is the PostgreSQL schema that holds the engine's tables.
const Schema = "switchboard"

// Beginner starts a transaction: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

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

// Migrator applies and checks the engine's migrations on one database, the
// way Up does, with the options rivermigrate users expect.
type Migrator struct {
	db Beginner
}

// New returns a Migrator for db (a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx).
func New(db Beginner) *Migrator { return &Migrator{db: db} }

// MigrateOpts says how far Migrate goes and whether it changes anything.
// The zero value applies every pending migration.
type MigrateOpts struct {
	// TargetVersion is the last version to apply (see AllVersions).
	// Defaults to the latest. The engine's migrations go up only: a target
	// below the schema's version is an error.
	TargetVersion int
	// DryRun applies the pending migrations in one transaction and rolls
	// it back: the result lists what would run, and the database is left
	// as it was. Defaults to false.
	DryRun bool
}

// MigrateResult lists the migrations a Migrate ran, in order: empty when
// the schema was already at the target.
type MigrateResult struct {
	// DryRun is true when nothing was kept (MigrateOpts.DryRun).
	DryRun   bool
	Versions []MigrateVersion
}

// MigrateVersion is one migration: its version, file name and SQL, and
// how long it took when a Migrate ran it.
type MigrateVersion struct {
	Version  int
	Name     string
	SQL      string
	Duration time.Duration
}

// AllVersions lists every migration of this build, oldest first.
func AllVersions() []MigrateVersion {
	ms := store.EngineMigrationList()
	out := make([]MigrateVersion, len(ms))
	for i, m := range ms {
		v, err := store.MigrationVersion(m.Name)
		if err != nil {
			panic(err) // the files are embedded and tested
		}
		out[i] = MigrateVersion{Version: v, Name: m.Name, SQL: m.SQL}
	}
	return out
}

// Migrate applies the pending migrations up to opts.TargetVersion (nil
// opts: all of them), each in its own transaction under an advisory lock,
// and lists those it ran. A schema another tool applied is adopted: the
// migrations up to its version are recorded in switchboard.migrations,
// not run again.
func (m *Migrator) Migrate(ctx context.Context, opts *MigrateOpts) (*MigrateResult, error) {
	if opts == nil {
		opts = &MigrateOpts{}
	}
	ran, err := store.MigrateEngineTo(ctx, m.db, store.EngineMigrateOptions{TargetVersion: opts.TargetVersion, DryRun: opts.DryRun})
	res := &MigrateResult{DryRun: opts.DryRun}
	for _, a := range ran {
		res.Versions = append(res.Versions, MigrateVersion{Version: a.Version, Name: a.Name, SQL: a.SQL, Duration: a.Duration})
	}
	return res, err
}

// Version is the version the database's engine schema says it is at; 0
// when the engine's tables are missing.
func (m *Migrator) Version(ctx context.Context) (int, error) {
	var v int
	err := pgx.BeginFunc(ctx, m.db, func(tx pgx.Tx) (err error) {
		v, err = store.EngineSchemaVersion(ctx, tx)
		return err
	})
	return v, err
}

// ValidateResult says whether this build's engine can start on the
// database (OK), the schema's version and the latest this build knows,
// and, when not OK, what to do.
type ValidateResult struct {
	OK       bool
	Version  int
	Latest   int
	Messages []string
}

// Validate checks the database's engine schema against this build without
// changing anything: OK when it is at or past this build's latest
// version, however it was applied; otherwise Messages say which versions
// are missing. Start refuses exactly what Validate does not call OK.
func (m *Migrator) Validate(ctx context.Context) (*ValidateResult, error) {
	have, err := m.Version(ctx)
	if err != nil {
		return nil, err
	}
	res := &ValidateResult{Version: have, Latest: store.EngineLatestVersion()}
	res.OK = have >= res.Latest
	switch {
	case have == 0:
		res.Messages = append(res.Messages, fmt.Sprintf("the engine's tables are missing (schema %s): run Up, or your tool on FS", Schema))
	case !res.OK:
		for _, v := range AllVersions() {
			if v.Version > have {
				res.Messages = append(res.Messages, "migration "+v.Name+" is not applied")
			}
		}
	case have > res.Latest:
		res.Messages = append(res.Messages, fmt.Sprintf("the schema is at version %d, newer than this build's %d: a newer build migrated it", have, res.Latest))
	}
	return res, nil
}
