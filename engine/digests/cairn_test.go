package digests_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/sinktest"
)

// cairnServer is a Cairn stand-in (D20): limits of 3 days, artifacts
// answered 201, or status for every artifact when it is not 201.
func cairnServer(t *testing.T, token string, status int) *sinktest.Server {
	var srv *sinktest.Server
	srv = sinktest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/v1/limits":
			_, _ = w.Write([]byte(`{"max_ttl_seconds": 259200}`))
		case "/v1/artifacts":
			w.WriteHeader(status)
			if status == http.StatusCreated {
				_, _ = fmt.Fprintf(w, `{"id": "art-7", "url": "%s/a/art-7", "expires_at": "%s"}`,
					srv.URL, time.Now().Add(72*time.Hour).UTC().Format(time.RFC3339))
			}
		}
	})
	return srv
}

func cairnDigest(t *testing.T, status int) (digestWorld, *sinktest.Server, digests.Digest) {
	d := newDigestWorld(t)
	token := "cairn-bearer-" + sinktest.NewCanaries().GotifyToken
	srv := cairnServer(t, token, status)
	conn, err := d.eng.CreateConnection(d.w.Ctx, d.p, engine.ConnectionInput{
		Owner: d.scope, Kind: engine.KindCairn, Name: "cairn", BaseURL: srv.URL, Secret: notifytype.NewSecret(token),
	})
	require.NoError(t, err)
	deadTodo(t, d.w, d.queue, "nightly build")
	deadTodo(t, d.w, d.queue, "release build")
	dg := d.digest(t, digests.Input{Schedule: slotAgo(t, d.w, time.Minute), SinkIDs: []int64{d.sink}, CairnConnectionID: conn.ID})
	backdate(t, d.w, dg.ID)
	n, err := d.dgs.RunDue(d.w.Ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	return d, srv, dg
}

// deliverDigest serves an engine until the digest's row is delivered and
// returns the Gotify message.
func deliverDigest(t *testing.T, d digestWorld) gotifyMessage {
	t.Helper()
	digests.New(d.w.Serve(), withSources(d.w, false))
	a := d.w.WaitFor(func(a engine.Attempt) bool { return a.EventType == engine.EventDigest })
	require.Equal(t, "delivered", a.State)
	msgs := d.g.received()
	require.Len(t, msgs, 1)
	return msgs[0]
}

func TestDigestCairnLinked(t *testing.T) {
	t.Parallel()
	// Scenario: Cairn-linked digest
	d, srv, dg := cairnDigest(t, http.StatusCreated)

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	var body map[string]any
	require.NoError(t, json.Unmarshal(reqs[1].Body, &body))
	require.Equal(t, "text/markdown", body["content_type"])
	require.Equal(t, []any{"switchboard-digest"}, body["tags"])
	require.EqualValues(t, 3*24*3600, body["ttl_seconds"], "7 days capped at the server's 3")
	content := body["content"].(string)
	require.Contains(t, content, "# Digest morning")
	require.Contains(t, content, "## Queue forge")
	require.Regexp(t, `\[Dead letter: nightly build\]\(https://switchboard.example.net/board/todos/\d+\)`, content, "a Markdown link")

	msg := deliverDigest(t, d)
	require.Equal(t, "Queue digest: morning", msg.Title)
	require.Contains(t, msg.Message, srv.URL+"/a/art-7", "the artifact's link")
	require.Contains(t, msg.Message, "Needs attention: 2 dead letters.", "the headline counts")
	require.NotContains(t, msg.Message, "Queue forge", "a short message, not the full digest")
	require.NotContains(t, msg.Message, "nightly build")

	runs, err := d.dgs.Runs(d.w.Ctx, d.p, dg.ID, 1)
	require.NoError(t, err)
	require.Equal(t, srv.URL+"/a/art-7", runs[0].ArtifactURL)
	require.Empty(t, runs[0].CairnError)
}

func TestDigestCairnDownSendsTheFullDigestAndRecordsIt(t *testing.T) {
	t.Parallel()
	d, _, dg := cairnDigest(t, http.StatusInternalServerError)

	runs, err := d.dgs.Runs(d.w.Ctx, d.p, dg.ID, 1)
	require.NoError(t, err)
	require.Equal(t, "sent", runs[0].Outcome)
	require.Equal(t, "server (HTTP 500)", runs[0].CairnError)
	require.Empty(t, runs[0].ArtifactURL)

	msg := deliverDigest(t, d)
	require.Contains(t, msg.Message, "Queue forge:")
	require.Regexp(t, `- \[Dead letter: nightly build\]\(https://switchboard.example.net/board/todos/\d+\)`, msg.Message, "the title links its board page")
	require.Contains(t, msg.Message, "Needs attention: 2 dead letters.")
	require.False(t, strings.Contains(d.w.Logs.String(), "cairn-bearer-"), "the bearer never reaches a log")
}
