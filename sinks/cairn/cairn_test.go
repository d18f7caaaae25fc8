package cairn_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/cairn"
	"github.com/switchboard/notify/sinks/sinktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeCairn answers /v1/limits with maxTTL seconds and /v1/artifacts with
// 201 and an artifact, as D20 describes.
func fakeCairn(t *testing.T, maxTTL int64, token string) *sinktest.Server {
	var srv *sinktest.Server
	srv = sinktest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/limits":
			_, _ = fmt.Fprintf(w, `{"max_ttl_seconds": %d}`, maxTTL)
		case r.Method == http.MethodPost && r.URL.Path == "/v1/artifacts":
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, `{"id": "a1", "url": "%s/a/a1", "expires_at": "2030-01-01T00:00:00Z"}`, srv.URL)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	return srv
}

func TestPublishPostsAMarkdownArtifactWithTagAndCappedTTL(t *testing.T) {
	t.Parallel()
	token := "cairn-" + sinktest.NewCanaries().GotifyToken
	for name, tc := range map[string]struct {
		maxTTL int64
		want   int64
	}{
		"server allows more than 7 days": {maxTTL: 30 * 86400, want: 7 * 86400},
		"server caps at 2 days":          {maxTTL: 2 * 86400, want: 2 * 86400},
		"server sets no cap":             {maxTTL: 0, want: 7 * 86400},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := fakeCairn(t, tc.maxTTL, token)
			c := cairn.New(cairn.Config{BaseURL: srv.URL, Token: notifytype.NewSecret(token)}, sinktest.Client(t, sinktest.Guard()))
			a, err := c.Publish(t.Context(), "Digest morning", "# Digest\n- Pending: 3")
			require.NoError(t, err)
			require.Equal(t, "a1", a.ID)
			require.Equal(t, srv.URL+"/a/a1", a.URL)
			require.True(t, a.ExpiresAt.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))

			reqs := srv.Requests()
			require.Len(t, reqs, 2)
			require.Equal(t, "/v1/limits", reqs[0].Path)
			post := reqs[1]
			require.Equal(t, http.MethodPost, post.Method)
			require.Equal(t, "/v1/artifacts", post.Path)
			require.Empty(t, post.RawQuery, "the secret never travels in the URL")
			require.Equal(t, "Bearer "+token, post.Header.Get("Authorization"))
			var body map[string]any
			require.NoError(t, json.Unmarshal(post.Body, &body))
			require.Equal(t, "Digest morning", body["name"])
			require.Equal(t, "text/markdown", body["content_type"])
			require.Equal(t, "# Digest\n- Pending: 3", body["content"])
			require.EqualValues(t, tc.want, body["ttl_seconds"])
			require.Equal(t, []any{"switchboard-digest"}, body["tags"])
		})
	}
}

func TestPublishFailuresAreClassifiedAndRedacted(t *testing.T) {
	t.Parallel()
	canaries := sinktest.NewCanaries()
	for name, tc := range map[string]struct {
		status int
		class  notifytype.ErrorClass
	}{
		"server error": {http.StatusInternalServerError, notifytype.ClassServer},
		"unauthorized": {http.StatusUnauthorized, notifytype.ClassAuth},
		"ok not 201":   {http.StatusOK, notifytype.ClassRejected},
		"redirect":     {http.StatusFound, notifytype.ClassRedirect},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := sinktest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/limits" {
					_, _ = w.Write([]byte(`{"max_ttl_seconds": 86400}`))
					return
				}
				w.Header().Set("Location", "https://elsewhere.example.net/")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(canaries.MessageBody))
			})
			c := cairn.New(cairn.Config{BaseURL: srv.URL, Token: notifytype.NewSecret(canaries.GotifyToken)}, sinktest.Client(t, sinktest.Guard()))
			_, err := c.Publish(t.Context(), "d", canaries.MessageBody)
			require.Error(t, err)
			require.Equal(t, tc.class, cairn.ClassOf(err))
			capture := &sinktest.Capture{}
			capture.Logger().Error("publish failed", "cairn", c, "err", err)
			capture.Record(c, err)
			sinktest.RequireNoLeak(t, canaries, capture)
		})
	}
}

func TestPublishGoesThroughTheGuard(t *testing.T) {
	t.Parallel()
	srv := fakeCairn(t, 0, "t")
	// Without the loopback allowlist the guard refuses the dial.
	c := cairn.New(cairn.Config{BaseURL: srv.URL, Token: notifytype.NewSecret("t")},
		sinktest.Client(t, sinks.GuardConfig{AllowHTTP: true}))
	_, err := c.Publish(t.Context(), "d", "x")
	require.Equal(t, notifytype.ClassBlocked, cairn.ClassOf(err))
	require.Empty(t, srv.Requests())

	// Plain HTTP without the operator's opt-in is refused too.
	c = cairn.New(cairn.Config{BaseURL: srv.URL, Token: notifytype.NewSecret("t")},
		sinktest.Client(t, sinks.GuardConfig{AllowedPrefixes: sinktest.LoopbackPrefixes()}))
	_, err = c.Publish(t.Context(), "d", "x")
	require.Equal(t, notifytype.ClassBlocked, cairn.ClassOf(err))

	// A server that is down is a network failure.
	c = cairn.New(cairn.Config{BaseURL: sinktest.RefusedURL(t), Token: notifytype.NewSecret("t")}, sinktest.Client(t, sinktest.Guard()))
	_, err = c.Publish(t.Context(), "d", "x")
	require.Equal(t, notifytype.ClassNetwork, cairn.ClassOf(err))
}

func TestClientPrintsWithoutItsToken(t *testing.T) {
	t.Parallel()
	c := cairn.New(cairn.Config{BaseURL: "https://cairn.example.net", Token: notifytype.NewSecret("cnrysecret123456")}, http.DefaultClient)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", *c)} {
		require.False(t, strings.Contains(s, "cnrysecret123456"), s)
	}
}
