package apprise_test

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"testing"

	"github.com/jarcoal/httpmock"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/apprise"
	"github.com/switchboard/notify/sinks/sinktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// appriseStatuses are the answers Apprise gives meaning to (REQ-4).
var appriseStatuses = map[int]notifytype.ErrorClass{
	http.StatusNoContent:        notifytype.ClassConfig,
	http.StatusFailedDependency: notifytype.ClassPartial,
	http.StatusCreated:          notifytype.ClassNone,
}

func TestDeliverySuiteStateless(t *testing.T) {
	t.Parallel()

	sinktest.DeliverySuite{
		New: func(base string, c sinktest.Canaries, client *http.Client) sinks.Adapter {
			return apprise.New(apprise.Config{
				BaseURL: base,
				Secret:  apprise.Secret{URLs: c.AppriseURLs, Authorization: c.Authorization},
			}, client)
		},
		Statuses: appriseStatuses,
	}.Run(t)
}

func TestDeliverySuiteStateful(t *testing.T) {
	t.Parallel()

	sinktest.DeliverySuite{
		New: func(base string, c sinktest.Canaries, client *http.Client) sinks.Adapter {
			return apprise.New(apprise.Config{
				BaseURL: base,
				Secret:  apprise.Secret{Authorization: c.Authorization},
				Options: apprise.Options{ConfigKey: "ops"},
			}, client)
		},
		Statuses: appriseStatuses,
	}.Run(t)
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

func TestStatefulPostsToConfigKeyWithoutURLs(t *testing.T) {
	t.Parallel()

	srv := sinktest.NewServer(t, nil)
	canaries := sinktest.NewCanaries()
	opts, err := apprise.ParseOptions(json.RawMessage(`{"config_key": "ops", "tag": "devops, sre", "types": {"high": "warning"}}`))
	require.NoError(t, err)
	a := apprise.New(apprise.Config{BaseURL: srv.URL, Secret: apprise.Secret{Authorization: canaries.Authorization}, Options: opts}, sinktest.Client(t, sinktest.Guard()))

	r := a.Deliver(t.Context(), sinks.Message{Title: "T", Body: "B\nC", Severity: notifytype.SeverityHigh})
	require.True(t, r.OK(), "%v", r.Err)

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	req := reqs[0]
	require.Equal(t, http.MethodPost, req.Method)
	require.Equal(t, "/notify/ops", req.RequestURI)
	require.Equal(t, canaries.Authorization, req.Header.Get("Authorization"))
	require.Equal(t, "application/json", req.Header.Get("Accept"))
	require.Equal(t, "application/json", req.Header.Get("Content-Type"))
	require.Equal(t, "close", req.Header.Get("Connection"))
	require.Equal(t, map[string]any{"body": "B\nC", "title": "T", "type": "warning", "tag": "devops, sre", "format": "text"}, decode(t, req.Body))
	require.NotContains(t, string(req.Body), "urls")
}

func TestStatelessPostsURLs(t *testing.T) {
	t.Parallel()

	srv := sinktest.NewServer(t, nil)
	a := apprise.New(apprise.Config{
		BaseURL:  srv.URL + "/apprise",
		Secret:   apprise.Secret{URLs: []string{"tgram://bot/1", " mailto://u:p@x.example?to=a@x.example,b@x.example "}},
		Resolver: staticDNS{"x.example": {netip.MustParseAddr("93.184.216.34")}},
	}, sinktest.Client(t, sinktest.Guard()))

	for sev, typ := range map[notifytype.Severity]string{"low": "info", "normal": "warning", "high": "failure"} {
		r := a.Deliver(t.Context(), sinks.Message{Title: "T", Body: "B", Severity: sev})
		require.True(t, r.OK(), "%v", r.Err)
		reqs := srv.Requests()
		req := reqs[len(reqs)-1]
		require.Equal(t, "/apprise/notify/", req.RequestURI)
		require.Empty(t, req.Header.Values("Authorization"), "no authorization unless the secret has one")
		require.Equal(t, map[string]any{
			"urls":   "tgram://bot/1, mailto://u:p@x.example?to=a@x.example,b@x.example",
			"body":   "B",
			"title":  "T",
			"type":   typ,
			"format": "text",
		}, decode(t, req.Body), "no tag unless set")
	}
}

func TestStatelessThroughHTTPMock(t *testing.T) {
	t.Parallel()

	transport := httpmock.NewMockTransport()
	var got map[string]any
	transport.RegisterResponder(http.MethodPost, "https://apprise.example.net/notify/", func(req *http.Request) (*http.Response, error) {
		require.True(t, req.Close, "each request asks for Connection: close")
		require.NoError(t, json.NewDecoder(req.Body).Decode(&got))
		return httpmock.NewStringResponse(http.StatusFailedDependency, `{"error": "one or more notifications failed", "details": [["ERROR", "t", "tgram://bot/1 failed"]]}`), nil
	})
	a := apprise.New(apprise.Config{BaseURL: "https://apprise.example.net", Secret: apprise.Secret{URLs: []string{"tgram://bot/1"}}}, &http.Client{Transport: transport})
	r := a.Deliver(t.Context(), sinks.RenderTest())
	require.Equal(t, notifytype.ClassPartial, r.Class)
	require.Equal(t, http.StatusFailedDependency, r.Status)
	require.NotContains(t, r.Err.Error(), "tgram", "the response's details are not repeated")
	require.Equal(t, "tgram://bot/1", got["urls"])
	require.Equal(t, sinks.TestTitle, got["title"])
}

func TestMisconfiguredSinkIsAConfigErrorWithoutARequest(t *testing.T) {
	t.Parallel()

	srv := sinktest.NewServer(t, nil)
	client := sinktest.Client(t, sinktest.Guard())
	for name, cfg := range map[string]apprise.Config{
		"neither key nor urls": {BaseURL: srv.URL},
		"both key and urls":    {BaseURL: srv.URL, Options: apprise.Options{ConfigKey: "ops"}, Secret: apprise.Secret{URLs: []string{"tgram://b/1"}}},
		"bad key":              {BaseURL: srv.URL, Options: apprise.Options{ConfigKey: "../admin"}},
	} {
		r := apprise.New(cfg, client).Deliver(t.Context(), sinks.RenderTest())
		require.Equal(t, notifytype.ClassConfig, r.Class, name)
		require.True(t, r.Class.Final(), name)
		require.Error(t, r.Err, name)
	}
	require.Empty(t, srv.Requests())
}

func TestStringHidesSecret(t *testing.T) {
	t.Parallel()

	canaries := sinktest.NewCanaries()
	cfg := apprise.Config{BaseURL: "https://apprise.example.net", Secret: apprise.Secret{URLs: canaries.AppriseURLs, Authorization: canaries.Authorization}}
	a := apprise.New(cfg, http.DefaultClient)
	require.Equal(t, "apprise(https://apprise.example.net 2 urls)", a.String())
	cfg.Options.ConfigKey = "ops"
	cfg.Secret.URLs = nil
	require.Equal(t, "apprise(https://apprise.example.net key ops)", apprise.New(cfg, http.DefaultClient).String())

	var c sinktest.Capture
	c.Record(a, *a, cfg, cfg.Secret)
	c.Logger().Info("sink", "sink", a, "value", *a, "config", cfg)
	sinktest.RequireNoLeak(t, canaries, &c)
}
