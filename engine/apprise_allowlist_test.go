package engine_test

import (
	"net/netip"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/apprise"
	"github.com/switchboard/notify/sinks/sinktest"
)

// TestDeliveryRechecksAppriseSchemes: Apprise URLs stored while the
// operator allowed a scheme (or before the allowlist) never reach the
// Apprise server once the allowlist refuses them: the row is recorded
// undeliverable (class config) and nothing is sent (REQ-4, D23).
func TestDeliveryRechecksAppriseSchemes(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	srv := sinktest.NewServer(t, nil)
	_, p, scope := w.Human()
	lax := w.Engine(func(c *engine.Config) {
		c.AppriseSchemesAllowed = append(slices.Clone(apprise.DefaultAllowedSchemes), "json")
	})
	w.Sink(lax, p, scope, enginetest.SinkOpts{
		Kind: engine.KindApprise, BaseURL: srv.URL, Secret: `{"urls":["json://169.254.169.254/latest/meta-data/"]}`,
	})

	strict := w.Serve()
	w.Emit(strict, todoDead(scope, 1, sinks.Content{Title: "nightly build"}))
	a := w.Wait()
	require.Equal(t, "undeliverable", a.State, "%+v", a)
	require.Equal(t, notifytype.ClassConfig, a.Class)
	require.Empty(t, srv.Requests(), "nothing reached the Apprise server")
}

// TestDeliveryBlocksPrivateHostsInsideAppriseURLs: issue 18 item 12. A
// stateless sink whose allowlisted Apprise URL names a private host
// (gotify://10.…/…, which the Apprise server would connect to) is refused
// at send time as blocked, as a private sink server is, and nothing
// reaches the Apprise server; with the operator's SWITCHBOARD_PRIVATE_HOSTS
// allowing that range it is delivered. A trailing-dot loopback is blocked
// whatever the allowlist.
func TestDeliveryBlocksPrivateHostsInsideAppriseURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		url     string
		allowed []netip.Prefix
		state   string
		class   notifytype.ErrorClass
	}{
		{name: "private", url: "gotify://10.20.0.6/tok", state: "undeliverable", class: notifytype.ClassBlocked},
		{name: "trailing dot", url: "gotify://127.0.0.1./tok", state: "undeliverable", class: notifytype.ClassBlocked},
		{name: "zulip's own server", url: "zulip://bot@10.20.0.6/abcdefghijklmnopqrstuvwxyz123456", state: "undeliverable", class: notifytype.ClassBlocked},
		{name: "allowed", url: "gotify://10.20.0.6/tok", allowed: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, state: "delivered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := hosttest.NewWorld(t)
			srv := sinktest.NewServer(t, nil)
			_, p, scope := w.Human()
			allow := func(c *engine.Config) { c.PrivateHosts = append(slices.Clone(c.PrivateHosts), tc.allowed...) }
			w.Sink(w.Engine(allow), p, scope, enginetest.SinkOpts{
				Kind: engine.KindApprise, BaseURL: srv.URL, Secret: `{"urls":["` + tc.url + `"]}`,
			})
			e := w.Serve(allow)
			w.Emit(e, todoDead(scope, 1, sinks.Content{Title: "nightly build"}))
			a := w.Wait()
			require.Equal(t, tc.state, a.State, "%+v", a)
			require.Equal(t, tc.class, a.Class)
			if tc.state == "undeliverable" {
				require.Empty(t, srv.Requests(), "nothing reached the Apprise server")
			}
		})
	}
}

// TestSavingAppriseURLsParsersReadDifferentlyIsRefused: issue 24 item 4.
// An Apprise URL whose host could be read one way by Switchboard and
// another by Apprise (a capital or repeated argument name, a backslash, a
// "#" in the query, more than one "@", an encoded host, an IPv6 literal
// Apprise 1.2 cuts short) is refused when the connection is saved, with
// invalid_argument on secret.urls and without the URL; another Apprise API
// (apprise://, which relays to any host) is off the default allowlist.
func TestSavingAppriseURLsParsersReadDifferentlyIsRefused(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, p := b.human()
	save := func(u string) error {
		_, err := b.eng.CreateConnection(b.ctx, p, engine.ConnectionInput{
			Owner: hostid.Human(h), Kind: engine.KindApprise, Name: "apprise", BaseURL: "https://apprise.example.net",
			Secret: notifytype.NewSecret(`{"urls":[` + strconv.Quote(u) + `]}`),
		})
		return err
	}
	for _, u := range []string{
		"mailto://u:CANARY@pub.example.net?SMTP=127.0.0.1&port=2525",
		"mailto://u:CANARY@pub.example.net?smtp=pub.example.net&smtp=127.0.0.1",
		"mailto://u:CANARY@pub.example.net?to=a@pub.example.net#&smtp=127.0.0.1",
		`gotify://pub.example.net\@127.0.0.1:8080/CANARY`,
		"gotify://u:CANARY@pub.example.net@127.0.0.1/tok",
		"gotify://127%2e0.0.1/CANARY",
		"gotify://[::ffff:127.0.0.1]/CANARY",
		"ntfy://loopback.example.net:8080?TO=CANARY",
	} {
		err := save(u)
		e := requireRefusal(t, err, notifytype.CodeInvalidArgument, "secret.urls")
		require.NotContains(t, e.Error(), "CANARY", u)
	}
	e := requireRefusal(t, save("apprise://relay.example.net:8000/CANARY"), notifytype.CodeForbiddenScheme, "")
	require.Equal(t, "apprise", e.Scheme)
	require.Zero(t, b.count(t, "connections"))

	// What every parser reads alike is saved.
	require.NoError(t, save("mailto://u:p@pub.example.net?smtp=smtp.example.net&port=587&to=a@example.net"))
}
