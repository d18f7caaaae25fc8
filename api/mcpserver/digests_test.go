package mcpserver_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/mcpserver"
	"github.com/switchboard/notify/notifytype"
)

func TestDigestVerbsOffUntilGranted(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	_, cred := w.vend(t, human, scope) // the default grant
	cs := w.connect(t, cred)
	names := toolNames(t, cs)
	for _, v := range []string{mcpserver.ToolListDigests, mcpserver.ToolSetDigest, mcpserver.ToolDeleteDigest} {
		require.NotContains(t, names, v)
		require.Equal(t, notifytype.CodeForbidden, refused(t, cs, v, map[string]any{}).Code, v)
	}
}

func TestGrantedEndpointManagesDigestsInItsScope(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	forge := w.F.Queue(scope, "forge")
	sink := w.sink(human, scope, "https://push.example.net")
	endpoint, cred := w.vend(t, human, scope, notifytype.GrantNotifications)
	cs := w.connect(t, cred)

	d := succeeds[mcpserver.DigestOut](t, cs, mcpserver.ToolSetDigest, map[string]any{
		"name": "morning", "schedule": "TZ=Europe/Berlin Mon-Fri 09:00", "sink_ids": []int64{sink}, "queue_ids": []int64{forge},
	})
	require.Equal(t, scope.String(), d.Owner)
	require.True(t, d.SkipWhenQuiet)
	require.Equal(t, endpoint, d.UpdatedByEndpointID)
	require.Equal(t, human, d.UpdatedByHumanID)
	require.NotNil(t, d.NextSendAt)

	e := refused(t, cs, mcpserver.ToolSetDigest, map[string]any{"id": d.ID, "schedule": "Mon-Fri 25:00"})
	require.Equal(t, notifytype.CodeInvalidArgument, e.Code)
	require.Equal(t, "schedule", e.Field)

	listed := succeeds[mcpserver.ListDigestsOut](t, cs, mcpserver.ToolListDigests, map[string]any{})
	require.Len(t, listed.Digests, 1)
	require.Equal(t, "TZ=Europe/Berlin Mon-Fri 09:00", listed.Digests[0].Schedule)

	// Another owner's digest and sink are out of reach.
	other, otherScope := w.person()
	theirSink := w.sink(other, otherScope, "https://push.example.org")
	e = refused(t, cs, mcpserver.ToolSetDigest, map[string]any{"name": "x", "schedule": "* 09:00", "sink_ids": []int64{theirSink}})
	require.Equal(t, "sink_ids", e.Field)
	_, otherCred := w.vend(t, other, otherScope, notifytype.GrantNotifications)
	ocs := w.connect(t, otherCred)
	require.Equal(t, notifytype.CodeNotFound, refused(t, ocs, mcpserver.ToolDeleteDigest, map[string]any{"id": d.ID}).Code)

	out := succeeds[mcpserver.DeleteDigestOut](t, cs, mcpserver.ToolDeleteDigest, map[string]any{"id": d.ID})
	require.True(t, out.Deleted)
	require.Zero(t, w.count(t, `SELECT count(*) FROM switchboard.digests`))
}
