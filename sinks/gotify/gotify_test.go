package gotify_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/jarcoal/httpmock"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/gotify"
	"github.com/switchboard/notify/sinks/sinktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newSink(base string, c sinktest.Canaries, client *http.Client) sinks.Adapter {
	return gotify.New(gotify.Config{BaseURL: base, Token: notifytype.NewSecret(c.GotifyToken)}, client)
}

func TestDeliverySuite(t *testing.T) {
	t.Parallel()

	sinktest.DeliverySuite{
		New: newSink,
		Statuses: map[int]notifytype.ErrorClass{
			http.StatusCreated:   notifytype.ClassNone, // any 2xx is success (REQ-3)
			http.StatusNoContent: notifytype.ClassNone,
		},
	}.Run(t)
}

func TestTokenStaysOutOfTheURL(t *testing.T) {
	t.Parallel()
	// Scenario: Token stays out of the URL

	srv := sinktest.NewServer(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"id": 1, "appid": 1, "message": "stored"}`))
	})
	canaries := sinktest.NewCanaries()
	g := newSink(srv.URL, canaries, sinktest.Client(t, sinktest.Guard()))

	r := g.Deliver(t.Context(), sinks.Message{Title: "[todo.dead_lettered] forge: build", Body: "line one\nline two", Severity: notifytype.SeverityHigh})
	require.True(t, r.OK(), "%v", r.Err)
	require.Equal(t, http.StatusOK, r.Status)

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	req := reqs[0]
	require.Equal(t, http.MethodPost, req.Method)
	require.Equal(t, "/message", req.RequestURI, "no query string, no token")
	require.NotContains(t, req.RequestURI, canaries.GotifyToken)
	require.Empty(t, req.RawQuery)
	require.Equal(t, canaries.GotifyToken, req.Header.Get("X-Gotify-Key"))
	require.Empty(t, req.Header.Get("Authorization"), "the token travels in X-Gotify-Key only")
	require.Equal(t, "application/json", req.Header.Get("Content-Type"))
	require.NotContains(t, string(req.Body), canaries.GotifyToken)

	var body map[string]any
	require.NoError(t, json.Unmarshal(req.Body, &body))
	require.Equal(t, map[string]any{
		"title":    "[todo.dead_lettered] forge: build",
		"message":  "line one\nline two",
		"priority": float64(8),
	}, body)
}

// A rendered message goes to Gotify as Markdown, with the content type
// that makes Gotify's clients render it and the board link as the
// notification's click URL (issue 19 item 10).
func TestMarkdownAndClickURL(t *testing.T) {
	t.Parallel()

	srv := sinktest.NewServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"id": 1}`)) })
	g := gotify.New(gotify.Config{BaseURL: srv.URL, Token: notifytype.NewSecret("gtfya.t")}, sinktest.Client(t, sinktest.Guard()))
	msg := sinks.Finish(sinks.Draft{Title: "Dead letter in forge: Build *red*",
		Lines:   []string{"A todo in queue forge dead-lettered after 3 attempts."},
		Details: []string{"Last attempt's summary (agent-written): gave up *now*"}, Link: "/board/todos/7", LinkText: "Open on the board"},
		sinks.Meta{EventType: "todo.dead_lettered", Severity: notifytype.SeverityHigh, BaseURL: "https://sb.example"}, "")
	require.True(t, g.Deliver(t.Context(), msg).OK())

	var body struct {
		Title   string
		Message string
		Extras  map[string]map[string]any
	}
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	require.NoError(t, json.Unmarshal(reqs[0].Body, &body))
	require.Equal(t, "Dead letter in forge: Build *red*", body.Title, "a title is plain text in Gotify")
	require.Equal(t, msg.Markdown, body.Message)
	require.Contains(t, body.Message, "gave up \\*now\\*", "agent-written text is escaped for Markdown")
	require.Equal(t, map[string]any{"contentType": "text/markdown"}, body.Extras[gotify.ExtrasDisplay])
	require.Equal(t, map[string]any{"click": map[string]any{"url": "https://sb.example/board/todos/7"}}, body.Extras[gotify.ExtrasNotification])

	// A message without Markdown or a link sends its plain body, no extras.
	require.True(t, g.Deliver(t.Context(), sinks.Message{Title: "t", Body: "plain *b*"}).OK())
	var plain map[string]any
	require.NoError(t, json.Unmarshal(srv.Requests()[1].Body, &plain))
	require.Equal(t, "plain *b*", plain["message"])
	require.NotContains(t, plain, "extras")
}

func TestPriorityFromOptions(t *testing.T) {
	t.Parallel()

	opts, err := gotify.ParseOptions(json.RawMessage(`{"priorities": {"low": 0, "high": 10}}`))
	require.NoError(t, err)
	for sev, want := range map[notifytype.Severity]float64{"low": 0, "normal": 5, "high": 10} {
		transport := httpmock.NewMockTransport()
		var got map[string]any
		transport.RegisterResponder(http.MethodPost, "https://push.example.net/message", func(req *http.Request) (*http.Response, error) {
			require.NoError(t, json.NewDecoder(req.Body).Decode(&got))
			return httpmock.NewStringResponse(http.StatusOK, `{}`), nil
		})
		g := gotify.New(gotify.Config{BaseURL: "https://push.example.net", Token: notifytype.NewSecret("t"), Options: opts}, &http.Client{Transport: transport})
		require.True(t, g.Deliver(t.Context(), sinks.Message{Title: "t", Body: "b", Severity: sev}).OK())
		require.Equal(t, want, got["priority"], sev)
	}
}

func TestBaseURLWithPathPrefix(t *testing.T) {
	t.Parallel()

	for _, base := range []string{"https://push.example.net/gotify", "https://push.example.net/gotify/", " https://push.example.net/gotify//"} {
		transport := httpmock.NewMockTransport()
		transport.RegisterResponder(http.MethodPost, "https://push.example.net/gotify/message", httpmock.NewStringResponder(http.StatusOK, `{}`))
		g := gotify.New(gotify.Config{BaseURL: base, Token: notifytype.NewSecret("t")}, &http.Client{Transport: transport})
		r := g.Deliver(t.Context(), sinks.RenderTest())
		require.True(t, r.OK(), "%q: %v", base, r.Err)
		require.Equal(t, 1, transport.GetTotalCallCount(), base)
	}
}

// A base URL that cannot be used (checked once, when the adapter is
// built) fails every attempt with the reason, sending nothing, and the
// reason never repeats the URL.
func TestAnUnusableBaseURLFailsEveryAttempt(t *testing.T) {
	t.Parallel()

	for base, want := range map[string]error{
		"ftp://push.example.net":             sinks.ErrInsecureScheme,
		"https://user:pw@push.example.net":   sinks.ErrInvalidURL,
		"https://push.example.net/?token=pw": sinks.ErrInvalidURL,
		"push.example.net":                   sinks.ErrInvalidURL,
	} {
		transport := httpmock.NewMockTransport()
		g := gotify.New(gotify.Config{BaseURL: base, Token: notifytype.NewSecret("t")}, &http.Client{Transport: transport})
		for range 2 {
			r := g.Deliver(t.Context(), sinks.RenderTest())
			require.ErrorIs(t, r.Err, want, base)
			require.NotContains(t, r.Err.Error(), "pw", base)
		}
		require.Zero(t, transport.GetTotalCallCount(), base)
	}
}

func TestStringHidesToken(t *testing.T) {
	t.Parallel()

	canaries := sinktest.NewCanaries()
	g := gotify.New(gotify.Config{BaseURL: "https://push.example.net/prefix", Token: notifytype.NewSecret(canaries.GotifyToken)}, http.DefaultClient)
	require.Equal(t, "gotify(https://push.example.net/prefix)", g.String())

	var c sinktest.Capture
	c.Record(g, *g, gotify.Config{Token: notifytype.NewSecret(canaries.GotifyToken)})
	c.Logger().Info("sink", "sink", g, "value", *g)
	sinktest.RequireNoLeak(t, canaries, &c)
	require.False(t, strings.Contains(c.String(), "gtfya."), c.String())
}
