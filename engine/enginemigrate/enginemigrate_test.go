package enginemigrate_test

import (
	"context"
	"fmt"
	"io/fs"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginemigrate"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

func emptyPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), storetest.EmptyURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// applyAsAnotherTool runs FS's files in order with no history of the
// engine's, as golang-migrate, goose or Atlas would: each file once, as
// one statement batch. (The real tools are run by examples/migrationtools.)
func applyAsAnotherTool(t *testing.T, pool *pgxpool.Pool, upTo int) {
	t.Helper()
	for _, v := range enginemigrate.AllVersions() {
		if v.Version > upTo {
			break
		}
		b, err := fs.ReadFile(enginemigrate.FS(), v.Name)
		require.NoError(t, err)
		_, err = pool.Exec(context.Background(), string(b))
		require.NoError(t, err, v.Name)
	}
}

func latest() int {
	vs := enginemigrate.AllVersions()
	return vs[len(vs)-1].Version
}

// Every engine migration from 22 on ends by setting the schema's own
// version to its number, so a schema any tool applied says its version.
func TestEveryEngineMigrationStampsItsVersion(t *testing.T) {
	t.Parallel()
	stamp := regexp.MustCompile(`(?s)CREATE OR REPLACE FUNCTION switchboard\.schema_version\(\) RETURNS integer\s+LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT (\d+)';\s*$`)
	for _, v := range enginemigrate.AllVersions() {
		if v.Version < 22 {
			continue
		}
		m := stamp.FindStringSubmatch(v.SQL)
		require.NotNil(t, m, "%s must end with CREATE OR REPLACE FUNCTION switchboard.schema_version() ... AS 'SELECT %d';", v.Name, v.Version)
		require.Equal(t, fmt.Sprint(v.Version), m[1], "%s stamps another version", v.Name)
	}
}

// A schema applied by another tool, with its history kept elsewhere, is
// one the engine starts on; Up afterwards adopts it without running a
// file twice.
func TestASchemaAnotherToolAppliedIsAcceptedAndAdopted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	applyAsAnotherTool(t, pool, latest())

	res, err := enginemigrate.New(pool).Validate(ctx)
	require.NoError(t, err)
	require.True(t, res.OK, "messages: %v", res.Messages)
	require.Equal(t, latest(), res.Version)

	eng, err := engine.New(engine.Config{Pool: pool})
	require.NoError(t, err)
	require.NoError(t, eng.Start(ctx), "the schema says its version; no history is needed")
	require.NoError(t, eng.Stop(ctx))

	ran, err := enginemigrate.New(pool).Migrate(ctx, nil)
	require.NoError(t, err, "Up on a schema another tool applied adopts it")
	require.Empty(t, ran.Versions, "nothing runs twice")
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchboard.migrations`).Scan(&n))
	require.Equal(t, len(enginemigrate.AllVersions()), n, "every version is recorded as applied")
	require.NoError(t, enginemigrate.Up(ctx, pool), "and Up stays idempotent")
}

// The baseline applied alone (before the schema said its version) reads
// as version 21: Start refuses it and names what is missing, and Up
// brings it up by running only the later files.
func TestTheBaselineAppliedAloneIsBehindAndUpFinishesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	first := enginemigrate.AllVersions()[0]
	applyAsAnotherTool(t, pool, first.Version)

	m := enginemigrate.New(pool)
	res, err := m.Validate(ctx)
	require.NoError(t, err)
	require.False(t, res.OK)
	require.Equal(t, first.Version, res.Version)
	require.Contains(t, res.Messages, "migration "+enginemigrate.AllVersions()[1].Name+" is not applied")

	eng, err := engine.New(engine.Config{Pool: pool})
	require.NoError(t, err)
	require.ErrorContains(t, eng.Start(ctx), "run enginemigrate.Up first")
	require.NoError(t, eng.Stop(ctx))

	ran, err := m.Migrate(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, enginemigrate.AllVersions()[1:], withoutDurations(ran.Versions), "only the files after the baseline ran")
	v, err := m.Version(ctx)
	require.NoError(t, err)
	require.Equal(t, latest(), v)
}

func withoutDurations(vs []enginemigrate.MigrateVersion) []enginemigrate.MigrateVersion {
	out := make([]enginemigrate.MigrateVersion, len(vs))
	for i, v := range vs {
		v.Duration = 0
		out[i] = v
	}
	return out
}

// A target version stops Migrate there; the next Migrate goes on from it.
func TestMigrateStopsAtTheTargetVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	m := enginemigrate.New(pool)
	all := enginemigrate.AllVersions()

	ran, err := m.Migrate(ctx, &enginemigrate.MigrateOpts{TargetVersion: all[0].Version})
	require.NoError(t, err)
	require.Equal(t, all[:1], withoutDurations(ran.Versions))
	v, err := m.Version(ctx)
	require.NoError(t, err)
	require.Equal(t, all[0].Version, v)

	ran, err = m.Migrate(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, all[1:], withoutDurations(ran.Versions))

	ran, err = m.Migrate(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, ran.Versions, "at the latest, nothing runs")

	_, err = m.Migrate(ctx, &enginemigrate.MigrateOpts{TargetVersion: all[0].Version})
	require.ErrorContains(t, err, "go up only", "a target below the schema is refused")
	_, err = m.Migrate(ctx, &enginemigrate.MigrateOpts{TargetVersion: 9999})
	require.ErrorContains(t, err, "there is no engine migration 9999")
}

// A dry run lists what would run and leaves the database as it was.
func TestADryRunListsWhatWouldRunAndChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	m := enginemigrate.New(pool)

	ran, err := m.Migrate(ctx, &enginemigrate.MigrateOpts{DryRun: true})
	require.NoError(t, err)
	require.True(t, ran.DryRun)
	require.Equal(t, enginemigrate.AllVersions(), withoutDurations(ran.Versions))

	var exists bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'switchboard')`).Scan(&exists))
	require.False(t, exists, "the dry run was rolled back: no schema switchboard")
	v, err := m.Version(ctx)
	require.NoError(t, err)
	require.Zero(t, v)
	res, err := m.Validate(ctx)
	require.NoError(t, err)
	require.False(t, res.OK)
	require.Len(t, res.Messages, 1)
	require.Contains(t, res.Messages[0], "missing")
}

// Schema names the schema the engine's statements name.
func TestSchemaIsTheStatementsSchema(t *testing.T) {
	require.Equal(t, store.EngineSchema, enginemigrate.Schema)
}
