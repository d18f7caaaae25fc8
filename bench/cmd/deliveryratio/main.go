// Command deliveryratio measures the delivery engine end to end against a
// plain HTTP client posting to the same Gotify stand-in (an httptest server
// on loopback answering 200), in one run on a fresh database:
//
//   - throughput: -n todo.dead_lettered events, each committed in its own
//     transaction (BEGIN, Emit, COMMIT) one after another, for an owner with
//     S subscribed sinks (-sinks), so n·S deliveries; deliveries/s from the
//     start of the first transaction to the stand-in receiving the last
//     message. Baseline: the same n·S POSTs by a net/http loop with S
//     requests in flight, as the engine has S sink actors, each one in
//     flight.
//   - commit-to-send latency: -latency-n single events, each committed when
//     the previous one was delivered and recorded (the engine idle), timed
//     from COMMIT returning to the stand-in receiving the request; with
//     NotifyDebounce at its default and at -1 (a NOTIFY on every emit).
//     Baseline: one POST's latency to the stand-in.
//
// One engine serves at a time, started fresh for each measurement on a
// pool of its own, on the real clock, PollInterval and NotifyDebounce at
// their defaults (but for the -1 latency variant), and budgets raised to
// operator bounds that never limit. The measurements run interleaved in
// rounds, in an order reversed every other round; the figures are medians
// over the rounds. Afterwards one delivery's statements are replayed one
// at a time with no engine serving (steps.go), to show where the time goes.
//
// It creates a fresh database sbbench_<random> on the server of
// DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable),
// migrates it with host.Migrate, and drops it at the end (unless -keep).
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard/notify/bench/internal/benchdb"
	"github.com/switchboard/notify/engine"
)

var (
	rounds     = flag.Int("rounds", 3, "rounds of every measurement")
	n          = flag.Int("n", 200, "events per throughput run (each delivered to every sink)")
	sinksFlag  = flag.String("sinks", "1,10", "sink counts of the throughput runs, comma separated (at most 10: the management ceiling)")
	latencyN   = flag.Int("latency-n", 100, "events per latency run")
	latencyGap = flag.Duration("latency-gap", 0, "pause between an event's recorded attempt and the next commit")
	timeout    = flag.Duration("timeout", 90*time.Second, "bound on one throughput run")
	conns      = flag.Int("engine-conns", 0, "engine pool size (0: the server binary's default, store.PoolMaxConnsDefault)")
	keep       = flag.Bool("keep", false, "keep the database at the end, to inspect")
	trace      = flag.Bool("trace", false, "print when the claimer handed rows to actors during throughput runs (per 100 ms)")
)

func main() {
	flag.Parse()
	counts, err := parseSinks(*sinksFlag)
	if err != nil || *rounds < 1 || *n < 1 || *latencyN < 1 {
		fmt.Fprintln(os.Stderr, "deliveryratio: -rounds, -n and -latency-n must be at least 1; -sinks a list of 1..10:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), counts); err != nil {
		fmt.Fprintln(os.Stderr, "deliveryratio:", err)
		os.Exit(1)
	}
}

func parseSinks(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 || v > engine.MaxSinksPerScopeDefault {
			return nil, fmt.Errorf("bad sink count %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// item is one measurement of a round.
type item struct {
	name string
	run  func(context.Context) (result, error)
}

// result is one measurement's figures.
type result struct {
	rate float64 // deliveries or POSTs per second (throughput)
	// throughput details
	emitRate  float64 // events committed per second
	atEmitEnd int     // messages received when the last event committed
	newConns  int64   // TCP connections the stand-in accepted
	claims    float64 // rows claimed per delivery (1: no row claimed twice)
	// latency, in ms
	p50, p90, p99 float64
	notified      int     // events whose emit sent a NOTIFY
	wake          float64 // median commit → NOTIFY seen (notified events)
	claim         float64 // median commit → row claimed (notified events)
	send          float64 // median claim → request received (all events)
	claimAll      float64 // median commit → row claimed (all events)
}

func run(ctx context.Context, counts []int) (err error) {
	admin := cmp.Or(os.Getenv("DATABASE_URL"), benchdb.DefaultAdminURL)
	dbURL, drop, err := benchdb.Create(ctx, admin)
	if err != nil {
		return err
	}
	defer func() {
		if *keep {
			fmt.Printf("\ndatabase kept: %s\n", dbURL)
			return
		}
		if derr := drop(); derr != nil && err == nil {
			err = derr
		}
	}()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := newWorld(lctx, dbURL, append([]int{1}, counts...), *conns)
	if err != nil {
		return err
	}
	defer w.host.Close()
	defer w.gs.Close()

	var version, settings string
	if err := w.host.QueryRow(ctx, `SELECT version(), format('fsync %s, synchronous_commit %s, autovacuum %s, shared_buffers %s',
		current_setting('fsync'), current_setting('synchronous_commit'), current_setting('autovacuum'),
		current_setting('shared_buffers'))`).Scan(&version, &settings); err != nil {
		return err
	}
	pc := *conns
	if pc == 0 {
		pc = max(4, runtime.NumCPU())
	}
	fmt.Printf("machine: %d CPUs (GOMAXPROCS %d), %s/%s, %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Printf("server:  %s\n         %s\n", version, settings)
	fmt.Printf("engine:  PollInterval %v, NotifyDebounce %v, pool of %d connections, budgets %d/h burst %d\n",
		engine.PollIntervalDefault, engine.NotifyDebounceDefault, pc, budgetPerHour, budgetBurst)
	fmt.Printf("run:     %d rounds; throughput %d events x sinks %v; latency %d events per variant, gap %v\n\n",
		*rounds, *n, counts, *latencyN, *latencyGap)

	var items []item
	for _, s := range counts {
		items = append(items,
			item{fmt.Sprintf("engine_%d", s), func(ctx context.Context) (result, error) { return w.throughputEngine(ctx, s) }},
			item{fmt.Sprintf("plain_%d", s), func(ctx context.Context) (result, error) { return w.throughputPlain(ctx, s) }})
	}
	latency := []item{
		{"latency_debounce", func(ctx context.Context) (result, error) { return w.latencyEngine(ctx, 0) }},
		{"latency_every", func(ctx context.Context) (result, error) { return w.latencyEngine(ctx, -1) }},
		{"latency_plain", w.latencyPlain},
		{"latency_commit", w.latencyCommit},
	}
	items = append(items, latency...)

	res := map[string][]result{}
	began := time.Now()
	for r := range *rounds {
		order := slices.Clone(items)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, it := range order {
			t := time.Now()
			x, err := it.run(ctx)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, it.name, err)
			}
			res[it.name] = append(res[it.name], x)
			fmt.Printf("round %d %-17s %s  (%.1fs)\n", r+1, it.name, x.line(it.name), time.Since(t).Seconds())
		}
	}
	fmt.Printf("\nall rounds: %.0fs\n", time.Since(began).Seconds())
	steps, err := w.steps(ctx, *latencyN)
	if err != nil {
		return fmt.Errorf("steps: %w", err)
	}

	med := func(name string, f func(result) float64) float64 {
		var xs []float64
		for _, x := range res[name] {
			xs = append(xs, f(x))
		}
		return benchdb.Median(xs)
	}
	ratio := func(a, b string, f func(result) float64) float64 {
		var xs []float64
		for i := range res[a] {
			xs = append(xs, f(res[a][i])/f(res[b][i]))
		}
		return benchdb.Median(xs)
	}
	rate := func(x result) float64 { return x.rate }

	fmt.Printf("\n== Throughput (median of %d rounds; ratio = median of per-round engine/plain)\n", *rounds)
	fmt.Printf("%-6s %12s %12s %13s %10s %18s %16s %13s\n", "sinks", "engine del/s", "plain POST/s", "engine/plain", "emit ev/s", "sent by emit end", "claims/delivery", "engine conns")
	for _, s := range counts {
		e, p := fmt.Sprintf("engine_%d", s), fmt.Sprintf("plain_%d", s)
		fmt.Printf("%-6d %12.0f %12.0f %12.4fx %10.0f %18s %16.2f %13.0f\n", s, med(e, rate), med(p, rate), ratio(e, p, rate),
			med(e, func(x result) float64 { return x.emitRate }),
			fmt.Sprintf("%.0f/%d", med(e, func(x result) float64 { return float64(x.atEmitEnd) }), *n*s),
			med(e, func(x result) float64 { return x.claims }), med(e, func(x result) float64 { return float64(x.newConns) }))
	}

	fmt.Printf("\n== Commit-to-send latency, ms (median of %d rounds of %d events)\n", *rounds, *latencyN)
	fmt.Printf("%-17s %8s %8s %8s %12s %9s %14s %14s %14s %14s\n", "variant", "p50", "p90", "p99", "p50/plain", "notified",
		"commit>NOTIFY", "c>claim notif", "commit>claim", "claim>receipt")
	p50 := func(x result) float64 { return x.p50 }
	for _, it := range latency {
		nm := it.name
		fmt.Printf("%-17s %8.2f %8.2f %8.2f %11.1fx", nm,
			med(nm, p50), med(nm, func(x result) float64 { return x.p90 }), med(nm, func(x result) float64 { return x.p99 }),
			ratio(nm, "latency_plain", p50))
		if strings.HasPrefix(nm, "latency_debounce") || strings.HasPrefix(nm, "latency_every") {
			fmt.Printf(" %5.0f/%-3d %14.2f %14.2f %14.2f %14.2f", med(nm, func(x result) float64 { return float64(x.notified) }), *latencyN,
				med(nm, func(x result) float64 { return x.wake }), med(nm, func(x result) float64 { return x.claim }),
				med(nm, func(x result) float64 { return x.claimAll }),
				med(nm, func(x result) float64 { return x.send }))
		}
		fmt.Println()
	}

	fmt.Printf("\n== One delivery's steps replayed one at a time, no engine serving (median ms of %d)\n", *latencyN)
	path := 0.0
	for k, name := range stepNames {
		fmt.Printf("%-11s %6.2f\n", name, steps[k])
		if k >= 1 && k <= 4 {
			path += steps[k]
		}
	}
	fmt.Printf("fan-out + claim + reserve tx + send: %.2f ms (latency_every p50 %.2f)\n", path, med("latency_every", p50))
	return nil
}

func (x result) line(name string) string {
	switch {
	case strings.HasPrefix(name, "engine_"):
		return fmt.Sprintf("%7.0f del/s  emit %5.0f ev/s  %6d sent by emit end  %.2f claims/delivery  %3d new conns", x.rate, x.emitRate, x.atEmitEnd, x.claims, x.newConns)
	case strings.HasPrefix(name, "plain_"):
		return fmt.Sprintf("%7.0f POST/s  %3d new conns", x.rate, x.newConns)
	case name == "latency_plain" || name == "latency_commit":
		return fmt.Sprintf("p50 %7.2f  p90 %7.2f  p99 %7.2f ms", x.p50, x.p90, x.p99)
	}
	return fmt.Sprintf("p50 %7.2f  p90 %7.2f  p99 %7.2f ms  notified %d  commit>NOTIFY %.2f  commit>claim %.2f (notified %.2f)  claim>receipt %.2f",
		x.p50, x.p90, x.p99, x.notified, x.wake, x.claimAll, x.claim, x.send)
}

// throughputEngine emits *n events for the owner with s sinks, one
// committed transaction each, and times their n·s deliveries.
func (w *world) throughputEngine(ctx context.Context, s int) (result, error) {
	o := w.owner[s]
	r, err := w.start(0)
	if err != nil {
		return result{}, err
	}
	res, err := func() (result, error) {
		if err := w.warm(ctx, r, o, 3); err != nil {
			return result{}, err
		}
		target := int64(*n * s)
		var got atomic.Int64
		done := make(chan time.Time, 1)
		w.gs.on(func(t time.Time) {
			if got.Add(1) == target {
				done <- t
			}
		})
		defer w.gs.on(nil)
		conns0 := w.gs.newConns.Load()
		drain(r.claims)
		claimed0 := r.claimed.Load()
		start := time.Now()
		for range *n {
			if _, err := w.emit(ctx, r.eng, o); err != nil {
				return result{}, err
			}
		}
		emitEnd := time.Now()
		atEmitEnd := got.Load()
		var last time.Time
		select {
		case last = <-done:
		case <-time.After(*timeout - time.Since(start)):
			return result{}, fmt.Errorf("%d of %d messages received within %v (%d when the last event committed after %v)",
				got.Load(), target, *timeout, atEmitEnd, emitEnd.Sub(start).Round(time.Millisecond))
		}
		if err := r.waitAttempts(int(target), 30*time.Second); err != nil {
			return result{}, err
		}
		if *trace {
			printTrace(r.claims, start, emitEnd, last)
		}
		return result{
			rate: float64(target) / last.Sub(start).Seconds(), emitRate: float64(*n) / emitEnd.Sub(start).Seconds(),
			atEmitEnd: int(atEmitEnd), newConns: w.gs.newConns.Load() - conns0,
			claims: float64(r.claimed.Load()-claimed0) / float64(target),
		}, nil
	}()
	if serr := r.stop(); err == nil {
		err = serr
	}
	return res, err
}

// throughputPlain posts *n·s messages from s goroutines, one request in
// flight each.
func (w *world) throughputPlain(ctx context.Context, s int) (result, error) {
	c := plainClient(s)
	defer c.CloseIdleConnections()
	body := baselineBody()
	burst := func(per int) error {
		var wg sync.WaitGroup
		errs := make([]error, s)
		for i := range s {
			wg.Go(func() {
				for range per {
					if err := post(ctx, c, w.gs.URL, body); err != nil {
						errs[i] = err
						return
					}
				}
			})
		}
		wg.Wait()
		return cmp.Or(errs...)
	}
	if err := burst(3); err != nil { // warm-up: open the connections
		return result{}, err
	}
	target := int64(*n * s)
	var got atomic.Int64
	done := make(chan time.Time, 1)
	w.gs.on(func(t time.Time) {
		if got.Add(1) == target {
			done <- t
		}
	})
	defer w.gs.on(nil)
	conns0 := w.gs.newConns.Load()
	start := time.Now()
	if err := burst(*n); err != nil {
		return result{}, err
	}
	last := <-done
	return result{rate: float64(target) / last.Sub(start).Seconds(), newConns: w.gs.newConns.Load() - conns0}, nil
}

// latencyEngine commits *latencyN single events for the one-sink owner,
// each when the previous one's attempt was recorded, and times each from
// COMMIT returning to the stand-in receiving it.
func (w *world) latencyEngine(ctx context.Context, debounce time.Duration) (result, error) {
	o := w.owner[1]
	r, err := w.start(debounce)
	if err != nil {
		return result{}, err
	}
	res, err := func() (result, error) {
		if err := w.warm(ctx, r, o, 3); err != nil {
			return result{}, err
		}
		got := make(chan time.Time, 1)
		w.gs.on(func(t time.Time) {
			select {
			case got <- t:
			default:
			}
		})
		defer w.gs.on(nil)
		var total, wake, claim, claimAll, send []float64
		notified := 0
		for range *latencyN {
			drain(r.claims)
			drain(w.notes)
			t0, err := w.emit(ctx, r.eng, o)
			if err != nil {
				return result{}, err
			}
			var t1 time.Time
			select {
			case t1 = <-got:
			case <-time.After(10 * time.Second):
				return result{}, fmt.Errorf("no message within 10s of the commit")
			}
			if err := r.waitAttempts(1, 10*time.Second); err != nil {
				return result{}, err
			}
			total = append(total, ms(t1.Sub(t0)))
			tc, claimed := first(r.claims)
			if claimed {
				claimAll = append(claimAll, ms(tc.Sub(t0)))
				send = append(send, ms(t1.Sub(tc)))
			}
			if tn, ok := first(w.notes); ok {
				notified++
				wake = append(wake, ms(tn.Sub(t0)))
				if claimed {
					claim = append(claim, ms(tc.Sub(t0)))
				}
			}
			time.Sleep(*latencyGap)
		}
		return result{
			p50: pct(total, 50), p90: pct(total, 90), p99: pct(total, 99), notified: notified,
			wake: benchdb.Median(wake), claim: benchdb.Median(claim), claimAll: benchdb.Median(claimAll), send: benchdb.Median(send),
		}, nil
	}()
	if serr := r.stop(); err == nil {
		err = serr
	}
	return res, err
}

// latencyCommit times *latencyN single-row INSERTs in autocommit on the
// host's pool: what one synchronous commit costs on this server, for
// reading the engine's latency (its path to the send has several).
func (w *world) latencyCommit(ctx context.Context) (result, error) {
	var total []float64
	for i := range *latencyN + 5 {
		t0 := time.Now()
		if _, err := w.host.Exec(ctx, `INSERT INTO bench_commit DEFAULT VALUES`); err != nil {
			return result{}, err
		}
		if i >= 5 { // the first few warm the connection up
			total = append(total, ms(time.Since(t0)))
		}
	}
	return result{p50: pct(total, 50), p90: pct(total, 90), p99: pct(total, 99)}, nil
}

// latencyPlain times *latencyN single POSTs, one after another, from the
// client's send to the stand-in receiving it.
func (w *world) latencyPlain(ctx context.Context) (result, error) {
	c := plainClient(1)
	defer c.CloseIdleConnections()
	body := baselineBody()
	for range 5 {
		if err := post(ctx, c, w.gs.URL, body); err != nil {
			return result{}, err
		}
	}
	var at atomic.Int64
	w.gs.on(func(t time.Time) { at.Store(t.UnixNano()) })
	defer w.gs.on(nil)
	var total []float64
	for range *latencyN {
		t0 := time.Now()
		if err := post(ctx, c, w.gs.URL, body); err != nil {
			return result{}, err
		}
		total = append(total, ms(time.Unix(0, at.Load()).Sub(t0)))
		time.Sleep(*latencyGap)
	}
	return result{p50: pct(total, 50), p90: pct(total, 90), p99: pct(total, 99)}, nil
}

// printTrace prints how many rows the claimer handed over in each 100 ms
// after start.
func printTrace(claims chan time.Time, start, emitEnd, last time.Time) {
	buckets := map[int]int{}
	for {
		t, ok := first(claims)
		if !ok {
			break
		}
		buckets[int(t.Sub(start)/(100*time.Millisecond))]++
	}
	keys := slices.Sorted(maps.Keys(buckets))
	fmt.Printf("  trace (emits ended at %.1fs, last receipt at %.1fs): rows claimed per 100 ms:", emitEnd.Sub(start).Seconds(), last.Sub(start).Seconds())
	for _, k := range keys {
		fmt.Printf(" %.1fs:%d", float64(k)/10, buckets[k])
	}
	fmt.Println()
}

func drain[T any](c chan T) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

func first[T any](c chan T) (T, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		var zero T
		return zero, false
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pct is the p-th percentile of xs, nearest rank.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}
