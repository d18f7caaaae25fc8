package store

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// EngineSchema is the PostgreSQL schema that holds every table of the
// engine. Every statement of the engine names its tables in it
// (switchboard.outbox), so Emit works inside an embedder's transaction
// whatever the connection's search_path.
const EngineSchema = "switchboard"

// The engine's migration set, and the frozen legacy set it replaced (with
// the reference host's set, host/hoststore).
var (
	//go:embed schema/engine/*.sql
	engineFS embed.FS
	// legacyFS is the set that store.Migrate applied before the split: one
	// history (schema_migrations) for the engine's and the host's tables,
	// all in the connection's current schema. It is kept, never edited
	// and never extended, to bring a database it migrated up to the point
	// from which convertLegacy moves it to the two sets.
	//go:embed migrations/*.sql
	legacyFS embed.FS
)

// Migration is one SQL file of a set.
type Migration struct {
	Name string
	SQL  string
}

// set is a migration set: its files, and the table that records which of
// them a database has applied.
type set struct {
	name    string
	files   fs.FS
	history string // schema-qualified for the engine; current schema for the legacy set
	prelude string // run before the history table is created
}

var (
	engineSet = set{
		name:    "engine",
		files:   mustSub(engineFS, "schema/engine"),
		history: EngineSchema + ".migrations",
		prelude: `CREATE SCHEMA IF NOT EXISTS ` + EngineSchema,
	}
	legacySet = set{
		name:    "legacy",
		files:   mustSub(legacyFS, "migrations"),
		history: "schema_migrations",
	}
)

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	return sub
}

// EngineMigrations is the engine's migration set as plain SQL files, one
// per version, named as golang-migrate expects (NNNN_title.up.sql) and
// marked "-- +goose Up" for goose. Every statement is schema-qualified
// (schema switchboard), and no file references a table outside it. A
// host that runs its migrations with one of those tools may run these
// instead of MigrateEngine; it must then keep that tool's history of them
// apart from its own (golang-migrate: x-migrations-table), and not call
// MigrateEngine on the same database, whose history (switchboard.migrations)
// would be empty.
func EngineMigrations() fs.FS { return engineSet.files }

// list returns the set's files in the order they apply.
func (s set) list() []Migration { return MigrationFiles(s.files) }

// MigrationFiles lists the *.sql files of fsys in the order they apply
// (name order). The files are embedded: a read error panics.
func MigrationFiles(fsys fs.FS) []Migration {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		panic(err) // the pattern is a constant
	}
	sort.Strings(names)
	out := make([]Migration, 0, len(names))
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			panic(err) // embedded at build time
		}
		out = append(out, Migration{Name: n, SQL: string(b)})
	}
	return out
}

// EngineMigrationList lists the engine's files in the order they apply.
func EngineMigrationList() []Migration { return engineSet.list() }

// MigrationsHash identifies the engine's set; test helpers key template
// databases on it (host/hoststore.MigrationsHash adds the host's set).
func MigrationsHash() string {
	return HashMigrations(MigrationSet{Name: engineSet.name, Files: engineSet.list()})
}

// MigrationSet names a list of migration files, for HashMigrations.
type MigrationSet struct {
	Name  string
	Files []Migration
}

// HashMigrations identifies the sets together, in order: test helpers key
// template databases on it.
func HashMigrations(sets ...MigrationSet) string {
	h := sha256.New()
	for _, s := range sets {
		for _, m := range s.Files {
			h.Write([]byte(s.Name))
			h.Write([]byte{0})
			h.Write([]byte(m.Name))
			h.Write([]byte{0})
			h.Write([]byte(m.SQL))
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Beginner starts a transaction: a *pgx.Conn, a *pgxpool.Pool or a pgx.Tx.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// MigrateEngine applies every file of the engine's set not yet applied,
// recording them in switchboard.migrations. It creates only the schema
// switchboard and what lies in it: a database's own tables
// (schema_migrations, queues, ...) are left alone. Each file runs in its
// own transaction holding the migration advisory lock, so concurrent
// callers apply each file exactly once. A database migrated by the
// legacy store.Migrate is first converted in place (convertLegacy). A
// schema another tool applied (golang-migrate, goose, Atlas) is adopted:
// the files up to the version the schema says it is at
// (EngineSchemaVersion) are recorded as applied, not run again.
func MigrateEngine(ctx context.Context, db Beginner) error {
	_, err := MigrateEngineTo(ctx, db, EngineMigrateOptions{})
	return err
}

// EngineMigrateOptions says how far MigrateEngineTo goes and whether it
// changes anything.
type EngineMigrateOptions struct {
	// TargetVersion is the last version to apply. Defaults to the latest.
	TargetVersion int
	// DryRun applies the pending files in one transaction and rolls it
	// back: the result lists what would run, the database is unchanged.
	DryRun bool
}

// AppliedMigration is one file a run applied (or, in a dry run, would have).
type AppliedMigration struct {
	Migration
	Version  int
	Duration time.Duration
}

// MigrateEngineTo applies the engine's files up to opts.TargetVersion and
// lists those it ran. The engine's migrations go up only: a target below
// the schema's version is an error.
func MigrateEngineTo(ctx context.Context, db Beginner, opts EngineMigrateOptions) ([]AppliedMigration, error) {
	ms := engineSet.list()
	target := opts.TargetVersion
	if target == 0 {
		target = EngineLatestVersion()
	}
	if !slices.ContainsFunc(ms, func(m Migration) bool { return mustVersion(m.Name) == target }) {
		return nil, fmt.Errorf("there is no engine migration %d (the versions run from %d to %d)",
			target, mustVersion(ms[0].Name), EngineLatestVersion())
	}
	if opts.TargetVersion != 0 {
		var have int
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) (err error) {
			have, err = EngineSchemaVersion(ctx, tx)
			return err
		})
		if err != nil {
			return nil, err
		}
		if have > target {
			return nil, fmt.Errorf("the engine's schema is at version %d, past the target %d: its migrations go up only", have, target)
		}
	}
	var pending []Migration
	for _, m := range ms {
		if mustVersion(m.Name) <= target {
			pending = append(pending, m)
		}
	}
	if opts.DryRun {
		return dryRun(ctx, db, pending)
	}
	var out []AppliedMigration
	for _, m := range pending {
		a, ran, err := applyOne(ctx, db, engineSet, m)
		if err != nil {
			return out, fmt.Errorf("error applying %s migration %s: %w", engineSet.name, m.Name, err)
		}
		if ran {
			out = append(out, a)
		}
	}
	return out, nil
}

// dryRun runs the pending files as MigrateEngineTo would, in one
// transaction that it then rolls back.
func dryRun(ctx context.Context, db Beginner, pending []Migration) ([]AppliedMigration, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error beginning the dry run: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var out []AppliedMigration
	for _, m := range pending {
		a, ran, err := applyIn(ctx, tx, engineSet, m)
		if err != nil {
			return out, fmt.Errorf("error applying %s migration %s (dry run, rolled back): %w", engineSet.name, m.Name, err)
		}
		if ran {
			out = append(out, a)
		}
	}
	return out, nil
}

func applyOne(ctx context.Context, db Beginner, s set, m Migration) (a AppliedMigration, ran bool, err error) {
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		a, ran, err = applyIn(ctx, tx, s, m)
		return err
	})
	return a, ran, err
}

// applyIn applies one file inside tx, under the migration lock, unless its
// set's history records it or (for the engine's set) the schema's own
// version is at or past it.
func applyIn(ctx context.Context, tx pgx.Tx, s set, m Migration) (AppliedMigration, bool, error) {
	a := AppliedMigration{Migration: m}
	if err := LockMigrations(ctx, tx); err != nil {
		return a, false, err
	}
	if err := convertLegacy(ctx, tx); err != nil {
		return a, false, err
	}
	done, err := applied(ctx, tx, s, m.Name)
	if err != nil || done {
		return a, false, err
	}
	if s.name == engineSet.name {
		a.Version = mustVersion(m.Name)
		have, err := EngineSchemaVersion(ctx, tx)
		if err != nil {
			return a, false, err
		}
		if have >= a.Version {
			// Applied by another tool: adopt it into this history.
			return a, false, record(ctx, tx, s, m.Name)
		}
	}
	start := time.Now()
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return a, false, err
	}
	a.Duration = time.Since(start)
	return a, true, record(ctx, tx, s, m.Name)
}

// LockMigrations takes, in tx, the lock every migration runs under: the
// engine's and a host's (host/hoststore) alike, so a legacy database is
// converted once and concurrent callers apply each file once. It also
// takes the one-key lock of the builds before the families
// (legacyMigrateLockKey), so an older build migrating at the same moment
// waits.
func LockMigrations(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0), pg_advisory_xact_lock($2)`, LockFamilyMigrate, legacyMigrateLockKey); err != nil {
		return fmt.Errorf("error taking migration lock: %w", err)
	}
	return nil
}

// applied creates the set's history table if missing and reports whether
// the file name is recorded in it.
func applied(ctx context.Context, tx pgx.Tx, s set, name string) (bool, error) {
	if s.prelude != "" {
		if _, err := tx.Exec(ctx, s.prelude); err != nil {
			return false, fmt.Errorf("error preparing %s: %w", s.history, err)
		}
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.history+` (
		name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return false, fmt.Errorf("error creating %s: %w", s.history, err)
	}
	var done bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+s.history+` WHERE name = $1)`, name).Scan(&done); err != nil {
		return false, fmt.Errorf("error reading %s: %w", s.history, err)
	}
	return done, nil
}

func record(ctx context.Context, tx pgx.Tx, s set, name string) error {
	_, err := tx.Exec(ctx, `INSERT INTO `+s.history+` (name) VALUES ($1)`, name)
	return err
}

// engineTables are the tables (and the one free-standing sequence) the
// legacy set made that belong to the engine: what the engine package and
// the store functions it calls read and write. Every other table of the
// legacy set is the host's.
var engineTables = []string{
	"connections", "sinks", "subscriptions", "outbox_events", "outbox", "outbox_instances",
	"delivery_records", "digests", "digest_runs", "write_log", "agent_pages",
}

// legacyFirst is the first file of the legacy set: a schema_migrations
// table that records it is the legacy set's history, not some other
// tool's of the same name (golang-migrate's and dbmate's have a version
// column, no name).
const legacyFirst = "0001_foundation.sql"

// convertLegacy moves a database migrated by the legacy set (one history,
// schema_migrations, every table in the current schema) to the engine's
// set, inside tx: it applies the legacy files the database lacks, moves
// the engine's tables, their sequences and the owner_scope domain into the
// schema switchboard, drops the foreign keys from the engine's tables into
// the tables left behind (owners and actors are opaque ids now), records
// the engine's baseline as applied, and drops the legacy history. Nothing
// of the data changes. The tables left in the current schema are the
// reference host's, as its own baseline makes them: its set
// (host/hoststore) finds them there and records its baseline without
// running it. A database without the legacy history is left alone.
func convertLegacy(ctx context.Context, tx pgx.Tx) error {
	var legacy bool
	if err := tx.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM pg_attribute
		               WHERE attrelid = to_regclass('schema_migrations') AND attname = 'name' AND NOT attisdropped)`,
	).Scan(&legacy); err != nil {
		return fmt.Errorf("error looking for the legacy migration history: %w", err)
	}
	if !legacy {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT name FROM schema_migrations ORDER BY name`)
	if err != nil {
		return fmt.Errorf("error reading the legacy migration history: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("error reading the legacy migration history: %w", err)
	}
	if !slices.Contains(names, legacyFirst) {
		return nil // another tool's schema_migrations
	}
	var converted bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, engineSet.history).Scan(&converted); err != nil {
		return fmt.Errorf("error reading %s: %w", engineSet.history, err)
	}
	if converted {
		return fmt.Errorf("the database has both the legacy migration history (schema_migrations) and %s: resolve by hand", engineSet.history)
	}
	known := map[string]Migration{}
	for _, m := range legacySet.list() {
		known[m.Name] = m
	}
	for _, n := range names {
		if _, ok := known[n]; !ok {
			return fmt.Errorf("the legacy migration history names %s, which this version does not know: upgrade from a build that has it", n)
		}
	}
	for _, m := range legacySet.list() {
		if slices.Contains(names, m.Name) {
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("error applying legacy migration %s before converting: %w", m.Name, err)
		}
	}

	stmts := []string{
		`CREATE SCHEMA IF NOT EXISTS ` + EngineSchema,
		`ALTER DOMAIN owner_scope SET SCHEMA ` + EngineSchema,
		`ALTER SEQUENCE outbox_claim_token SET SCHEMA ` + EngineSchema,
	}
	for _, t := range engineTables {
		// Identity sequences, indexes and constraints move with the table.
		stmts = append(stmts, `ALTER TABLE `+t+` SET SCHEMA `+EngineSchema)
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("error converting the legacy schema (%s): %w", s, err)
		}
	}
	rows, err = tx.Query(ctx, `
		SELECT format('ALTER TABLE %s DROP CONSTRAINT %I', c.conrelid::regclass, c.conname)
		FROM pg_constraint c
		JOIN pg_class t ON t.oid = c.conrelid
		JOIN pg_class r ON r.oid = c.confrelid
		WHERE c.contype = 'f' AND t.relnamespace = $1::regnamespace AND r.relnamespace <> $1::regnamespace
		ORDER BY 1`, EngineSchema)
	if err != nil {
		return fmt.Errorf("error listing the engine's foreign keys into host tables: %w", err)
	}
	drops, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("error listing the engine's foreign keys into host tables: %w", err)
	}
	for _, s := range drops {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("error converting the legacy schema (%s): %w", s, err)
		}
	}
	base := engineSet.list()[0].Name
	if _, err := applied(ctx, tx, engineSet, base); err != nil {
		return err
	}
	if err := record(ctx, tx, engineSet, base); err != nil {
		return fmt.Errorf("error recording %s: %w", engineSet.history, err)
	}
	if _, err := tx.Exec(ctx, `DROP TABLE schema_migrations`); err != nil {
		return fmt.Errorf("error dropping the legacy migration history: %w", err)
	}
	return nil
}

// stampedFrom is the first engine migration that sets
// switchboard.schema_version(); a schema with the engine's tables but no
// such function is at the version just before it (the baseline).
const stampedFrom = 22

// MigrationVersion is the number a migration file's name starts with
// (0022_engine_schema_version.up.sql is 22).
func MigrationVersion(name string) (int, error) {
	digits := name[:len(name)-len(strings.TrimLeft(name, "0123456789"))]
	if digits == "" {
		return 0, fmt.Errorf("migration %s: the name does not start with its version", name)
	}
	return strconv.Atoi(digits)
}

func mustVersion(name string) int {
	v, err := MigrationVersion(name)
	if err != nil {
		panic(err) // the files are embedded at build time and tested
	}
	return v
}

// EngineLatestVersion is the engine schema version this build expects.
func EngineLatestVersion() int {
	ms := engineSet.list()
	return mustVersion(ms[len(ms)-1].Name)
}

// EngineSchemaVersion reads the version the engine's schema says it is at,
// whichever tool applied it: switchboard.schema_version() when it exists,
// the baseline's version when the engine's tables exist without it, and 0
// when they are missing. No history table is read.
func EngineSchemaVersion(ctx context.Context, db DBTX) (int, error) {
	var stamped, tables bool
	if err := db.QueryRow(ctx, `
		SELECT to_regprocedure($1) IS NOT NULL, to_regclass($2) IS NOT NULL`,
		EngineSchema+".schema_version()", EngineSchema+".outbox",
	).Scan(&stamped, &tables); err != nil {
		return 0, fmt.Errorf("error reading the engine schema's version: %w", err)
	}
	switch {
	case stamped:
		var v int
		if err := db.QueryRow(ctx, `SELECT `+EngineSchema+`.schema_version()`).Scan(&v); err != nil {
			return 0, fmt.Errorf("error reading the engine schema's version: %w", err)
		}
		return v, nil
	case tables:
		return stampedFrom - 1, nil
	default:
		return 0, nil
	}
}

// CheckEngineSchema reports, as an error that says what to do, a database
// whose engine tables are missing or behind this build's migrations. It
// reads the schema's own version (EngineSchemaVersion), so a schema that
// golang-migrate, goose or Atlas applied is accepted as readily as one
// Up applied.
func CheckEngineSchema(ctx context.Context, db DBTX) error {
	have, err := EngineSchemaVersion(ctx, db)
	if err != nil {
		return err
	}
	want := EngineLatestVersion()
	if have == 0 {
		return fmt.Errorf("the engine's tables are missing (no schema %s with its tables): run enginemigrate.Up first", EngineSchema)
	}
	if have < want {
		return fmt.Errorf("the engine's tables are at version %d, behind this build's %d: run enginemigrate.Up first", have, want)
	}
	return nil
}
