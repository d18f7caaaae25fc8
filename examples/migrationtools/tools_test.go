package migrationtools

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginemigrate"
	"github.com/switchboard/notify/store/storetest"
)

// engineStarts opens a pool on url and checks what an embedder relies on
// after its tool ran: Validate says OK, an engine starts and stops, and a
// later enginemigrate.Up adopts the schema without running a file again.
func engineStarts(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	res, err := enginemigrate.New(pool).Validate(ctx)
	require.NoError(t, err)
	require.True(t, res.OK, "Validate: %v", res.Messages)
	latest := enginemigrate.AllVersions()[len(enginemigrate.AllVersions())-1].Version
	require.Equal(t, latest, res.Version)

	eng, err := engine.New(engine.Config{Pool: pool})
	require.NoError(t, err)
	require.NoError(t, eng.Start(ctx))
	require.NoError(t, eng.Stop(ctx))

	ran, err := enginemigrate.New(pool).Migrate(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, ran.Versions, "Up after the tool runs nothing again")
}

func publicTables(t *testing.T, url string) []string {
	t.Helper()
	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`)
	require.NoError(t, err)
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	return names
}

// golang-migrate applies enginemigrate.FS with its history in a table of
// its own, as the README says; the engine starts on the result.
func TestGolangMigrateAppliesTheEngineSchema(t *testing.T) {
	url := storetest.EmptyURL(t)
	src, err := iofs.New(enginemigrate.FS(), ".")
	require.NoError(t, err)
	mURL := strings.Replace(url, "postgres://", "pgx5://", 1)
	if strings.Contains(mURL, "?") {
		mURL += "&"
	} else {
		mURL += "?"
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, mURL+"x-migrations-table=switchboard_migrations")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = m.Close() })
	require.NoError(t, m.Up())
	require.ErrorIs(t, m.Up(), migrate.ErrNoChange, "a second Up has nothing to do")
	version, dirty, err := m.Version()
	require.NoError(t, err)
	require.False(t, dirty)
	require.Equal(t, uint(enginemigrate.AllVersions()[len(enginemigrate.AllVersions())-1].Version), version)

	engineStarts(t, url)
	require.Equal(t, []string{"switchboard_migrations"}, publicTables(t, url), "golang-migrate's history is the only table outside the schema switchboard")
}

// goose applies enginemigrate.FS with its own version table; the engine
// starts on the result.
func TestGooseAppliesTheEngineSchema(t *testing.T) {
	url := storetest.EmptyURL(t)
	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	store, err := database.NewStore(goose.DialectPostgres, "switchboard_goose")
	require.NoError(t, err)
	p, err := goose.NewProvider("", db, enginemigrate.FS(), goose.WithStore(store))
	require.NoError(t, err)
	ctx := context.Background()
	results, err := p.Up(ctx)
	require.NoError(t, err)
	require.Len(t, results, len(enginemigrate.AllVersions()))
	results, err = p.Up(ctx)
	if err != nil && !errors.Is(err, goose.ErrNoNextVersion) {
		require.NoError(t, err)
	}
	require.Empty(t, results, "a second Up has nothing to do")

	engineStarts(t, url)
	require.Equal(t, []string{"switchboard_goose"}, publicTables(t, url), "goose's history is the only table outside the schema switchboard")
}
