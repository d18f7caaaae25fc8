package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
)

// TestDemoDigestPublishesToCairnAndLinksIt is make run's digest: the demo
// owner has one, to both receivers and the local Cairn stand-in; sending it
// now publishes the artifact and both receivers get the short message with
// its link.
func TestDemoDigestPublishesToCairnAndLinksIt(t *testing.T) {
	t.Parallel()
	s := newServer(t)

	_, body := s.get(t, "/api/v1/digests", s.token)
	var listed struct {
		Digests []struct {
			ID                int64   `json:"id"`
			Name              string  `json:"name"`
			SinkIDs           []int64 `json:"sink_ids"`
			CairnConnectionID int64   `json:"cairn_connection_id"`
		} `json:"digests"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &listed), body)
	require.Len(t, listed.Digests, 1, "a second Setup replaced the first run's digest")
	d := listed.Digests[0]
	require.Equal(t, "demo-morning", d.Name)
	require.Len(t, d.SinkIDs, 2)
	require.Positive(t, d.CairnConnectionID)

	req, err := http.NewRequest(http.MethodPost, s.url+"/api/v1/digests/"+jsonID(d.ID)+"/send", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var run struct {
		Outcome     string `json:"outcome"`
		ArtifactURL string `json:"artifact_url"`
		SinksQueued int    `json:"sinks_queued"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&run))
	resp.Body.Close()
	require.Equal(t, "sent", run.Outcome)
	require.Equal(t, 2, run.SinksQueued)
	require.NotEmpty(t, run.ArtifactURL)

	for range 2 {
		a := s.w.WaitFor(func(a engine.Attempt) bool { return a.EventType == engine.EventDigest })
		require.Equal(t, "delivered", a.State)
	}
	var gotify, apprise, cairn bool
	for _, m := range s.receivers.Inbox() {
		switch {
		case m.Receiver == "cairn":
			cairn = strings.Contains(m.Body, run.ArtifactURL) && strings.Contains(m.Body, "switchboard-digest")
		case m.Title == "Queue digest: demo-morning":
			require.Contains(t, m.Body, "Full digest: "+run.ArtifactURL)
			gotify = gotify || m.Receiver == "gotify"
			apprise = apprise || m.Receiver == "apprise"
		}
	}
	require.True(t, cairn && gotify && apprise, "%+v", s.receivers.Inbox())

	art, err := http.Get(run.ArtifactURL)
	require.NoError(t, err)
	defer art.Body.Close()
	require.Equal(t, http.StatusOK, art.StatusCode)
	buf := new(strings.Builder)
	_, _ = io.Copy(buf, art.Body)
	require.Contains(t, buf.String(), "# Digest demo-morning")
	require.Contains(t, buf.String(), "Covers 1 queue over the last 24 hours.", "a queue with nothing to say has no section of its own")
}

func jsonID(id int64) string { return strconv.FormatInt(id, 10) }
