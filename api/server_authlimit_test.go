package api_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
)

// The failed-authentication limit of the test servers: 20 in a row, one
// earned back a second.
const (
	authFailuresPerMinute = 60
	authFailuresBurst     = 20
)

// Failed authentication from one address is limited (issue 18 item 10):
// forged /hooks deliveries and wrong bearer tokens (API, MCP) spend one
// bucket; once it is empty every failure from that address is answered
// 429 with Retry-After, changing nothing, while a good credential is
// still served (issue 24 item 6); it recovers as the (fake) clock runs.
func TestFailedAuthenticationIsLimited(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	body := []byte(`{"sender":{"login":"octocat"}}`)
	do := func(method, path, token string, env *host.Envelope) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Sec-Fetch-Site", "same-origin") // the login form is posted by a browser
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if env != nil {
			env.Set(req.Header)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	forged := func() *host.Envelope {
		e := host.Sign(notifytype.NewSecret("sbw_guess"), host.NewMessageID(), s.w.Clock.Now(), body)
		return &e
	}

	// A request with no credential guesses nothing and spends nothing.
	for range authFailuresBurst + 5 {
		require.Equal(t, http.StatusUnauthorized, do("GET", "/api/v1/sinks", "", nil).StatusCode)
	}
	for i := range authFailuresBurst {
		switch i % 4 {
		case 3:
			require.Equal(t, http.StatusNotFound, do("POST", "/login/sbl_guess"+fmt.Sprint(i), "", nil).StatusCode)
		case 0:
			require.Equal(t, http.StatusForbidden, do("POST", "/hooks/999999", "", forged()).StatusCode)
		case 1:
			require.Equal(t, http.StatusUnauthorized, do("GET", "/api/v1/sinks", "sbo_guess"+fmt.Sprint(i), nil).StatusCode)
		case 2:
			require.Equal(t, http.StatusUnauthorized, do("POST", "/mcp", "sbe_guess"+fmt.Sprint(i), nil).StatusCode)
		}
	}
	// Spent: every failure from the address is answered 429 (issue 24
	// item 6: a good token is still served, never refused for its
	// address's failures).
	for name, resp := range map[string]*http.Response{
		"a bad API token":   do("GET", "/api/v1/sinks", "sbo_guess", nil),
		"an MCP credential": do("POST", "/mcp", "sbe_guess", nil),
		"a forged delivery": do("POST", "/hooks/999999", "", forged()),
		"the ops route":     do("GET", "/ops/actors", "sbo_guess-ops", nil),
		"a login link":      do("POST", "/login/sbl_guess", "", nil),
	} {
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, name)
		require.Equal(t, "1", resp.Header.Get("Retry-After"), name)
	}
	require.Equal(t, http.StatusOK, do("GET", "/api/v1/sinks", s.token, nil).StatusCode, "a good token is served")
	require.Zero(t, s.w.F.Count(`SELECT count(*) FROM webhook_deliveries`), "nothing was stored")

	// One failure is earned back a second.
	s.w.Clock.Advance(time.Second)
	require.Equal(t, http.StatusUnauthorized, do("GET", "/api/v1/sinks", "sbo_guess1", nil).StatusCode)
	require.Equal(t, http.StatusTooManyRequests, do("GET", "/api/v1/sinks", "sbo_guess2", nil).StatusCode)
	s.w.Clock.Advance(time.Duration(authFailuresBurst) * time.Second)
	for i := range authFailuresBurst - 1 {
		require.Equal(t, http.StatusUnauthorized, do("GET", "/api/v1/sinks", fmt.Sprint("sbo_again", i), nil).StatusCode, "the bucket refilled")
	}
	require.NotContains(t, s.w.Logs.String(), "sbo_guess")
	require.False(t, strings.Contains(s.w.Logs.String(), s.token))
}
