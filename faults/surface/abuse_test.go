package surface_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api"
	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/ops"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// Row 7b (issue 18 item 9): a captured signed delivery replayed, within
// its 5 minutes and after them, and deliveries signed too far in the past
// or future, through the assembled server on a fake clock.
func TestReplayedAndStaleDeliveriesAreRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	p := s.person(t)
	hook, secret, err := s.deps.Webhooks.Create(s.w.Ctx, engine.HumanPrincipal(hostid.String(p.id)),
		host.WebhookInput{Owner: p.scope, Name: "forge", TrustedSenders: []string{"octocat"}})
	require.NoError(t, err)
	url := fmt.Sprintf("%s/hooks/%d", s.url, hook.ID)
	post := func(body []byte, env host.Envelope) (int, string) {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		require.NoError(t, err)
		env.Set(req.Header)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	body := []byte(`{"sender":{"login":"octocat"},"issue":{"number":1,"title":"captured"}}`)
	captured := host.Sign(secret, host.NewMessageID(), s.w.Clock.Now(), body)
	status, out := post(body, captured)
	require.Equal(t, http.StatusAccepted, status, out)

	const replays = 50
	duplicates, stale := 0, 0
	for i := range replays {
		if i == replays/2 {
			s.w.Clock.Advance(host.SignatureTolerance + time.Second)
		}
		status, out := post(body, captured)
		switch {
		case status == http.StatusOK && strings.Contains(out, `"duplicate"`):
			duplicates++
		case status == http.StatusForbidden:
			stale++
		default:
			t.Errorf("replay %d answered %d %s", i, status, out)
		}
	}
	now := s.w.Clock.Now()
	skewed := 0
	for _, at := range []time.Time{now.Add(-6 * time.Minute), now.Add(6 * time.Minute), now.Add(-24 * time.Hour), now.Add(48 * time.Hour)} {
		status, _ := post(body, host.Sign(secret, host.NewMessageID(), at, body))
		require.Equal(t, http.StatusForbidden, status)
		skewed++
	}
	stored := s.w.F.Count(`SELECT count(*) FROM webhook_deliveries`)
	require.Equal(t, 1, stored, "only the first delivery is stored")
	require.Equal(t, replays/2, duplicates)
	require.Equal(t, replays/2, stale)
	require.NotContains(t, s.w.Logs.String(), secret.Reveal())
	faults.Report(t, faults.Row{
		Scenario:  "7b. replayed and stale /hooks deliveries (issue 18 item 9)",
		Load:      fmt.Sprintf("1 signed delivery captured, replayed %d times; %d signed ±6 min to 2 days off", replays, skewed),
		Faults:    "replay within the 5-minute tolerance, replay after it, stale and future timestamps",
		BadInputs: replays + skewed, RowsLost: faults.NotApplicable, Duplicates: stored - 1,
		SecretsFound: strings.Count(s.w.Logs.String(), secret.Reveal()),
		Figures: []string{fmt.Sprintf("%d replays answered duplicate (200, nothing done), %d refused stale (403), %d delivery stored",
			duplicates, stale, stored)},
	})
}

// Row 7c (issue 18 item 10): one client opens 1,000 keep-alive connections
// and leaves them idle; another is still served. Then one address floods
// forged deliveries and bad tokens; it is answered 429 and changes nothing,
// while another address's good token is served.
func TestConnectionHoardAndAuthFloodAreContained(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{realClock: true})
	p := s.person(t)
	deps := s.deps
	deps.AuthFailures = httpx.NewAuthFailures(httpx.AuthFailuresPerMinuteDefault, httpx.AuthFailuresBurstDefault, nil)
	auth := *deps.Auth
	auth.Failures = deps.AuthFailures
	deps.Auth = &auth
	handler := api.NewHandler(deps, api.Options{Metrics: ops.NewMetrics(s.w.Pool, s.eng.AllSinkStatuses)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := api.ServerConfig{IdleTimeout: time.Minute} // production defaults: 1,000 conns, 125 a client
	srv := api.NewServer(handler, cfg)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()
	dial := func(ip string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err == nil {
			t.Cleanup(func() { _ = c.Close() })
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		}
		return c, err
	}
	get := func(c net.Conn, path, token string) int {
		req := "GET " + path + " HTTP/1.1\r\nHost: x\r\n"
		if token != "" {
			req += "Authorization: Bearer " + token + "\r\n"
		}
		if _, err := io.WriteString(c, req+"\r\n"); err != nil {
			return 0
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	const hoard = 1000
	var mu sync.Mutex
	held := 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, 100)
	for range hoard {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := dial("127.0.0.1")
			if err == nil && get(c, "/login", "") == http.StatusOK {
				mu.Lock()
				held++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	share := cfg.WithDefaults().MaxConnsPerClient
	require.LessOrEqual(t, held, share, "one client holds at most its share")
	other, err := dial("127.0.0.2")
	require.NoError(t, err)
	start := time.Now()
	require.Equal(t, http.StatusOK, get(other, "/api/v1/sinks", p.token), "another client is served")
	served := time.Since(start)

	// The flood, from one address.
	const flood = 300
	limited := 0
	for i := range flood {
		c, err := dial("127.0.0.3")
		require.NoError(t, err)
		var status int
		if i%2 == 0 {
			status = get(c, "/api/v1/sinks", fmt.Sprintf("sbo_guess%d", i))
		} else {
			body := []byte(`{"sender":{"login":"octocat"}}`)
			env := host.Sign(notifytype.NewSecret("sbw_guess"), host.NewMessageID(), time.Now(), body)
			req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s/hooks/%d", addr, i), bytes.NewReader(body))
			env.Set(req.Header)
			_ = req.Write(c)
			resp, err := http.ReadResponse(bufio.NewReader(c), req)
			if err == nil {
				status = resp.StatusCode
				resp.Body.Close()
			}
		}
		if status == http.StatusTooManyRequests {
			limited++
		}
		_ = c.Close()
	}
	require.GreaterOrEqual(t, limited, flood-httpx.AuthFailuresBurstDefault-2, "past the burst the flood is answered 429")
	good, err := dial("127.0.0.4")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, get(good, "/api/v1/sinks", p.token), "another address is not limited")
	require.Zero(t, s.w.F.Count(`SELECT count(*) FROM webhook_deliveries`))
	require.NotContains(t, s.w.Logs.String(), p.token)
	faults.Report(t, faults.Row{
		Scenario: "7c. connection hoard and failed-auth flood (issue 18 item 10)",
		Load: fmt.Sprintf("%d idle keep-alive connections from one client, production cap (%d, %d a client); %d forged deliveries and bad tokens from one address",
			hoard, cfg.WithDefaults().MaxConns, share, flood),
		Faults:    "connection hoarding by one client; a credential-guessing flood",
		BadInputs: hoard + flood, RowsLost: faults.NotApplicable, Duplicates: faults.NotApplicable,
		SecretsFound: strings.Count(s.w.Logs.String(), p.token),
		Figures: []string{
			fmt.Sprintf("the hoarder held %d connections, %d closed at accept; another client served in %s", held, srv.ConnsRefused(), served.Round(time.Millisecond)),
			fmt.Sprintf("%d of %d flood requests answered 429 with Retry-After; a good token from another address served", limited, flood),
		},
	})
}
