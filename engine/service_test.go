package engine_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// svcBundle is what a management service test acts on: a migrated
// database, a factory for the world around the service, and an engine with
// an operator key.
type svcBundle struct {
	ctx  context.Context
	pool *pgxpool.Pool
	f    *hosttest.Factory
	eng  *engine.Engine
	key  []byte // the operator key every engine of the bundle shares
}

// setupService builds a bundle; configure, when given, edits the engine's
// Config before New.
func setupService(t *testing.T, configure ...func(*engine.Config)) *svcBundle {
	t.Helper()
	pool := hosttest.New(t)
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	b := &svcBundle{ctx: context.Background(), pool: pool, f: hosttest.NewFactory(t, pool), key: key}
	b.eng = b.engine(t, configure...)
	return b
}

// engine returns another engine on the bundle's database, with its key.
func (b *svcBundle) engine(t *testing.T, configure ...func(*engine.Config)) *engine.Engine {
	t.Helper()
	cfg := engine.Config{Pool: b.pool, Events: host.Events(), Links: host.Links(), Directory: tableDirectory{db: b.pool}, SecretKey: b.key}
	for _, c := range configure {
		c(&cfg)
	}
	eng, err := engine.New(cfg)
	require.NoError(t, err)
	return eng
}

// human inserts a human and returns it acting for themself.
func (b *svcBundle) human() (int64, engine.Principal) {
	id := b.f.Human("")
	return id, engine.HumanPrincipal(hostid.String(id))
}

// gotifyConnection creates a Gotify connection in owner through the
// service.
func (b *svcBundle) gotifyConnection(t *testing.T, p engine.Principal, owner notifytype.OwnerScope) int64 {
	t.Helper()
	c, err := b.eng.CreateConnection(b.ctx, p, engine.ConnectionInput{
		Owner: owner, Kind: engine.KindGotify, Name: "gotify-" + rand.Text()[:8],
		BaseURL: "https://gotify.example.net", Secret: notifytype.NewSecret("gtfya.test-token"),
	})
	require.NoError(t, err)
	return c.ID
}

// appriseConnection creates an Apprise connection in owner through the
// service; secret is the JSON {"urls": [...]} or "" for none.
func (b *svcBundle) appriseConnection(t *testing.T, eng *engine.Engine, p engine.Principal, owner notifytype.OwnerScope, secret string) int64 {
	t.Helper()
	c, err := eng.CreateConnection(b.ctx, p, engine.ConnectionInput{
		Owner: owner, Kind: engine.KindApprise, Name: "apprise-" + rand.Text()[:8],
		BaseURL: "https://apprise.example.net", Secret: notifytype.NewSecret(secret),
	})
	require.NoError(t, err)
	return c.ID
}

// gotifySink creates a Gotify sink named name in owner through the service.
func (b *svcBundle) gotifySink(t *testing.T, p engine.Principal, owner notifytype.OwnerScope, conn int64, name string) engine.Sink {
	t.Helper()
	s, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: owner, Name: name, Kind: engine.KindGotify, ConnectionID: conn})
	require.NoError(t, err)
	return s
}

func (b *svcBundle) count(t *testing.T, table string) int {
	t.Helper()
	return b.f.Count(`SELECT count(*) FROM ` + storetest.Table(table))
}

// requireRefusal asserts err is a coded refusal with code and field, that
// it matches its sentinel, and returns it.
func requireRefusal(t *testing.T, err error, code notifytype.Code, field string) *notifytype.Error {
	t.Helper()
	require.Error(t, err)
	e, ok := notifytype.AsError(err)
	require.True(t, ok, "not a coded refusal: %v", err)
	require.Equal(t, code, e.Code, "%v", err)
	require.Equal(t, field, e.Field, "%v", err)
	require.ErrorIs(t, err, &notifytype.Error{Code: code})
	return e
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func ptr[T any](v T) *T { return &v }
