package engine_test

import (
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
