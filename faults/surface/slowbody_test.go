package surface_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api"
	"github.com/switchboard/notify/api/ops"
	"github.com/switchboard/notify/faults"
)

// Row 7d (issue 24 item 5): slow bodies inside the per-client share. 9
// loopback addresses (127.0.0.2…10) × their whole share of connections,
// each a complete POST /hooks/1 header with Content-Length: 1000 and one
// body byte every 2 s, reconnecting as soon as the server cuts it, on the
// production bounds (1000 connections, 125 a client): together they want
// more connections than the server has (short: a tenth of the bounds and
// of the attack, for the race detector on the CI box). Meanwhile another client opens a
// new connection every 250 ms and asks GET /api/v1/sinks with its token;
// each answer must come in under 1 s (on main e6a7fa7 it waited 29.9 s,
// the read timeout). Full: 30 s of attack; short: 6 s.
func TestSlowBodiesFromNineAddressesLeaveAnotherClientServed(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{realClock: true})
	p := s.person(t)
	handler := api.NewHandler(s.deps, api.Options{Metrics: ops.NewMetrics(s.w.Pool, s.eng.AllSinkStatuses)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	// Full: the production bounds (1,000 connections, 125 a client).
	// Short (make test, under the race detector on the CI box): a tenth of
	// them, the same proportions.
	cfg := api.ServerConfig{}.WithDefaults()
	if !faults.Full() {
		cfg = api.ServerConfig{MaxConns: cfg.MaxConns / 10}.WithDefaults()
	}
	var arrived atomic.Int64
	inner := handler
	handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/sinks" {
			arrived.Store(time.Now().UnixNano())
		}
		inner.ServeHTTP(w, r)
	})
	srv := api.NewServer(handler, cfg)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()

	attackFor := 6 * time.Second
	if faults.Full() {
		attackFor = 30 * time.Second
	}
	const addresses, bytePeriod = 9, 2 * time.Second
	perAddress := cfg.MaxConnsPerClient
	stop := make(chan struct{})
	var opened, held atomic.Int64
	var wg sync.WaitGroup
	header := "POST /hooks/1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
	// attack holds one slow body from ip, reconnecting when it is cut,
	// until stop.
	attack := func(ip string) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond): // pacing the load, not synchronising
				}
				continue
			}
			opened.Add(1)
			cut := make(chan struct{})
			go func() { _, _ = io.Copy(io.Discard, c); close(cut) }()
			if _, err := io.WriteString(c, header); err == nil {
				held.Add(1)
				tick := time.NewTicker(bytePeriod)
			body:
				for {
					if _, err := io.WriteString(c, "x"); err != nil {
						break
					}
					select {
					case <-stop:
						break body
					case <-cut:
						break body
					case <-tick.C:
					}
				}
				tick.Stop()
			}
			_ = c.Close()
			<-cut
		}
	}
	for i := range addresses {
		ip := fmt.Sprintf("127.0.0.%d", i+2)
		for range perAddress {
			wg.Go(func() { attack(ip) })
		}
	}
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	})

	// The attack has taken the server when its connections fill the cap.
	require.Eventually(t, func() bool { return held.Load() >= int64(cfg.MaxConns) }, 30*time.Second, 10*time.Millisecond,
		"the attack did not get to %d connections", cfg.MaxConns)

	var waits, reads []time.Duration
	var mu sync.Mutex
	// probe answers the status, how long it waited, and what went wrong
	// when it got no answer.
	probe := func() (int, time.Duration, error) {
		start := time.Now()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.20")}, Timeout: 40 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return 0, time.Since(start), err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(40 * time.Second))
		if _, err := io.WriteString(c, "GET /api/v1/sinks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+p.token+"\r\nConnection: close\r\n\r\n"); err != nil {
			return 0, time.Since(start), err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, time.Since(start), err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		mu.Lock()
		reads = append(reads, time.Unix(0, arrived.Load()).Sub(start))
		mu.Unlock()
		return resp.StatusCode, time.Since(start), nil
	}
	deadline := time.Now().Add(attackFor)
	var failed []string
	pace := time.NewTicker(250 * time.Millisecond) // the probes' pace, not a synchronisation
	defer pace.Stop()
	for time.Now().Before(deadline) {
		status, wait, err := probe()
		if status != http.StatusOK {
			failed = append(failed, fmt.Sprintf("%d after %v (%v)", status, wait, err))
		}
		waits = append(waits, wait)
		<-pace.C
	}
	close(stop)
	wg.Wait()

	t.Logf("probe waits: %v; read by the server after: %v", waits, reads)
	slices.Sort(waits)
	slices.Sort(reads)
	worst, p50 := waits[len(waits)-1], waits[len(waits)/2]
	require.Empty(t, failed, "every probe is answered 200")
	// The bound of the issue holds in the full run (make faults, no race
	// detector). The short run (make test: -race, the CI box, scaled
	// down) checks the mechanism against the read timeout main waited out
	// (29.9 s): a third of it, as a request's own time under the race
	// detector on a busy box is seconds.
	bound := time.Second
	if !faults.Full() {
		bound = cfg.ReadTimeout / 3
	}
	require.Less(t, worst, bound, "another client waits under %s", bound)
	require.Zero(t, s.w.F.Count(`SELECT count(*) FROM webhook_deliveries`))
	faults.Report(t, faults.Row{
		Scenario: "7d. slow bodies from 9 addresses (issue 24 item 5)",
		Load: fmt.Sprintf("%d × %d connections from 127.0.0.2…10, each POST /hooks/1 with Content-Length: 1000 and a byte every 2 s, "+
			"reconnecting, for %s; bounds %d conns, %d a client; %d probes from another client",
			addresses, perAddress, attackFor, cfg.MaxConns, perAddress, len(waits)),
		Faults:    "slow request bodies filling every connection",
		BadInputs: int(opened.Load()), RowsLost: faults.NotApplicable, Duplicates: faults.NotApplicable,
		SecretsFound: strings.Count(s.w.Logs.String(), p.token),
		Figures: []string{
			fmt.Sprintf("another client's GET /api/v1/sinks on a new connection: p50 %s, worst %s over %d probes, all 200 (bound %s); "+
				"its request read by the server after p50 %s, worst %s",
				p50.Round(time.Millisecond), worst.Round(time.Millisecond), len(waits), bound,
				reads[len(reads)/2].Round(time.Millisecond), reads[len(reads)-1].Round(time.Millisecond)),
			fmt.Sprintf("%d slow-body connections opened; %d shed at accept to let a newcomer in, %d bodies cut for their rate, "+
				"%d unauthenticated connections closed to free the reserve, %d closed past a client's share",
				opened.Load(), srv.ConnsShed(), srv.SlowBodies(), srv.ConnsEvicted(), srv.ConnsRefused()),
		},
	})
}
