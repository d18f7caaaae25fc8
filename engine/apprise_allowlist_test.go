package engine_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
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
	w := enginetest.New(t)
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
		{name: "allowed", url: "gotify://10.20.0.6/tok", allowed: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, state: "delivered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := enginetest.New(t)
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
