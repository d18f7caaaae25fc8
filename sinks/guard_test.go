package sinks_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/sinktest"
)

func get(t *testing.T, client *http.Client, u string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	if err == nil {
		t.Cleanup(func() { sinks.Drain(resp.Body) })
	}
	return resp, err
}

func TestGuardRefusesLoopbackUnlessAllowlisted(t *testing.T) {
	t.Parallel()

	srv := sinktest.NewServer(t, nil)

	_, err := get(t, sinktest.Client(t, sinks.GuardConfig{AllowHTTP: true}), srv.URL)
	require.Error(t, err)
	require.Equal(t, notifytype.ClassBlocked, sinks.ClassifyError(err))
	require.Empty(t, srv.Requests(), "the guard refuses at dial time, before any byte is sent")

	// A name that resolves to loopback is refused too: the check is on
	// the address dialled, after resolution.
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	_, err = get(t, sinktest.Client(t, sinks.GuardConfig{AllowHTTP: true}), "http://localhost:"+itoa(port))
	require.Equal(t, notifytype.ClassBlocked, sinks.ClassifyError(err), "%v", err)

	// Another private range on the allowlist does not open loopback.
	_, err = get(t, sinktest.Client(t, sinks.GuardConfig{AllowHTTP: true, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}), srv.URL)
	require.Equal(t, notifytype.ClassBlocked, sinks.ClassifyError(err))
	require.Empty(t, srv.Requests())

	for _, prefix := range []string{"127.0.0.0/8", "::ffff:127.0.0.1/128"} {
		resp, err := get(t, sinktest.Client(t, sinks.GuardConfig{AllowHTTP: true, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix(prefix)}}), srv.URL)
		require.NoError(t, err, prefix)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	require.Len(t, srv.Requests(), 2)
}

func TestGuardRefusesIPv6LoopbackUnlessAllowlisted(t *testing.T) {
	t.Parallel()

	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skip("no IPv6 loopback here:", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	u := "http://" + l.Addr().String()

	_, err = get(t, sinktest.Client(t, sinks.GuardConfig{AllowHTTP: true, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}), u)
	require.Equal(t, notifytype.ClassBlocked, sinks.ClassifyError(err), "%v", err)

	resp, err := get(t, sinktest.Client(t, sinks.GuardConfig{AllowHTTP: true, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("::1/128")}}), u)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestGuardRefusesHTTPUnlessOptedIn(t *testing.T) {
	t.Parallel()

	srv := sinktest.NewServer(t, nil)
	loopback := sinktest.LoopbackPrefixes()

	_, err := get(t, sinktest.Client(t, sinks.GuardConfig{AllowedPrefixes: loopback}), srv.URL)
	require.ErrorIs(t, err, sinks.ErrInsecureScheme)
	require.Equal(t, notifytype.ClassBlocked, sinks.ClassifyError(err))
	require.Empty(t, srv.Requests())

	resp, err := get(t, sinktest.Client(t, sinks.GuardConfig{AllowedPrefixes: loopback, AllowHTTP: true}), srv.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	tlsSrv := sinktest.NewTLSServer(t, nil)
	resp, err = get(t, sinktest.Client(t, sinks.GuardConfig{AllowedPrefixes: loopback, RootCAs: tlsSrv.CertPool()}), tlsSrv.URL)
	require.NoError(t, err, "https needs no opt-in")
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestGuardDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()

	target := sinktest.NewServer(t, nil)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		srv := sinktest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/next", code)
		})
		resp, err := get(t, sinktest.Client(t, sinktest.Guard()), srv.URL)
		require.NoError(t, err)
		require.Equal(t, code, resp.StatusCode)
		require.Equal(t, notifytype.ClassRedirect, sinks.ClassifyStatus(resp.StatusCode))
		require.Len(t, srv.Requests(), 1)
	}
	require.Empty(t, target.Requests(), "the redirect target got a request")
}

func TestGuardIgnoresProxyEnvironment(t *testing.T) {
	t.Parallel()

	client := sinks.NewClient(sinks.GuardConfig{})
	t.Cleanup(client.CloseIdleConnections)
	_, err := get(t, client, "ftp://files.example.net/x")
	require.ErrorIs(t, err, sinks.ErrInsecureScheme)
}

func TestGuardTimeout(t *testing.T) {
	t.Parallel()

	srv := sinktest.NewServer(t, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	cfg := sinktest.Guard()
	cfg.Timeout = 100 * time.Millisecond
	_, err := get(t, sinktest.Client(t, cfg), srv.URL)
	require.Equal(t, notifytype.ClassTimeout, sinks.ClassifyError(err), "%v", err)
}

// The attempt's timeout covers the response body too: a server that sends
// its headers at once and then stalls mid-body is a timeout, not a send
// that waits for as long as the server likes.
func TestGuardTimeoutCoversTheBody(t *testing.T) {
	t.Parallel()

	srv := sinktest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"id":`))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second): // the body ends whole: the test fails, not hangs
		}
	})
	cfg := sinktest.Guard()
	cfg.Timeout = 100 * time.Millisecond
	resp, err := get(t, sinktest.Client(t, cfg), srv.URL)
	require.NoError(t, err, "the headers came at once")
	_, err = io.ReadAll(resp.Body)
	require.Error(t, err, "the body stalled past the attempt's timeout")
	require.Equal(t, notifytype.ClassTimeout, sinks.ClassifyError(err), "%v", err)
}

func TestCheckURL(t *testing.T) {
	t.Parallel()

	for _, ok := range []string{"https://push.example.net", "https://push.example.net/gotify/", "HTTPS://push.example.net:8443",
		"https://192.0.2.7", "https://[2001:db8::1]:8443", "https://0x1.example.net", "https://123.example.net"} {
		require.NoError(t, sinks.CheckURL(ok, false), ok)
	}
	require.NoError(t, sinks.CheckURL("http://push.example.net", true))

	for in, want := range map[string]error{
		"http://push.example.net":                   sinks.ErrInsecureScheme,
		"ftp://push.example.net":                    sinks.ErrInsecureScheme,
		"json://push.example.net":                   sinks.ErrInsecureScheme,
		"push.example.net":                          sinks.ErrInvalidURL,
		"/relative":                                 sinks.ErrInvalidURL,
		"https://":                                  sinks.ErrInvalidURL,
		"https://user:SECRETpw@push.example.net":    sinks.ErrInvalidURL,
		"https://push.example.net/?token=SECRETtok": sinks.ErrInvalidURL,
		"https://push.example.net/?":                sinks.ErrInvalidURL,
		"https://push.example.net/#SECRETfrag":      sinks.ErrInvalidURL,
		"https://push.example.net/%zz":              sinks.ErrInvalidURL,
		"https:push.example.net":                    sinks.ErrInvalidURL,
		"https://push.example.net\n/SECRETline":     sinks.ErrInvalidURL,
		// IPv4 addresses spelt other than dotted decimal: refused at save,
		// and blocked (final) at send, never retried as a network error.
		"https://2130706433":    sinks.ErrInvalidURL,
		"https://0177.0.0.1":    sinks.ErrInvalidURL,
		"https://127.1":         sinks.ErrInvalidURL,
		"https://0x7f.0.0.1":    sinks.ErrInvalidURL,
		"https://0X7F000001:80": sinks.ErrInvalidURL,
	} {
		err := sinks.CheckURL(in, false)
		require.ErrorIs(t, err, want, in)
		require.NotContains(t, err.Error(), "SECRET")
		require.NotContains(t, err.Error(), "push.example.net")
	}
}

func TestEndpointJoinsPaths(t *testing.T) {
	t.Parallel()

	for base, want := range map[string]string{
		"https://a.example":           "https://a.example/notify/ops",
		"https://a.example/":          "https://a.example/notify/ops",
		"https://a.example/apprise":   "https://a.example/apprise/notify/ops",
		"https://a.example/apprise//": "https://a.example/apprise/notify/ops",
	} {
		u, err := sinks.Endpoint(base, "notify", "ops")
		require.NoError(t, err)
		require.Equal(t, want, u.String(), base)
	}
	u, err := sinks.Endpoint("https://a.example/apprise", "notify/")
	require.NoError(t, err)
	require.Equal(t, "https://a.example/apprise/notify/", u.String(), "the trailing slash is kept")
}

func TestRedactError(t *testing.T) {
	t.Parallel()

	const full = "https://push.example.net/message?token=SECRETtok"
	cause := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	err := sinks.RedactError(&url.Error{Op: "Post", URL: full, Err: cause})
	require.Equal(t, "post request: dial tcp: connect: connection refused", err.Error())
	var op *net.OpError
	require.ErrorAs(t, err, &op, "a cause without the URL stays reachable")

	// A cause that repeats the URL is scrubbed, and still classifies.
	err = sinks.RedactError(&url.Error{Op: "Post", URL: full, Err: errors.Join(sinks.ErrInsecureScheme, errors.New("bad "+full))})
	require.NotContains(t, err.Error(), "SECRET")
	require.Contains(t, err.Error(), "<url>")
	require.ErrorIs(t, err, sinks.ErrInsecureScheme)
	for e := error(err); e != nil; e = errors.Unwrap(e) {
		require.NotContains(t, e.Error(), "SECRET")
	}

	// A timeout stays a timeout.
	err = sinks.RedactError(&url.Error{Op: "Post", URL: full, Err: timeoutErr{}})
	require.Equal(t, notifytype.ClassTimeout, sinks.ClassifyError(err))

	plain := errors.New("plain")
	require.Equal(t, plain, sinks.RedactError(plain))
	require.NoError(t, sinks.RedactError(nil))
}

// A real client error carries the request URL in *url.Error; the result
// built from it does not.
func TestErrorResultDropsRequestURL(t *testing.T) {
	t.Parallel()

	base := sinktest.RefusedURL(t)
	_, err := get(t, sinktest.Client(t, sinktest.Guard()), base+"/message?token=SECRETtok")
	require.ErrorContains(t, err, "SECRETtok", "the raw error does carry the URL")
	r := sinks.ErrorResult("gotify", err)
	require.Equal(t, notifytype.ClassNetwork, r.Class)
	require.NotContains(t, r.Err.Error(), "SECRETtok")
	require.NotContains(t, r.Err.Error(), "/message")
	require.True(t, strings.HasPrefix(r.Err.Error(), "error delivering to gotify (network): get request: dial tcp"), r.Err.Error())
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func itoa(n int) string { return strconv.Itoa(n) }

// TestGuardRefusesTrailingDotHosts: the guarded client itself refuses a
// loopback address or localhost spelt with a trailing dot as blocked, even
// with the loopback range allowed, instead of sending the name to DNS (a
// network error, retried) and sending nothing to the server.
func TestGuardRefusesTrailingDotHosts(t *testing.T) {
	t.Parallel()

	srv := sinktest.NewServer(t, nil)
	port := itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	client := sinktest.Client(t, sinks.GuardConfig{AllowHTTP: true, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	for _, host := range []string{"127.0.0.1.", "LOCALHOST.", "localhost."} {
		_, err := get(t, client, "http://"+host+":"+port+"/")
		require.Equal(t, notifytype.ClassBlocked, sinks.ClassifyError(err), "%s: %v", host, err)
	}
	require.Empty(t, srv.Requests())
}
