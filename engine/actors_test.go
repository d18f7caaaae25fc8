package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
)

// Owners and actors are opaque ids the Directory vouches for: no foreign
// key ties the engine's tables to the host's humans or endpoints. A human
// or an endpoint the Directory does not know is refused with not_found,
// never a database error, and nothing is written.
func TestUnknownActorIsNotFound(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	known, ada := b.human()
	conn := b.gotifyConnection(t, ada, hostid.Human(known))
	sink := b.gotifySink(t, ada, hostid.Human(known), conn, "phone")
	endpoint := b.f.Endpoint(hosttest.EndpointOpts{Owner: hostid.Human(known), Human: known})
	writes := b.count(t, "write_log")

	const nobody = "987654321"
	ghost := engine.HumanPrincipal(nobody)
	_, err := b.eng.CreateConnection(b.ctx, ghost, engine.ConnectionInput{
		Owner: notifytype.Human(nobody), Kind: engine.KindGotify, Name: "home",
		BaseURL: "https://gotify.example.net", Secret: notifytype.NewSecret("gtfya.test-token"),
	})
	e := requireRefusal(t, err, notifytype.CodeNotFound, "")
	require.Equal(t, "acting human not found", e.Message)
	_, err = b.eng.CreateSink(b.ctx, ghost, engine.SinkInput{Owner: notifytype.Human(nobody), Name: "phone", Kind: engine.KindGotify, ConnectionID: conn})
	requireRefusal(t, err, notifytype.CodeNotFound, "")
	_, err = b.eng.ListSinks(b.ctx, ghost, notifytype.Human(nobody))
	requireRefusal(t, err, notifytype.CodeNotFound, "")

	// An endpoint that is not the acting human's, or is no endpoint at all.
	for _, id := range []int64{987654321, b.f.Endpoint(hosttest.EndpointOpts{})} {
		agent := engine.EndpointPrincipal(id, hostid.String(known), hostid.Human(known), notifytype.GrantNotifications)
		_, err = b.eng.UpdateSink(b.ctx, agent, sink.ID, engine.SinkPatch{Name: ptr("renamed")})
		e = requireRefusal(t, err, notifytype.CodeNotFound, "")
		require.Equal(t, "acting endpoint not found", e.Message)
	}
	agent := engine.EndpointPrincipal(endpoint, hostid.String(known), hostid.Human(known), notifytype.GrantNotifications)
	_, err = b.eng.UpdateSink(b.ctx, agent, sink.ID, engine.SinkPatch{Name: ptr("renamed")})
	require.NoError(t, err, "the endpoint the Directory knows acts")

	require.Equal(t, 1, b.count(t, "connections"))
	require.Equal(t, 1, b.count(t, "sinks"))
	require.Equal(t, writes+1, b.count(t, "write_log"), "only the known endpoint's write is logged")
}
