package rest_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine/warnings"
)

// A connection (or a sink on one) whose base URL is an address the SSRF
// guard will refuse gets the web UI's warning in the answer to its create
// (or the sink's create and update): the same words, in "warning". The
// save goes through either way; an allowed or public address, and a read,
// carry no warning.
func TestConnectionAndSinkSavesWarnOfBlockedAddresses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, tok := b.human(t)
	type saved struct {
		ID      int64   `json:"id"`
		Warning *string `json:"warning"`
	}
	create := func(base string) saved {
		t.Helper()
		var s saved
		b.ok(t, http.StatusCreated, tok, "POST", "/api/v1/connections", map[string]any{
			"kind": "gotify", "name": "c-" + strconv.Itoa(b.count(t, "connections")), "base_url": base, "token": "gtfya.warn",
		}).into(t, &s)
		return s
	}

	private := create("https://10.20.0.5:8443")
	require.NotNil(t, private.Warning, "a private address the operator has not allowed is warned about")
	require.Equal(t, warnings.Destination(b.w.Ctx, b.eng, "https://10.20.0.5:8443"), *private.Warning, "the web UI's words")
	require.Contains(t, *private.Warning, "10.20.0.5")
	require.Contains(t, *private.Warning, "SWITCHBOARD_PRIVATE_HOSTS")
	require.Nil(t, create("https://127.0.0.1:8443").Warning, "loopback is allowed by this instance's SWITCHBOARD_PRIVATE_HOSTS")
	public := create("https://93.184.216.34")
	require.Nil(t, public.Warning)
	require.Equal(t, 3, b.count(t, "connections"), "warned or not, every connection is saved")

	var sink saved
	b.ok(t, http.StatusCreated, tok, "POST", "/api/v1/sinks", map[string]any{
		"name": "phone", "kind": "gotify", "connection_id": private.ID,
	}).into(t, &sink)
	require.NotNil(t, sink.Warning)
	require.Equal(t, *private.Warning, *sink.Warning)
	var read saved
	b.ok(t, http.StatusOK, tok, "GET", sinkPath(sink.ID, ""), nil).into(t, &read)
	require.Nil(t, read.Warning, "a read does not look the address up")
	var moved saved
	b.ok(t, http.StatusOK, tok, "PATCH", sinkPath(sink.ID, ""), map[string]any{"connection_id": public.ID}).into(t, &moved)
	require.Nil(t, moved.Warning, "moved to a public server: nothing to warn about")
	b.ok(t, http.StatusOK, tok, "PATCH", sinkPath(sink.ID, ""), map[string]any{"connection_id": private.ID}).into(t, &moved)
	require.NotNil(t, moved.Warning)
}

// Issue 18 item 12: the hosts inside a stateless Apprise connection's URLs
// are warned about as a private base URL is (the Apprise server connects
// to them, and the send refuses them as blocked), on the connection's
// create and on a sink's create over it; the warning never repeats the
// secret URL, its host or the host's address. A trailing-dot loopback is
// warned about although this instance allows loopback.
func TestAppriseConnectionSavesWarnOfPrivateHostsInsideURLs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, tok := b.human(t)
	type saved struct {
		ID      int64   `json:"id"`
		Warning *string `json:"warning"`
	}
	create := func(urls ...string) saved {
		t.Helper()
		var s saved
		b.ok(t, http.StatusCreated, tok, "POST", "/api/v1/connections", map[string]any{
			"kind": "apprise", "name": "a-" + strconv.Itoa(b.count(t, "connections")), "base_url": "https://93.184.216.34", "urls": urls,
		}).into(t, &s)
		return s
	}

	private := create("tgram://bot/1", "gotify://10.20.0.6/CANARYtok")
	require.NotNil(t, private.Warning)
	require.Contains(t, *private.Warning, "Apprise URL 2")
	require.Contains(t, *private.Warning, "SWITCHBOARD_PRIVATE_HOSTS")
	require.NotContains(t, *private.Warning, "10.20.0.6")
	require.NotContains(t, *private.Warning, "CANARY")
	dotted := create("gotify://127.0.0.1./CANARYtok")
	require.NotNil(t, dotted.Warning, "a trailing-dot loopback is blocked even where loopback is allowed")
	require.NotContains(t, *dotted.Warning, "CANARY")
	require.Nil(t, create("gotify://127.0.0.1/tok").Warning, "loopback is allowed by this instance's SWITCHBOARD_PRIVATE_HOSTS")
	require.Nil(t, create("tgram://bot/1", "ntfy://topic").Warning, "cloud services' tokens and topics are not hosts")
	require.Equal(t, 4, b.count(t, "connections"), "warned or not, every connection is saved")

	var sink saved
	b.ok(t, http.StatusCreated, tok, "POST", "/api/v1/sinks", map[string]any{
		"name": "apprise-phone", "kind": "apprise", "connection_id": private.ID,
	}).into(t, &sink)
	require.NotNil(t, sink.Warning)
	require.Equal(t, *private.Warning, *sink.Warning)
}
