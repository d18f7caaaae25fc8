package engine_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/vault"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

func TestCreateConnectionSealsTheSecretToItsRow(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, p := b.human()
	owner := hostid.Human(h)
	const token = "gtfya.sealed-token-1"

	c, err := b.eng.CreateConnection(b.ctx, p, engine.ConnectionInput{
		Owner: owner, Kind: engine.KindGotify, Name: "phone",
		BaseURL: "https://gotify.example.net", Secret: notifytype.NewSecret(token),
	})
	require.NoError(t, err)
	require.True(t, c.HasSecret)
	require.Equal(t, hostid.String(h), c.CreatedByHumanID)

	var sealed []byte
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT secret FROM switchboard.connections WHERE id = $1`, c.ID).Scan(&sealed))
	require.NotEmpty(t, sealed)
	require.False(t, bytes.Contains(sealed, []byte(token)))

	got, err := b.eng.OpenConnectionForTest(b.ctx, c.ID, owner, engine.KindGotify)
	require.NoError(t, err)
	require.Equal(t, token, got.Reveal())

	list, err := b.eng.ListConnections(b.ctx, p, owner)
	require.NoError(t, err)
	require.Len(t, list, 1)
	out, err := json.Marshal(list)
	require.NoError(t, err)
	require.NotContains(t, string(out), token)

	// A sealed value moved to another row of the same scope and kind does
	// not open there.
	other := b.f.Connection(storetest.ConnectionOpts{Owner: owner, Kind: engine.KindGotify})
	_, err = b.pool.Exec(b.ctx, `UPDATE switchboard.connections SET secret = $2 WHERE id = $1`, other, sealed)
	require.NoError(t, err)
	_, err = b.eng.OpenConnectionForTest(b.ctx, other, owner, engine.KindGotify)
	require.ErrorIs(t, err, vault.ErrOpen)
	require.NotContains(t, err.Error(), token)

	// Every use re-checks scope and kind.
	_, err = b.eng.OpenConnectionForTest(b.ctx, c.ID, hostid.Human(h+1000), engine.KindGotify)
	requireRefusal(t, err, notifytype.CodeForbidden, "connection_id")
	_, err = b.eng.OpenConnectionForTest(b.ctx, c.ID, owner, engine.KindApprise)
	requireRefusal(t, err, notifytype.CodeForbidden, "connection_id")
	_, err = b.eng.OpenConnectionForTest(b.ctx, 1<<40, owner, engine.KindGotify)
	requireRefusal(t, err, notifytype.CodeForbidden, "connection_id")
}

func TestCreateConnectionWithoutKeyStoresNothing(t *testing.T) {
	t.Parallel()
	b := setupService(t, func(c *engine.Config) { c.SecretKey = nil })
	h, p := b.human()

	_, err := b.eng.CreateConnection(b.ctx, p, engine.ConnectionInput{
		Owner: hostid.Human(h), Kind: engine.KindGotify, Name: "phone",
		BaseURL: "https://gotify.example.net", Secret: notifytype.NewSecret("gtfya.no-key"),
	})
	requireRefusal(t, err, notifytype.CodeEncryptionRequired, "")
	require.ErrorIs(t, err, notifytype.ErrEncryptionRequired)
	require.Zero(t, b.count(t, "connections"))

	// A connection with no secret needs no key: a stateful Apprise server.
	c, err := b.eng.CreateConnection(b.ctx, p, engine.ConnectionInput{
		Owner: hostid.Human(h), Kind: engine.KindApprise, Name: "apprise", BaseURL: "https://apprise.example.net",
	})
	require.NoError(t, err)
	require.False(t, c.HasSecret)
}

func TestCreateConnectionRefusals(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, p := b.human()
	other, _ := b.human()
	team := b.f.Team("")
	b.f.Member(team, h, "member")
	mine := hostid.Human(h)
	endpoint := b.f.Endpoint(hosttest.EndpointOpts{Owner: mine, Human: h})

	good := engine.ConnectionInput{
		Owner: mine, Kind: engine.KindGotify, Name: "phone",
		BaseURL: "https://gotify.example.net", Secret: notifytype.NewSecret("gtfya.token"),
	}
	for _, tc := range []struct {
		name  string
		p     engine.Principal
		edit  func(*engine.ConnectionInput)
		code  notifytype.Code
		field string
	}{
		{"no owner", p, func(in *engine.ConnectionInput) { in.Owner = notifytype.OwnerScope{} }, notifytype.CodeInvalidArgument, "owner"},
		{"another human's scope", p, func(in *engine.ConnectionInput) { in.Owner = hostid.Human(other) }, notifytype.CodeNotFound, ""},
		{"a team where a member", p, func(in *engine.ConnectionInput) { in.Owner = hostid.Team(team) }, notifytype.CodeForbidden, ""},
		{"an endpoint", engine.EndpointPrincipal(endpoint, hostid.String(h), mine), func(*engine.ConnectionInput) {}, notifytype.CodeForbidden, ""},
		{"unknown kind", p, func(in *engine.ConnectionInput) { in.Kind = "slack" }, notifytype.CodeInvalidArgument, "kind"},
		{"no name", p, func(in *engine.ConnectionInput) { in.Name = "" }, notifytype.CodeInvalidArgument, "name"},
		{"no base URL", p, func(in *engine.ConnectionInput) { in.BaseURL = "" }, notifytype.CodeInvalidArgument, "account_key"},
		{"http base URL", p, func(in *engine.ConnectionInput) { in.BaseURL = "http://gotify.example.net" }, notifytype.CodeInvalidArgument, "account_key"},
		{"credentials in base URL", p, func(in *engine.ConnectionInput) { in.BaseURL = "https://u:pw@gotify.example.net" }, notifytype.CodeInvalidArgument, "account_key"},
		{"no token", p, func(in *engine.ConnectionInput) { in.Secret = notifytype.Secret{} }, notifytype.CodeInvalidArgument, "secret"},
		{"token on two lines", p, func(in *engine.ConnectionInput) { in.Secret = notifytype.NewSecret("a\nb") }, notifytype.CodeInvalidArgument, "secret"},
		{"apprise secret not JSON", p, func(in *engine.ConnectionInput) {
			in.Kind = engine.KindApprise
			in.Secret = notifytype.NewSecret("tgram://x")
		}, notifytype.CodeInvalidArgument, "secret"},
		{"apprise URL without scheme", p, func(in *engine.ConnectionInput) {
			in.Kind, in.Secret = engine.KindApprise, notifytype.NewSecret(`{"urls":["nothing"]}`)
		}, notifytype.CodeInvalidArgument, "secret.urls"},
		{"apprise local scheme", p, func(in *engine.ConnectionInput) {
			in.Kind, in.Secret = engine.KindApprise, notifytype.NewSecret(`{"urls":["syslog://host"]}`)
		}, notifytype.CodeForbiddenScheme, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := good
			tc.edit(&in)
			_, err := b.eng.CreateConnection(b.ctx, tc.p, in)
			requireRefusal(t, err, tc.code, tc.field)
			require.Zero(t, b.count(t, "connections"))
		})
	}

	_, err := b.eng.CreateConnection(b.ctx, p, good)
	require.NoError(t, err)
	_, err = b.eng.CreateConnection(b.ctx, p, good)
	requireRefusal(t, err, notifytype.CodeInvalidArgument, "name")
	require.Equal(t, 1, b.count(t, "connections"))
}

func TestHTTPBaseURLUnderTheOptIn(t *testing.T) {
	t.Parallel()
	b := setupService(t, func(c *engine.Config) { c.PushAllowHTTP = true })
	h, p := b.human()
	_, err := b.eng.CreateConnection(b.ctx, p, engine.ConnectionInput{
		Owner: hostid.Human(h), Kind: engine.KindGotify, Name: "lan",
		BaseURL: "http://gotify.lan", Secret: notifytype.NewSecret("gtfya.token"),
	})
	require.NoError(t, err)
}

func TestDeleteConnection(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, p := b.human()
	_, stranger := b.human()
	owner := hostid.Human(h)
	conn := b.gotifyConnection(t, p, owner)
	sink := b.gotifySink(t, p, owner, conn, "phone")

	requireRefusal(t, b.eng.DeleteConnection(b.ctx, stranger, conn), notifytype.CodeNotFound, "")
	requireRefusal(t, b.eng.DeleteConnection(b.ctx, p, conn), notifytype.CodeInvalidArgument, "connection")
	require.Equal(t, 1, b.count(t, "connections"))

	require.NoError(t, b.eng.DeleteSink(b.ctx, p, sink.ID))
	require.NoError(t, b.eng.DeleteConnection(b.ctx, p, conn))
	require.Zero(t, b.count(t, "connections"))
	requireRefusal(t, b.eng.DeleteConnection(b.ctx, p, conn), notifytype.CodeNotFound, "")
}
