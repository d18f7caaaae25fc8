package engine_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/apprise"
	"github.com/switchboard/notify/store/storetest"
)

// canary marks every planted secret; it must appear nowhere but sealed.
const canary = "canary-7f3d"

// TestSecretsNeverLeak plants a Gotify token, Apprise URLs and an Apprise
// authorization value in inputs that fail in every way the service can
// refuse them, and checks that none reaches an error, a log line, a
// returned value or any stored row but the sealed secret column.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	logs := &enginetest.SyncBuffer{}
	withLogs := func(c *engine.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	b := setupService(t, withLogs)
	noKey := b.engine(t, withLogs, func(c *engine.Config) { c.SecretKey = nil })
	lax := b.engine(t, withLogs, func(c *engine.Config) {
		c.AppriseSchemesAllowed = append(slices.Clone(apprise.DefaultAllowedSchemes), "json", "form")
	})
	h, p := b.human()
	_, stranger := b.human()
	owner := hostid.Human(h)
	endpoint := engine.EndpointPrincipal(b.f.Endpoint(hosttest.EndpointOpts{Owner: owner, Human: h}), hostid.String(h), owner, notifytype.GrantNotifications)

	token := "gtfya." + canary + "-token"
	tgram := "tgram://" + canary + "bot/" + canary + "chat"
	jsonURL := "json://" + canary + ".example.net/hook?key=" + canary
	auth := "Bearer " + canary + "-auth"
	appriseSecret := func(urls ...string) string {
		b, err := json.Marshal(map[string]any{"urls": urls, "authorization": auth})
		require.NoError(t, err)
		return string(b)
	}
	gotifyIn := func(mod func(*engine.ConnectionInput)) engine.ConnectionInput {
		in := engine.ConnectionInput{Owner: owner, Kind: engine.KindGotify, Name: "g", BaseURL: "https://g.example.net", Secret: notifytype.NewSecret(token)}
		mod(&in)
		return in
	}
	apprise := func(secret string) func(*engine.ConnectionInput) {
		return func(in *engine.ConnectionInput) {
			in.Kind, in.Secret = engine.KindApprise, notifytype.NewSecret(secret)
		}
	}

	// Stored for real, to fail against later.
	good, err := b.eng.CreateConnection(b.ctx, p, gotifyIn(func(in *engine.ConnectionInput) { in.Name = "stored" }))
	require.NoError(t, err)
	relay, err := lax.CreateConnection(b.ctx, p, gotifyIn(func(in *engine.ConnectionInput) {
		in.Name = "relay"
		apprise(appriseSecret(tgram, jsonURL))(in)
	}))
	require.NoError(t, err)
	urls, err := b.eng.CreateConnection(b.ctx, p, gotifyIn(func(in *engine.ConnectionInput) {
		in.Name = "urls"
		apprise(appriseSecret(tgram))(in)
	}))
	require.NoError(t, err)
	sink, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: owner, Name: "tg", Kind: engine.KindApprise, ConnectionID: urls.ID})
	require.NoError(t, err)

	var errs []error
	fail := func(err error) {
		t.Helper()
		require.Error(t, err)
		errs = append(errs, err)
	}
	create := func(eng *engine.Engine, p engine.Principal, in engine.ConnectionInput) {
		t.Helper()
		_, err := eng.CreateConnection(b.ctx, p, in)
		fail(err)
	}
	create(noKey, p, gotifyIn(func(*engine.ConnectionInput) {}))
	create(noKey, p, gotifyIn(apprise(appriseSecret(tgram))))
	create(b.eng, p, gotifyIn(apprise(appriseSecret(tgram, jsonURL))))
	create(b.eng, p, gotifyIn(apprise(appriseSecret(canary+"-no-scheme"))))
	create(b.eng, p, gotifyIn(apprise(appriseSecret("tgram://"+canary+" with space"))))
	create(b.eng, p, gotifyIn(apprise(`{"urls":["`+tgram+`"],"authorization":"`+canary+`\n"}`)))
	create(b.eng, p, gotifyIn(apprise(`{"urls":["`+tgram+`"],"extra":"`+canary+`"}`)))
	create(b.eng, p, gotifyIn(apprise(canary+" {not json")))
	create(b.eng, p, gotifyIn(func(in *engine.ConnectionInput) { in.Secret = notifytype.NewSecret(token + " two") }))
	create(b.eng, p, gotifyIn(func(in *engine.ConnectionInput) { in.Secret = notifytype.NewSecret(strings.Repeat(token, 1000)) }))
	create(b.eng, p, gotifyIn(func(in *engine.ConnectionInput) { in.Kind = "slack" }))
	create(b.eng, p, gotifyIn(func(in *engine.ConnectionInput) { in.Name = "" }))
	create(b.eng, p, gotifyIn(func(in *engine.ConnectionInput) { in.Name = "stored" }))
	create(b.eng, p, gotifyIn(func(in *engine.ConnectionInput) { in.BaseURL = "https://u:" + canary + "@g.example.net" }))
	create(b.eng, p, gotifyIn(func(in *engine.ConnectionInput) { in.BaseURL = "http://" + canary + ".example.net" }))
	create(b.eng, p, gotifyIn(func(in *engine.ConnectionInput) { in.BaseURL = "https://g.example.net/?t=" + canary }))
	create(b.eng, endpoint, gotifyIn(func(*engine.ConnectionInput) {}))
	create(b.eng, stranger, gotifyIn(func(*engine.ConnectionInput) {}))

	_, err = b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: owner, Name: "relay", Kind: engine.KindApprise, ConnectionID: relay.ID})
	fail(err)
	_, err = b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: owner, Name: "both", Kind: engine.KindApprise, ConnectionID: urls.ID, Options: raw(`{"config_key":"ops"}`)})
	fail(err)
	_, err = b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: owner, Name: "kind", Kind: engine.KindGotify, ConnectionID: urls.ID})
	fail(err)
	_, err = b.eng.CreateSink(b.ctx, stranger, engine.SinkInput{Owner: owner, Name: "x", Kind: engine.KindApprise, ConnectionID: urls.ID})
	fail(err)
	_, err = b.eng.UpdateSink(b.ctx, p, sink.ID, engine.SinkPatch{ConnectionID: &relay.ID})
	fail(err)
	_, err = b.eng.UpdateSink(b.ctx, p, sink.ID, engine.SinkPatch{ConnectionID: &good.ID})
	fail(err)
	fail(b.eng.DeleteConnection(b.ctx, p, urls.ID))
	_, err = b.pool.Exec(b.ctx, `UPDATE switchboard.connections SET secret = (SELECT secret FROM switchboard.connections WHERE id = $1) WHERE id = $2`, urls.ID, relay.ID)
	require.NoError(t, err)
	_, err = b.eng.OpenConnectionForTest(b.ctx, relay.ID, owner, engine.KindApprise)
	fail(err)
	_, err = noKey.OpenConnectionForTest(b.ctx, urls.ID, owner, engine.KindApprise)
	fail(err)

	for _, err := range errs {
		for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
			require.NotContains(t, strings.ToLower(text), canary, "an error leaks a secret")
		}
		e, ok := notifytype.AsError(err)
		if ok {
			out, jerr := json.Marshal(e)
			require.NoError(t, jerr)
			require.NotContains(t, strings.ToLower(string(out)), canary)
		}
	}
	require.Len(t, errs, 27)

	// What the service returns.
	conns, err := b.eng.ListConnections(b.ctx, p, owner)
	require.NoError(t, err)
	sinks, err := b.eng.ListSinks(b.ctx, p, owner)
	require.NoError(t, err)
	for _, v := range []any{good, relay, urls, sink, conns, sinks} {
		out, err := json.Marshal(v)
		require.NoError(t, err)
		require.NotContains(t, strings.ToLower(string(out)), canary)
		require.NotContains(t, strings.ToLower(fmt.Sprintf("%+v", v)), canary)
	}

	// Every stored row of every table, the sealed column aside.
	rows, err := b.pool.Query(b.ctx, storetest.TablesQuery)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	require.Contains(t, tables, "connections")
	for _, table := range tables {
		var dump string
		require.NoError(t, b.pool.QueryRow(b.ctx,
			`SELECT coalesce(string_agg((to_jsonb(t) - 'secret')::text, E'\n'), '') FROM `+storetest.Table(table)+` t`).Scan(&dump))
		require.NotContains(t, strings.ToLower(dump), canary, "table %s stores a secret in the clear", table)
	}
	var sealed [][]byte
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT array_agg(secret) FROM switchboard.connections WHERE secret IS NOT NULL`).Scan(&sealed))
	require.Len(t, sealed, 3)
	for _, s := range sealed {
		require.False(t, bytes.Contains(bytes.ToLower(s), []byte(canary)))
	}
	require.NotContains(t, strings.ToLower(logs.String()), canary)
}
