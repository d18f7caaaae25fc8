package mcpserver_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/mcpserver"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/warnings"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// set_sink cannot create a connection, so picking an existing one is where
// an agent chooses where deliveries go: its answer carries the warning a
// human gets on saving that connection when the address will be refused
// (the REST API's "warning"), and none otherwise.
func TestSetSinkWarnsOfABlockedConnection(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	p := engine.HumanPrincipal(hostid.String(human))
	conn := func(name, base string) int64 {
		t.Helper()
		c, err := w.eng.CreateConnection(w.Ctx, p, engine.ConnectionInput{
			Owner: scope, Kind: engine.KindGotify, Name: name, BaseURL: base, Secret: notifytype.NewSecret(gotifyToken),
		})
		require.NoError(t, err)
		return c.ID
	}
	private := conn("lan", "https://192.168.7.9")
	public := conn("public", "https://93.184.216.34")
	_, cred := w.vend(t, human, scope, notifytype.GrantNotifications)
	cs := w.connect(t, cred)

	created := succeeds[mcpserver.SinkOut](t, cs, mcpserver.ToolSetSink, map[string]any{"name": "phone", "kind": "gotify", "connection_id": private})
	require.Equal(t, warnings.Destination(w.Ctx, w.eng, "https://192.168.7.9"), created.Warning)
	require.Contains(t, created.Warning, "192.168.7.9")
	require.Contains(t, created.Warning, "SWITCHBOARD_PRIVATE_HOSTS")

	moved := succeeds[mcpserver.SinkOut](t, cs, mcpserver.ToolSetSink, map[string]any{"id": created.ID, "connection_id": public})
	require.Empty(t, moved.Warning)
	listed := succeeds[mcpserver.ListSinksOut](t, cs, mcpserver.ToolListSinks, map[string]any{})
	require.Len(t, listed.Sinks, 1)
	require.Empty(t, listed.Sinks[0].Warning, "list_sinks looks nothing up")
}
