package surface_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/sinks/sinktest"
)

const scenarioLoad = "7. load (REST API on loopback, Go driver)"

// Scenario 7: one human floods the API while others use it, senders post
// signed deliveries to /hooks/{id}, a sink's send test is pressed ten
// times, and the outbox drains under it all.
func TestLoadLimiterHoldsAndServerStaysResponsive(t *testing.T) {
	t.Parallel()
	duration, rowCount, hammers, probeCount := 3*time.Second, 500, 8, 6
	hookSenders, hookRate := 4, 10 // deliveries a second each
	if faults.Full() {
		duration, rowCount, hammers, hookSenders = 15*time.Second, 3000, 16, 8
	}
	s := newServer(t, serverOpts{realClock: true, limiter: httpx.NewLimiter(serveRatePerSecond, serveBurst)})
	ctx := context.Background()

	// The outbox load: rows for sinks whose budget is lifted.
	secrets := faults.PlantedSecrets()
	recv := faults.NewReceiver(t, secrets.GotifyToken)
	drainSinks, err := faults.SeedSinks(ctx, s.w.Pool, s.w.Key, recv.URL, secrets.GotifyToken, 4)
	require.NoError(t, err)

	hammer, tester := s.person(t), s.person(t)
	probes := make([]person, probeCount)
	for i := range probes {
		probes[i] = s.person(t)
	}
	// The /hooks/{id} load: a webhook whose rules notify four sinks of
	// their owner (budgets lifted, so every notify goes out).
	hookSinks, err := faults.SeedSinks(ctx, s.w.Pool, s.w.Key, recv.URL, secrets.GotifyToken, 4)
	require.NoError(t, err)
	var hookOwner person
	require.NoError(t, s.w.Pool.QueryRow(ctx, `SELECT h.id FROM switchboard.sinks k JOIN humans h ON k.owner = 'human:' || h.id WHERE k.id = $1`,
		hookSinks[0]).Scan(&hookOwner.id))
	hookOwner.scope = hostid.Human(hookOwner.id)
	tok, err := s.deps.Accounts.MintAPIToken(ctx, hookOwner.id)
	require.NoError(t, err)
	hookOwner.token = tok.Reveal()
	hooks := newHookLoad(t, s, hookOwner, hookSinks)

	target := sinktest.NewServer(t, nil)
	testSink := s.sink(t, tester, engine.KindGotify, s.connection(t, tester, map[string]any{
		"kind": "gotify", "account_key": target.URL, "token": secrets.GotifyToken}), nil)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	get := func(token string) (int, time.Duration) {
		req, _ := http.NewRequest(http.MethodGet, s.url+"/api/v1/sinks", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, time.Since(start)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}

	require.NoError(t, faults.InsertRows(ctx, s.w.Pool, drainSinks, rowCount))
	began := time.Now()
	deadline := began.Add(duration)
	var (
		hammerOK, hammerLimited, hammerOther atomic.Int64
		wg                                   sync.WaitGroup
		mu                                   sync.Mutex
		latencies                            []time.Duration
		probeBad                             []int
	)
	for range hammers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				switch code, _ := get(hammer.token); code {
				case http.StatusOK:
					hammerOK.Add(1)
				case http.StatusTooManyRequests:
					hammerLimited.Add(1)
				default:
					hammerOther.Add(1)
				}
			}
		}()
	}
	for _, p := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(250 * time.Millisecond) // 4/s: inside the 5/s share
			defer tick.Stop()
			for time.Now().Before(deadline) {
				code, d := get(p.token)
				mu.Lock()
				latencies = append(latencies, d)
				if code != http.StatusOK {
					probeBad = append(probeBad, code)
				}
				mu.Unlock()
				<-tick.C
			}
		}()
	}
	hooks.run(&wg, hookSenders, hookRate, deadline)
	// The send-test limit: ten presses in a row.
	var testOK, testLimited int
	for range 10 {
		status, body := s.do(t, request{method: http.MethodPost, path: fmt.Sprintf("/api/v1/sinks/%d/test", testSink), token: tester.token})
		switch status {
		case http.StatusOK:
			testOK++
		case http.StatusTooManyRequests:
			testLimited++
			require.Contains(t, body, "rate_limited")
		default:
			t.Errorf("send test answered %d: %s", status, body)
		}
	}
	wg.Wait()
	elapsed := time.Since(began)

	// The outbox drains afterwards, each row once (but the quarantine
	// storm's message, which waits out its 10-minute window).
	require.NoError(t, faults.WaitUntil(3*time.Minute, 50*time.Millisecond, func() (bool, error) {
		var open int
		err := s.w.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM switchboard.outbox_events) + (SELECT count(*) FROM switchboard.outbox
			WHERE state IN ('pending', 'held', 'claimed') AND event_type <> 'delivery.quarantined')`).Scan(&open)
		return open == 0, err
	}), "the outbox did not drain after the load")
	drained := time.Since(began)
	seen, _, dups := recv.Counts()
	lost, err := faults.Lost(ctx, s.w.Pool, seen)
	require.NoError(t, err)
	hooked := hooks.check(t, recv)

	slices.Sort(latencies)
	p50, p99 := percentile(latencies, 0.50), percentile(latencies, 0.99)
	allowed := int64(serveBurst) + int64(serveRatePerSecond*elapsed.Seconds()) + 1
	update(scenarioLoad, func(r *faults.Row) {
		r.Load = fmt.Sprintf("%d req from one human by %d workers in %.0f s, %d probe requests from %d others, "+
			"%d signed /hooks posts by %d senders at %d/s each, %d outbox rows, 10 send tests",
			hammerOK.Load()+hammerLimited.Load()+hammerOther.Load(), hammers, elapsed.Seconds(), len(latencies), probeCount,
			hooked.posted, hookSenders, hookRate, rowCount)
		r.Faults = "request flood over the per-human limit; send test pressed 10 times; forged signatures, 256 KiB+ bodies " +
			"and an untrusted sender's storm on /hooks/{id}"
		r.RowsLost, r.Duplicates = lost+hooked.lost, dups+hooked.dups
		r.BadInputs = hooked.bad
		r.SecretsFound += faults.CountCanary(append(s.allBodies(), s.w.Logs.String())...)
		r.Figures = append(r.Figures,
			fmt.Sprintf("flooding human: %d answered 200 (limit allows %d: burst %d + %d/s), %d answered 429", hammerOK.Load(), allowed, serveBurst, serveRatePerSecond, hammerLimited.Load()),
			fmt.Sprintf("other humans meanwhile: %d requests, all 200: p50 %.1f ms, p99 %.1f ms", len(latencies), ms(p50), ms(p99)),
			fmt.Sprintf("send test: %d sent, %d refused rate_limited (limit %d a minute per sink)", testOK, testLimited, engine.SendTestsPerMinute),
			fmt.Sprintf("outbox: %d rows and the rule notifies drained in %.1f s under the load, none lost, none twice", rowCount, drained.Seconds()))
		r.Figures = append(r.Figures, hooked.figures...)
	})
	rows.pending.Expect(t, "surface/hooks-load", hooked.p99 < 2*time.Second && hooked.lost == 0 && hooked.dups == 0,
		"/hooks/{id} under load: p99 %v (want under 2 s), %d rule notifies lost, %d sent twice", hooked.p99, hooked.lost, hooked.dups)

	require.Zero(t, hammerOther.Load(), "the flooding human got answers other than 200 and 429")
	require.LessOrEqual(t, hammerOK.Load(), allowed, "the per-human limiter let more through than its bucket")
	require.Positive(t, hammerLimited.Load(), "the flood was never limited")
	require.Empty(t, probeBad, "other humans were refused while one flooded")
	require.Less(t, p99, 2*time.Second, "p99 of other humans' requests")
	require.Equal(t, engine.SendTestsPerMinute, testOK, "send tests accepted")
	require.Equal(t, 10-engine.SendTestsPerMinute, testLimited)
	require.Zero(t, lost, "rows lost")
	require.Zero(t, dups, "no instance died: no row may be sent twice")
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
