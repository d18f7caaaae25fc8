package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api"
	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
)

// edgeClient sends requests to addr from a local IP of its own, with
// optional forwarding headers, one connection each.
type edgeClient struct {
	t    *testing.T
	addr string
	s    *server
}

// req is one request: its peer IP, its forwarding header (name, value)
// and its credential.
type req struct {
	from       string
	fwdName    string
	fwdValue   string
	token      string
	hook       int64
	hookSecret string
}

func (c edgeClient) do(r req) int {
	c.t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(cmpOr(r.from, "127.0.0.1"))}}
	tr := &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	var hr *http.Request
	var err error
	if r.hook != 0 {
		body := []byte(`{"sender":{"login":"octocat"}}`)
		hr, err = http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s/hooks/%d", c.addr, r.hook), bytes.NewReader(body))
		require.NoError(c.t, err)
		host.Sign(notifytype.NewSecret(r.hookSecret), host.NewMessageID(), c.s.w.Clock.Now(), body).Set(hr.Header)
	} else {
		hr, err = http.NewRequest(http.MethodGet, "http://"+c.addr+"/api/v1/sinks", nil)
		require.NoError(c.t, err)
		if r.token != "" {
			hr.Header.Set("Authorization", "Bearer "+r.token)
		}
	}
	if r.fwdName != "" {
		hr.Header.Set(r.fwdName, r.fwdValue)
	}
	resp, err := (&http.Client{Transport: tr}).Do(hr)
	require.NoError(c.t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// createWebhook makes a webhook through the API and returns its id and
// secret.
func createWebhook(t *testing.T, s *server) (int64, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+"/api/v1/webhooks", bytes.NewReader([]byte(`{"name":"forge","trusted_senders":["octocat"]}`)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(out))
	var hook struct {
		ID     int64  `json:"id"`
		Secret string `json:"secret"`
	}
	require.NoError(t, json.Unmarshal(out, &hook))
	return hook.ID, hook.Secret
}

// Behind a reverse proxy (issue 24 item 6) the failed-auth limit keys on
// the client the configured proxy forwards, rightmost untrusted address
// first, so one client's forgeries lock out no other; a client cannot
// escape its bucket by writing forwarding headers, whether it prepends
// addresses through the proxy or talks to the server directly.
func TestFailedAuthLimitKeysOnTheClientATrustedProxyForwards(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	_, addr := serveServer(t, s.handler, api.ServerConfig{
		TrustedProxies: httpx.Proxies{netip.MustParsePrefix("127.0.0.1/32")}})
	c := edgeClient{t: t, addr: addr, s: s}
	xff := func(v string) req { return req{fwdName: "X-Forwarded-For", fwdValue: v} }

	attacker := xff("203.0.113.7")
	for i := range authFailuresBurst {
		r := attacker
		r.token = fmt.Sprintf("sbo_guess%d", i)
		require.Equal(t, http.StatusUnauthorized, c.do(r))
	}
	r := attacker
	r.token = "sbo_guess-more"
	require.Equal(t, http.StatusTooManyRequests, c.do(r), "the attacker's bucket is spent")
	// Prepending addresses does not move the attacker: the proxy's
	// rightmost entry is its own.
	r = xff("198.51.100.99, 203.0.113.7")
	r.token = "sbo_guess-spoofed"
	require.Equal(t, http.StatusTooManyRequests, c.do(r), "a spoofed left entry is not read")
	r = req{fwdName: "Forwarded", fwdValue: `for="203.0.113.7:4711";proto=https`, token: "sbo_guess-fwd"}
	require.Equal(t, http.StatusTooManyRequests, c.do(r), "Forwarded names the same client")

	// Other clients behind the same proxy are not limited.
	r = xff("198.51.100.1")
	r.token = "sbo_other-guess"
	require.Equal(t, http.StatusUnauthorized, c.do(r), "another client's failure is its own")
	r = xff("198.51.100.2")
	r.token = s.token
	require.Equal(t, http.StatusOK, c.do(r), "another client with a good token is served")
	// Nor is a valid credential from the attacker's own address.
	r = attacker
	r.token = s.token
	require.Equal(t, http.StatusOK, c.do(r), "a valid credential is never refused for its address's failures")

	// An untrusted peer's forwarding headers are not read: rotating them
	// does not give it a fresh bucket.
	for i := range authFailuresBurst {
		r := xff(fmt.Sprintf("192.0.2.%d", i+1))
		r.from, r.token = "127.0.0.2", fmt.Sprintf("sbo_direct%d", i)
		require.Equal(t, http.StatusUnauthorized, c.do(r))
	}
	r = xff("192.0.2.200")
	r.from, r.token = "127.0.0.2", "sbo_direct-more"
	require.Equal(t, http.StatusTooManyRequests, c.do(r), "a direct client's forwarding header is ignored")
}

// Failures of unauthenticated requests never lock out a valid credential
// (issue 24 item 6): once one address has spent its failures on forged
// deliveries, the same address's valid token and correctly signed
// delivery are served. A wrong credential counts against its own bucket
// too: the same wrong token, or forgeries against one webhook, from ever
// new addresses are answered 429 past the burst, while the webhook's
// correctly signed deliveries are still accepted.
func TestValidCredentialIsNeverLockedOutByOthersFailures(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	hookID, secret := createWebhook(t, s)
	_, addr := serveServer(t, s.handler, api.ServerConfig{})
	c := edgeClient{t: t, addr: addr, s: s}

	// One address spends its failures on forged deliveries.
	for range authFailuresBurst {
		require.Equal(t, http.StatusForbidden, c.do(req{from: "127.0.0.5", hook: 999999, hookSecret: "sbw_guess"}))
	}
	require.Equal(t, http.StatusTooManyRequests, c.do(req{from: "127.0.0.5", hook: 999999, hookSecret: "sbw_guess"}))
	require.Equal(t, http.StatusOK, c.do(req{from: "127.0.0.5", token: s.token}), "a valid token from the spent address")
	require.Equal(t, http.StatusAccepted, c.do(req{from: "127.0.0.5", hook: hookID, hookSecret: secret}), "a signed delivery from it")

	// The same wrong token from a new address each time.
	for i := range authFailuresBurst {
		require.Equal(t, http.StatusUnauthorized, c.do(req{from: fmt.Sprintf("127.0.1.%d", i+1), token: "sbo_stale"}))
	}
	require.Equal(t, http.StatusTooManyRequests, c.do(req{from: "127.0.1.100", token: "sbo_stale"}), "the token's own bucket is spent")
	require.Equal(t, http.StatusUnauthorized, c.do(req{from: "127.0.1.100", token: "sbo_fresh"}), "the new address is not limited")

	// Forgeries against one webhook from ever new addresses.
	for i := range authFailuresBurst {
		require.Equal(t, http.StatusForbidden, c.do(req{from: fmt.Sprintf("127.0.2.%d", i+1), hook: hookID, hookSecret: "sbw_guess"}))
	}
	require.Equal(t, http.StatusTooManyRequests, c.do(req{from: "127.0.2.100", hook: hookID, hookSecret: "sbw_guess"}),
		"the webhook's own bucket is spent")
	require.Equal(t, http.StatusAccepted, c.do(req{from: "127.0.2.100", hook: hookID, hookSecret: secret}),
		"the webhook's sender is not locked out")
	require.Equal(t, 2, s.w.F.Count(`SELECT count(*) FROM webhook_deliveries`), "only the signed deliveries were stored")
}
