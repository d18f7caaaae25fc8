// Command emitratio measures what engine.Emit adds to a host's transaction,
// against the bare transaction and against a River InsertTx, and what a
// storm of emitters on one dedup key costs against the same storm on
// distinct keys. Variants run interleaved in rounds: within a round they
// take turns of -chunk transactions, in an order reversed every other
// round, so drift on a noisy machine falls on all of them alike; the
// figures are medians over the rounds.
//
// It creates a fresh database sbbench_<random> on the server of
// DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable),
// migrates it with host.Migrate and rivermigrate, and drops it at the end
// (unless -keep).
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/switchboard/notify/bench/internal/benchdb"
	"github.com/switchboard/notify/bench/internal/workload"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
)

var (
	rounds     = flag.Int("rounds", 5, "rounds of every variant")
	n          = flag.Int("n", 800, "host transactions per variant per round")
	stormN     = flag.Int("storm-n", 3000, "storm transactions per mode per round")
	chunk      = flag.Int("chunk", 50, "host transactions per turn: within a round the variants take turns of this many")
	stormChunk = flag.Int("storm-chunk", 500, "storm transactions per turn")
	keep       = flag.Bool("keep", false, "keep the database at the end, to inspect")
	short      = flag.Bool("short", false, "a small run for CI: 1 round, 50 host transactions and 200 storm events per variant")
)

// Targets: time(variant)/time(bare) at most this.
var targets = map[workload.Variant]float64{workload.Emit1Sink: 1.35, workload.Emit10Sinks: 1.45,
	workload.Emit1SinkBatch: 1.10, workload.Emit10SinksBatch: 1.10}

// hotTarget: events/s on one key over events/s on distinct keys, at least.
const hotTarget = 0.8

func main() {
	flag.Parse()
	if *short {
		*rounds, *n, *chunk, *stormN, *stormChunk = 1, 50, 25, 200, 100
	}
	if *rounds < 1 || *n < 1 || *chunk < 1 || *stormN < 1 || *stormChunk < 1 {
		fmt.Fprintln(os.Stderr, "emitratio: -rounds, -n, -chunk, -storm-n and -storm-chunk must be at least 1")
		os.Exit(2)
	}
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "emitratio:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) (err error) {
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

	pool, err := workload.OpenPool(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := host.Migrate(ctx, pool); err != nil {
		return err
	}
	if err := workload.MigrateRiver(ctx, pool); err != nil {
		return fmt.Errorf("error migrating River: %w", err)
	}
	w, err := workload.Setup(ctx, pool, hosttest.NewFactory(panicTB{}, pool))
	if err != nil {
		return err
	}

	var version string
	if err := pool.QueryRow(ctx, `SELECT version()`).Scan(&version); err != nil {
		return err
	}
	fmt.Printf("machine: %d CPUs (GOMAXPROCS %d), %s/%s, %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Printf("server:  %s\n", version)
	fmt.Printf("run:     %d rounds; host tx: %d per variant per round in turns of %d; storm: %d per mode per round in turns of %d, %d writers\n\n",
		*rounds, *n, *chunk, *stormN, *stormChunk, workload.StormWorkers)

	if err := hostTx(ctx, w); err != nil {
		return err
	}
	fmt.Println()
	if err := storm(ctx, w); err != nil {
		return err
	}

	c, err := w.Count(ctx)
	if err != nil {
		return err
	}
	if err := c.Check(); err != nil {
		return fmt.Errorf("sanity check: %w", err)
	}
	fmt.Printf("\ncheck: emit_1_sink %d rows for %d tx, emit_10_sinks %d rows for %d tx, storm %d open rows, standing for %d events: ok\n",
		c.Outbox[workload.Emit1Sink], c.Txs[workload.Emit1Sink], c.Outbox[workload.Emit10Sinks], c.Txs[workload.Emit10Sinks], c.Open, c.Events)
	return nil
}

// interleave runs total units of every item in one round: the items take
// turns of chunk units each, forward in even rounds and reversed in odd
// ones, so a burst of load from elsewhere falls on all of them alike. It
// returns each item's summed time.
func interleave[T comparable](items []T, round, total, chunk int, fn func(T, int) (time.Duration, error)) (map[T]time.Duration, error) {
	turns := slices.Clone(items)
	if round%2 == 1 {
		slices.Reverse(turns)
	}
	took := map[T]time.Duration{}
	for done := 0; done < total; done += chunk {
		for _, it := range turns {
			d, err := fn(it, min(chunk, total-done))
			if err != nil {
				return nil, err
			}
			took[it] += d
		}
	}
	return took, nil
}

func hostTx(ctx context.Context, w *workload.World) error {
	once := func(v workload.Variant, count int) (time.Duration, error) {
		start := time.Now()
		for range count {
			if err := w.HostTx(ctx, v); err != nil {
				return 0, fmt.Errorf("%s: %w", v, err)
			}
		}
		return time.Since(start), nil
	}
	variants := w.HostVariants()
	if _, ok := w.BatchEmitter(); !ok {
		fmt.Println("emit_1_sink_batch, emit_10_sinks_batch: not offered (the engine has no QueueEmit(*pgx.Batch, engine.Event) error); bare_batch runs alone")
	}
	for _, v := range variants { // warm-up: caches, prepared statements
		if _, err := once(v, max(*n/10, 1)); err != nil {
			return err
		}
	}
	took := map[workload.Variant][]time.Duration{}
	fmt.Println("== Emit on the host's critical path (tx/s per round)")
	for r := range *rounds {
		round, err := interleave(variants, r, *n, *chunk, once)
		if err != nil {
			return err
		}
		for _, v := range variants {
			took[v] = append(took[v], round[v])
		}
		fmt.Printf("round %d:", r+1)
		for _, v := range variants {
			fmt.Printf("  %s %.0f", v, rate(*n, took[v][r]))
		}
		fmt.Println()
	}

	ratio := func(v workload.Variant) float64 {
		rs := make([]float64, *rounds)
		for r := range rs {
			rs[r] = took[v][r].Seconds() / took[workload.Bare][r].Seconds()
		}
		return median(rs)
	}
	river := ratio(workload.RiverInsert)
	fmt.Printf("\n%-19s %10s %14s %-22s %s\n", "variant", "median tx/s", "time/bare", "target", "verdict")
	for _, v := range variants {
		ds := make([]float64, *rounds)
		for r := range ds {
			ds[r] = rate(*n, took[v][r])
		}
		target, verdict := "", ""
		if t, ok := targets[v]; ok {
			target = fmt.Sprintf("<= %.2f, < river %.2f", t, river)
			verdict = pass(ratio(v) <= t && ratio(v) < river)
		}
		if v >= workload.Emit1SinkBatch {
			target, verdict = fmt.Sprintf("<= %.2f", targets[v]), pass(ratio(v) <= targets[v])
		}
		fmt.Printf("%-19s %10.0f %13.2fx %-22s %s\n", v, median(ds), ratio(v), target, verdict)
	}
	// The batch emits against the batched host transaction too: what the
	// emit adds to a host that already batches its statements.
	if _, ok := w.BatchEmitter(); ok {
		for _, v := range []workload.Variant{workload.Emit1SinkBatch, workload.Emit10SinksBatch} {
			rs := make([]float64, *rounds)
			for r := range rs {
				rs[r] = took[v][r].Seconds() / took[workload.BareBatch][r].Seconds()
			}
			fmt.Printf("%s / bare_batch: %.2fx (<= %.2f: %s)\n", v, median(rs), targets[v], pass(median(rs) <= targets[v]))
		}
	}
	return nil
}

func storm(ctx context.Context, w *workload.World) error {
	for _, m := range workload.StormModes { // warm-up
		if _, err := w.Storm(ctx, m, max(*stormN/10, 1)); err != nil {
			return err
		}
	}
	rates := map[workload.StormMode][]float64{}
	fmt.Printf("== Hot dedup key (%d writers, events/s per round)\n", workload.StormWorkers)
	for r := range *rounds {
		round, err := interleave(workload.StormModes, r, *stormN, *stormChunk, func(m workload.StormMode, count int) (time.Duration, error) {
			return w.Storm(ctx, m, count)
		})
		if err != nil {
			return err
		}
		for _, m := range workload.StormModes {
			rates[m] = append(rates[m], rate(*stormN, round[m]))
		}
		fmt.Printf("round %d:", r+1)
		for _, m := range workload.StormModes {
			fmt.Printf("  %s %.0f", m, rates[m][r])
		}
		fmt.Println()
	}
	ratio := func(hot, distinct workload.StormMode) float64 {
		rs := make([]float64, *rounds)
		for r := range rs {
			rs[r] = rates[hot][r] / rates[distinct][r]
		}
		return median(rs)
	}
	fmt.Printf("\n%-16s %14s\n", "mode", "median events/s")
	for _, m := range workload.StormModes {
		fmt.Printf("%-16s %14.0f\n", m, median(rates[m]))
	}
	emit := ratio(workload.EmitHot, workload.EmitDistinct)
	fmt.Printf("\nemit hot/distinct:   %.2f (target >= %.2f) %s\n", emit, hotTarget, pass(emit >= hotTarget))
	fmt.Printf("upsert hot/distinct: %.2f (reference: one row updated in place)\n", ratio(workload.UpsertHot, workload.UpsertDistinct))
	return nil
}

func rate(count int, d time.Duration) float64 { return float64(count) / d.Seconds() }

func median(xs []float64) float64 { return benchdb.Median(xs) }

func pass(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// panicTB lets hosttest.Factory, which reports failures through
// testing.TB, build fixtures in this program: Fatalf panics, and the
// deferred drop still removes the database. The Factory calls nothing else.
type panicTB struct{ testing.TB }

func (panicTB) Helper() {}

func (panicTB) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
