// Package hosttest builds test databases and worlds with the reference
// host's tables beside the engine's: the engine's own test helpers
// (store/storetest, engine/enginetest) know the engine's tables alone.
//
// New and URL give a database migrated by host.Migrate; NewFactory adds
// the host's rows (humans, teams, endpoints, queues, webhooks, todos) to
// storetest's; NewWorld is an enginetest world on such a database whose
// engines are configured as the reference host configures them
// (host.NewDirectory, host.Events, host.Links, host.CleanUp).
package hosttest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// Template migrates a template database with the engine's and the host's
// sets (host.Migrate).
var Template = storetest.Template{Hash: hoststore.MigrationsHash(), Migrate: func(ctx context.Context, pool *pgxpool.Pool) error {
	return host.Migrate(ctx, pool)
}}

// URL creates a fresh database with the engine's and the host's tables
// for tb and returns its connection string.
func URL(tb testing.TB) string {
	tb.Helper()
	return storetest.URLOf(tb, Template)
}

// New creates a fresh database with the engine's and the host's tables
// for tb and returns a pool on it, closed at cleanup.
func New(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	return storetest.Open(tb, URL(tb))
}

// World is an enginetest world on a database with the host's tables, its
// engines configured as the reference host's; F adds the host's rows.
type World struct {
	*enginetest.World
	F *Factory
}

// NewWorld builds a world on a fresh database with the host's tables.
func NewWorld(tb testing.TB) *World {
	tb.Helper()
	w := enginetest.NewOn(tb, URL(tb))
	f := &Factory{Factory: w.F}
	w.Embed = Configure
	w.NewHuman = func() (int64, engine.Principal, notifytype.OwnerScope) {
		id := f.Human("")
		return id, engine.HumanPrincipal(hostid.String(id)), hostid.Human(id)
	}
	return &World{World: w, F: f}
}

// Configure configures an engine on pool as the reference host does: its
// directory, its event types, its links and its housekeeping.
func Configure(pool *pgxpool.Pool, cfg *engine.Config) {
	cfg.Directory = host.NewDirectory(pool)
	cfg.Events = host.Events()
	cfg.Links = host.Links()
	cfg.HostCleanUp = host.CleanUp(cfg.Logger)
}
