// Command latency measures commit-to-send latency of the delivery engine
// with its default configuration (PollInterval, NotifyDebounce, budgets,
// pool: all defaults), against a loopback Gotify stand-in:
//
//   - paced: events committed at -rate per second (open loop, each its
//     own transaction: BEGIN, Emit, COMMIT) for -duration, spread over
//     -sinks owners with one sink each, so that no sink spends more than
//     its default burst (10) in the run: budgets never hold a row. Each
//     event is timed from COMMIT returning to the stand-in receiving it.
//   - idle: -idle-n single events, each after -quiet with nothing sent:
//     the first event after quiet, which the debounce must not delay.
//
// Baselines in the same run, for reading: one POST's latency to the
// stand-in (send → receipt) and one autocommit INSERT (what one
// synchronous commit costs on this server). Rounds interleave the four;
// figures are medians over rounds. -short is the CI version.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/bench/internal/benchdb"
	"github.com/switchboard/notify/bench/internal/rig"
	"github.com/switchboard/notify/bench/internal/standin"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

var (
	short    = flag.Bool("short", false, "a small run for CI: 2 s paced, 1 idle event, one round")
	rounds   = flag.Int("rounds", 3, "rounds")
	rate     = flag.Int("rate", 100, "events per second in the paced run")
	duration = flag.Duration("duration", 20*time.Second, "length of the paced run")
	sinksN   = flag.Int("sinks", 500, "owners, one sink each, the paced events go round")
	idleN    = flag.Int("idle-n", 5, "events of the idle run")
	quiet    = flag.Duration("quiet", 3*time.Second, "quiet before each idle event")
	keep     = flag.Bool("keep", false, "keep the database")
)

func main() {
	flag.Parse()
	if *short {
		*rounds, *duration, *idleN, *quiet = 1, 2*time.Second, 1, 500*time.Millisecond
	}
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		os.Exit(1)
	}
}

type result struct {
	p50, p90, p99, max float64
	n                  int
	emitP99            float64 // paced: the emit transaction's own p99
	lateStarts         int     // paced: events the emitters began more than 10 ms late
}

type world struct {
	r      *rig.Rig
	owners []notifytype.OwnerScope
	keyOf  map[string]int // sink key → owner index
}

func run(ctx context.Context) (err error) {
	r, err := rig.Open(ctx, 16)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := r.Close(*keep); err == nil {
			err = cerr
		}
	}()
	if err := r.Describe(ctx); err != nil {
		return err
	}
	f, err := r.Fleet(ctx, *sinksN, 1, engine.BudgetPerHourDefault, engine.BudgetBurstDefault, "latency")
	if err != nil {
		return err
	}
	keys, err := r.SinkKeys(ctx)
	if err != nil {
		return err
	}
	w := &world{r: r, keyOf: map[string]int{}}
	for i, o := range f.Owners {
		w.owners = append(w.owners, o.Scope)
		w.keyOf[keys[o.Sinks[0]]] = i
	}
	if per := float64(*rate) * duration.Seconds() / float64(*sinksN); per > engine.BudgetBurstDefault-1 {
		return fmt.Errorf("%.0f events per sink would exceed the default burst: raise -sinks", per)
	}
	if _, err := r.Pool.Exec(ctx, `CREATE TABLE bench_commit (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	fmt.Printf("engine:  every setting at its default (PollInterval %v, NotifyDebounce %v, budgets %d/h burst %d, the server's pool of %d)\n",
		engine.PollIntervalDefault, engine.NotifyDebounceDefault, engine.BudgetPerHourDefault, engine.BudgetBurstDefault, store.PoolMaxConnsDefault)
	fmt.Printf("run:     %d rounds; paced %d events/s for %v over %d sinks; idle %d events after %v quiet\n\n",
		*rounds, *rate, *duration, *sinksN, *idleN, *quiet)

	items := []struct {
		name string
		run  func(context.Context) (result, error)
	}{
		{"paced", w.paced}, {"idle", w.idle}, {"post", w.post}, {"commit", w.commit},
	}
	res := map[string][]result{}
	for round := range *rounds {
		order := slices.Clone(items)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, it := range order {
			x, err := it.run(ctx)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, it.name, err)
			}
			res[it.name] = append(res[it.name], x)
			fmt.Printf("round %d %-7s n %5d  p50 %7.2f  p90 %7.2f  p99 %7.2f  max %7.2f ms", round+1, it.name, x.n, x.p50, x.p90, x.p99, x.max)
			if it.name == "paced" {
				fmt.Printf("  (emit tx p99 %.2f ms, %d emits began >10 ms late)", x.emitP99, x.lateStarts)
			}
			fmt.Println()
		}
	}
	med := func(name string, f func(result) float64) float64 {
		var xs []float64
		for _, x := range res[name] {
			xs = append(xs, f(x))
		}
		return benchdb.Median(xs)
	}
	v := func(ok bool) string { return map[bool]string{true: "PASS", false: "MISS"}[ok] }
	p50 := func(x result) float64 { return x.p50 }
	p99 := func(x result) float64 { return x.p99 }
	fmt.Printf("\n== Commit-to-send latency, ms (median of %d rounds)\n", *rounds)
	fmt.Printf("%-34s %8s %8s %8s %8s  %s\n", "", "p50", "p90", "p99", "max", "target")
	for _, nm := range []string{"paced", "idle", "post", "commit"} {
		fmt.Printf("%-34s %8.2f %8.2f %8.2f %8.2f", map[string]string{
			"paced": fmt.Sprintf("engine, %d events/s, defaults", *rate), "idle": "engine, first event after quiet",
			"post": "plain POST (baseline)", "commit": "one autocommit INSERT (reference)"}[nm],
			med(nm, p50), med(nm, func(x result) float64 { return x.p90 }), med(nm, p99), med(nm, func(x result) float64 { return x.max }))
		switch nm {
		case "paced":
			fmt.Printf("  p50 <= 10 %s, p99 <= 100 %s", v(med(nm, p50) <= 10), v(med(nm, p99) <= 100))
		case "idle":
			fmt.Printf("  p50 <= 10 %s (not held for the debounce or the poll)", v(med(nm, p50) <= 10))
		}
		fmt.Println()
	}
	return nil
}

// serve starts an engine with the default configuration.
func (w *world) serve() (*rig.Instance, error) {
	return w.r.Serve(w.r.Config(nil, false), "bench-latency", 0, nil)
}

// paced commits *rate events a second for *duration and times each to
// its receipt.
func (w *world) paced(ctx context.Context) (result, error) {
	if err := w.r.Truncate(ctx); err != nil {
		return result{}, err
	}
	in, err := w.serve()
	if err != nil {
		return result{}, err
	}
	defer in.Stop()
	var mu sync.Mutex
	committed := make([]time.Time, len(w.owners)) // the last commit of each owner's event
	var lat []float64
	recv := make(chan struct{}, 1<<16)
	w.r.GS.Reset()
	w.r.GS.On(func(key string, _ int64, at time.Time) {
		mu.Lock()
		if i, ok := w.keyOf[key]; ok && !committed[i].IsZero() {
			lat = append(lat, rig.Ms(at.Sub(committed[i])))
			committed[i] = time.Time{}
		}
		mu.Unlock()
		recv <- struct{}{}
	})
	defer w.r.GS.On(nil)
	// Warm-up: a few events, each waited for.
	for i := range 5 {
		if err := w.emitOne(ctx, in.Eng, i, nil); err != nil {
			return result{}, err
		}
		select {
		case <-recv:
		case <-time.After(10 * time.Second):
			return result{}, fmt.Errorf("warm-up event not received")
		}
	}
	mu.Lock()
	lat = nil
	mu.Unlock()
	total := int(float64(*rate) * duration.Seconds())
	interval := time.Second / time.Duration(*rate)
	var emitTimes []float64
	late := 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8) // emitters in flight: open loop, not one at a time
	var emitErr error
	var errOnce sync.Once
	start := time.Now()
	for k := range total {
		at := start.Add(time.Duration(k) * interval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		} else if -d > 10*time.Millisecond {
			late++
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			i := 5 + k
			t0 := time.Now()
			err := w.emitOne(ctx, in.Eng, i, func(t time.Time) {
				mu.Lock()
				committed[i%len(w.owners)] = t
				emitTimes = append(emitTimes, rig.Ms(t.Sub(t0)))
				mu.Unlock()
			})
			if err != nil {
				errOnce.Do(func() { emitErr = err })
			}
		})
	}
	wg.Wait()
	if emitErr != nil {
		return result{}, emitErr
	}
	if _, err := w.r.GS.WaitFor(ctx, int64(total+5), 30*time.Second); err != nil {
		return result{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	return result{p50: rig.Pct(lat, 50), p90: rig.Pct(lat, 90), p99: rig.Pct(lat, 99), max: rig.Pct(lat, 100), n: len(lat),
		emitP99: rig.Pct(emitTimes, 99), lateStarts: late}, nil
}

// emitOne commits event i (owner i mod owners) and calls done with the
// time COMMIT returned.
func (w *world) emitOne(ctx context.Context, eng *engine.Engine, i int, done func(time.Time)) error {
	o := w.owners[i%len(w.owners)]
	err := pgx.BeginFunc(ctx, w.r.Pool, func(tx pgx.Tx) error { return eng.Emit(ctx, tx, w.r.Event(o)) })
	t := time.Now()
	if err == nil && done != nil {
		done(t)
	}
	return err
}

// idle sends *idleN events, each after *quiet of nothing, and times each.
func (w *world) idle(ctx context.Context) (result, error) {
	if err := w.r.Truncate(ctx); err != nil {
		return result{}, err
	}
	in, err := w.serve()
	if err != nil {
		return result{}, err
	}
	defer in.Stop()
	got := make(chan time.Time, 16)
	w.r.GS.Reset()
	w.r.GS.On(func(_ string, _ int64, at time.Time) { got <- at })
	defer w.r.GS.On(nil)
	var lat []float64
	for i := range *idleN + 1 {
		time.Sleep(*quiet)
		var t0 time.Time
		if err := w.emitOne(ctx, in.Eng, 1000+i, func(t time.Time) { t0 = t }); err != nil {
			return result{}, err
		}
		select {
		case at := <-got:
			if i > 0 { // the first warms the engine's connections up
				lat = append(lat, rig.Ms(at.Sub(t0)))
			}
		case <-time.After(10 * time.Second):
			return result{}, fmt.Errorf("idle event %d not received within 10s", i)
		}
	}
	return result{p50: rig.Pct(lat, 50), p90: rig.Pct(lat, 90), p99: rig.Pct(lat, 99), max: rig.Pct(lat, 100), n: len(lat)}, nil
}

// post times single POSTs to the stand-in, one after another.
func (w *world) post(ctx context.Context) (result, error) {
	c := standin.Client(1)
	defer c.CloseIdleConnections()
	var last time.Time
	var mu sync.Mutex
	w.r.GS.On(func(_ string, _ int64, at time.Time) { mu.Lock(); last = at; mu.Unlock() })
	defer w.r.GS.On(nil)
	var lat []float64
	n := cmp.Or(min(200, int(float64(*rate)*duration.Seconds())), 50)
	for i := range n + 5 {
		t0 := time.Now()
		if err := standin.Post(ctx, c, w.r.GS.URL, "gtfya.baseline", []byte(`{"title":"t","message":"m","priority":8}`)); err != nil {
			return result{}, err
		}
		mu.Lock()
		if i >= 5 {
			lat = append(lat, rig.Ms(last.Sub(t0)))
		}
		mu.Unlock()
	}
	return result{p50: rig.Pct(lat, 50), p90: rig.Pct(lat, 90), p99: rig.Pct(lat, 99), max: rig.Pct(lat, 100), n: len(lat)}, nil
}

// commit times single-row autocommit INSERTs.
func (w *world) commit(ctx context.Context) (result, error) {
	var lat []float64
	for i := range 205 {
		t0 := time.Now()
		if _, err := w.r.Pool.Exec(ctx, `INSERT INTO bench_commit DEFAULT VALUES`); err != nil {
			return result{}, err
		}
		if i >= 5 {
			lat = append(lat, rig.Ms(time.Since(t0)))
		}
	}
	return result{p50: rig.Pct(lat, 50), p90: rig.Pct(lat, 90), p99: rig.Pct(lat, 99), max: rig.Pct(lat, 100), n: len(lat)}, nil
}
