// Command drainratio measures how fast the delivery engine drains a
// backlog across many sinks, beside two baselines in the same run, on the
// same database and the same loopback Gotify stand-in:
//
//   - engine_K: K engines (-instances, default 1,2,3), each on a pool of
//     its own, draining one backlog of at least -backlog due deliveries
//     across -sinks sinks (10 per owner scope, the management ceiling),
//     budgets lifted through the operator bounds (BudgetPerHourMax,
//     BudgetBurstMax) and every sink's budget set to them. The backlog is
//     emitted (Emit, one event reaching its owner's 10 sinks) before the
//     engines start, so the fan-out is part of the drain; with -fanned-out
//     the events are fanned out into outbox rows before the clock starts,
//     as an engine that ran while they came would have, and the drain
//     delivers rows, as the baselines do (neither (c) nor River fans
//     out). Timed from Serve
//     to the last delivery recorded; every message checked exactly once
//     at the stand-in and in delivery_records. Each instance's pool opens
//     its 16 connections inside the clock, as a process's that starts
//     into the backlog; with -open-pools every pool, the baselines' too,
//     has opened them before its clock starts, as a process's that was
//     running when the backlog came.
//   - hand: baseline (a), the hand-written loop: claim a batch FOR UPDATE
//     SKIP LOCKED, POST each, record each, commit; batch and concurrency
//     chosen by a sweep for its best figure (or -hand-batch/-hand-conc).
//   - river: baseline (b), River v0.51 with an HTTP-posting worker, jobs
//     inserted before the client starts, tuned (-river-workers 2000,
//     FetchCooldown 2 ms, FetchPollInterval 20 ms); timed from Start to
//     River reporting the last job completed.
//   - budgeted: baseline (c), the hand loop that keeps the engine's
//     promises (issue 26; budgeted.go): a transaction claims a batch FOR
//     UPDATE SKIP LOCKED, locks the rows' sinks in id order, advances each
//     sink's GCRA time per row and writes one `sending` record per row;
//     16 POSTs at a time; one statement finishes every record and marks the
//     rows delivered. Batch and workers chosen by a sweep of its own (or
//     -budget-batch/-budget-workers).
//
// Every measurement reports its rate and two figures of CPU per delivery:
// the machine's busy CPU (/proc/stat: every process, other tenants' too)
// and its own (this process's CPU, the contender's and the stand-in's, plus
// the CPU of the PostgreSQL backends serving the database: rig.CPUMeter),
// which another tenant of a shared machine does not change; and how many
// of the machine's cores it kept busy (rate × machine CPU a delivery),
// which the machine's own speed moves less than it moves the rate.
//
// The measurements run interleaved in rounds (order reversed every other
// round); figures are medians over rounds and ratios medians of per-round
// ratios. An engine_1 drain before the rounds, not counted in them, is
// profiled (-cpuprofile) and its statements counted on its pool (pgx
// tracer: statements sent alone and in batches, and round trips) with the
// transactions committed (pg_stat_database); with -pgss, the server's
// planning and execution time of each of its statements
// (pg_stat_statements, in the bench's database). Each engine round says when
// the first message arrived after the engines were started, and when a
// quarter, half and three quarters of the backlog had. -short runs a
// small version for CI.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/bench/internal/benchdb"
	"github.com/switchboard/notify/bench/internal/fleet"
	"github.com/switchboard/notify/bench/internal/rig"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/store"
)

var (
	short        = flag.Bool("short", false, "a small run for CI: 50 sinks, 500 deliveries, one round, instances 1,2, no sweep")
	rounds       = flag.Int("rounds", 3, "rounds of every measurement")
	sinksN       = flag.Int("sinks", 1000, "sinks (10 per owner scope)")
	backlog      = flag.Int("backlog", 20000, "due deliveries per measurement")
	instFlag     = flag.String("instances", "1,2,3", "engine instance counts, comma separated")
	handBatch    = flag.Int("hand-batch", 0, "hand loop batch (0: chosen by the sweep)")
	handConc     = flag.Int("hand-conc", 0, "hand loop concurrency (0: chosen by the sweep)")
	budgetBatch  = flag.Int("budget-batch", 0, "budgeted loop (c) batch (0: chosen by its sweep)")
	budgetWork   = flag.Int("budget-workers", 0, "budgeted loop (c) workers, each with 16 POSTs in flight (0: chosen by its sweep)")
	riverWorkers = flag.Int("river-workers", 2000, "River MaxWorkers")
	riverConns   = flag.Int("river-conns", 16, "River's pool size")
	engineConns  = flag.Int("engine-conns", 0, "each engine's pool size (0: the server binary's default, store.PoolMaxConnsDefault)")
	fannedOut    = flag.Bool("fanned-out", false, "fan the backlog's events out into outbox rows before the engines' clock starts, as an engine that was running when the events came would have: the drain then delivers rows, as the baselines (c) and River do, where by default the engines also fan the events out inside their clock")
	openPools    = flag.Bool("open-pools", false, "open every pool's connections before its clock starts, the engines' and the baselines': processes already running when the backlog comes, where by default each opens its connections inside its clock")
	timeoutFlag  = flag.Duration("timeout", 120*time.Second, "bound on one measurement")
	cpuprofile   = flag.String("cpuprofile", "", "write a CPU profile of the traced engine_1 drain (before the rounds) to this file")
	cprofile     = flag.String("cprofile", "", "write a CPU profile of the first budgeted loop (c) drain to this file, to set beside -cpuprofile")
	memprofile   = flag.String("memprofile", "", "write the allocations of the process to this file before the traced engine_1 drain (suffix .base) and after it: go tool pprof -base F.base F")
	pgssFlag     = flag.Bool("pgss", false, "print the server's time of the traced engine_1 drain's statements from pg_stat_statements, planning apart (the server must load the extension, shared_preload_libraries; planning is counted with pg_stat_statements.track_planning on)")
	keep         = flag.Bool("keep", false, "keep the database at the end")
	baselines    = flag.Bool("baselines", true, "run the hand loops and River beside the engine (false: the engine alone, for a quick look while changing it)")
)

func main() {
	flag.Parse()
	if *short {
		*rounds, *sinksN, *backlog, *instFlag = 1, 50, 500, "1,2"
		*handBatch, *handConc, *timeoutFlag = cmp.Or(*handBatch, 50), cmp.Or(*handConc, 16), 60*time.Second
		*budgetBatch, *budgetWork = cmp.Or(*budgetBatch, 100), cmp.Or(*budgetWork, 2)
	}
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "drainratio:", err)
		os.Exit(1)
	}
}

// outcome is one measurement.
type outcome struct {
	rate   float64 // deliveries/s
	cpuPer float64 // the machine's busy CPU per delivery, µs (benchdb.Machine)
	ownPer float64 // this process's CPU and the database's backends' per delivery, µs (rig.CPUMeter)
	dbPer  float64 // of which the backends', µs
	// kernelShare is the share of the machine's busy CPU spent in the
	// kernel (system calls, context switches, interrupts), and
	// switchesPer the machine's context switches per delivery
	// (benchdb.Machine).
	kernelShare, switchesPer float64
	n                        int
	distinct                 int // distinct messages the stand-in received
	duplicated               int // messages received more than once
	dbDouble                 int // outbox rows with more than one delivered record
	unfinished               int // outbox rows sent but not recorded: sent again once their claim expires
	// first is how long after the engines were started the stand-in
	// received the first message (the engines' start, and the first
	// fan-out, claim and reservation).
	first time.Duration
	// quarters are how long after the engines were started the stand-in
	// had received a quarter, half and three quarters of the backlog.
	quarters [3]time.Duration
	// poolsOpen is how long the engines' pools took to open their
	// connections before the clock started (-open-pools), and poolsCPU
	// the machine's busy CPU meanwhile: what each process's start costs.
	poolsOpen, poolsCPU time.Duration
	// split is how many attempts each engine instance reported delivered,
	// in the order they started (several instances: one sink is sent to
	// by one instance at a time, so a few sinks may all be one's).
	split []int64
	// dbSplit is the CPU of each instance's own backends (µs): what the
	// instances that sent nothing cost the database.
	dbSplit []int64
}

type world struct {
	r                  *rig.Rig
	f                  *fleet.Fleet
	keys               map[int64]string
	emit               *engine.Engine // never served: emits the engine's backlogs
	tracer             *rig.Tracer
	profiled           bool
	cprofiled          bool
	stats              []rig.Stat
	commitsPerDelivery float64
	roundTrips         int64
	batches            []rig.Stat
	pgss               []pgssStat
	pgssPlanning       bool
}

func run(ctx context.Context) (err error) {
	var instances []int
	for s := range strings.SplitSeq(*instFlag, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || k < 1 {
			return fmt.Errorf("bad -instances %q", *instFlag)
		}
		instances = append(instances, k)
	}
	if !slices.Contains(instances, 1) {
		instances = append([]int{1}, instances...)
	}
	r, err := rig.Open(ctx, 8)
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
	t0 := time.Now()
	scopes := (*sinksN + 9) / 10
	f, err := r.Fleet(ctx, scopes, min(10, *sinksN), rig.LiftedPerHour, rig.LiftedBurst, "drain")
	if err != nil {
		return err
	}
	if _, err := r.Pool.Exec(ctx, handSchema+budgetedSchema); err != nil {
		return err
	}
	w := &world{r: r, f: f, tracer: rig.NewTracer()}
	if w.keys, err = r.SinkKeys(ctx); err != nil {
		return err
	}
	if w.emit, err = engine.New(r.Config(r.Pool, true)); err != nil {
		return err
	}
	fmt.Printf("fleet:   %d sinks in %d scopes, budgets %d/h burst %d (%.1fs to make)\n", f.Sinks, len(f.Owners),
		rig.LiftedPerHour, rig.LiftedBurst, time.Since(t0).Seconds())
	fmt.Printf("engine:  defaults but budgets lifted; PollInterval %v, NotifyDebounce %v, pool %s per instance, %s\n",
		engine.PollIntervalDefault, engine.NotifyDebounceDefault, map[bool]string{true: fmt.Sprintf("%d (the server's default)", store.PoolMaxConnsDefault), false: strconv.Itoa(*engineConns)}[*engineConns == 0],
		map[bool]string{true: "opened before the clock (-open-pools)", false: "opened inside the clock"}[*openPools])
	if *fannedOut {
		fmt.Println("backlog: fanned out into outbox rows before the engines' clock (-fanned-out)")
	}

	if *baselines && (*handBatch == 0 || *handConc == 0) {
		b, c, err := w.sweep(ctx)
		if err != nil {
			return fmt.Errorf("hand sweep: %w", err)
		}
		*handBatch, *handConc = cmp.Or(*handBatch, b), cmp.Or(*handConc, c)
	}
	if *baselines && (*budgetBatch == 0 || *budgetWork == 0) {
		b, c, err := w.budgetSweep(ctx)
		if err != nil {
			return fmt.Errorf("budgeted sweep: %w", err)
		}
		*budgetBatch, *budgetWork = cmp.Or(*budgetBatch, b), cmp.Or(*budgetWork, c)
	}
	rs := riverSettings{MaxWorkers: *riverWorkers, FetchCooldown: 2 * time.Millisecond, FetchPollInterval: 20 * time.Millisecond, PoolConns: int32(*riverConns)}
	fmt.Printf("hand:    batch %d, concurrency %d (pool of %d)\nriver:   %s\n", *handBatch, *handConc, *handConc, rs)
	fmt.Printf("budget:  batch %d, %d workers of %d POSTs in flight each (pool of %d)\n", *budgetBatch, *budgetWork, budgetedPosts, *budgetWork)
	fmt.Printf("run:     %d rounds, backlog %d deliveries per measurement\n\n", *rounds, *backlog)

	type item struct {
		name string
		run  func(context.Context) (outcome, error)
	}
	var items []item
	for _, k := range instances {
		items = append(items, item{fmt.Sprintf("engine_%d", k), func(ctx context.Context) (outcome, error) { return w.engineDrain(ctx, k) }})
		if k == 1 && *baselines {
			items = append(items,
				item{"hand", func(ctx context.Context) (outcome, error) { return w.handDrain(ctx) }},
				item{"river", func(ctx context.Context) (outcome, error) { return w.riverDrain(ctx, rs) }},
				item{"budgeted", func(ctx context.Context) (outcome, error) { return w.budgetedDrain(ctx) }})
		}
	}
	if slices.Contains(instances, 1) {
		// The statement table's drain: every statement through a pgx
		// tracer (and profiled, when asked). It is run before the rounds,
		// not as one: the tracer's cost (3 µs of the process a delivery)
		// would count against the engine in that round.
		o, err := w.engineDrain(ctx, 1)
		if err != nil {
			return fmt.Errorf("traced drain: %w", err)
		}
		fmt.Printf("traced    engine_1 %8.0f deliveries/s (the statement table's drain, before the rounds and not counted)\n", o.rate)
	}
	res := map[string][]outcome{}
	var notOnce error // a measurement that did not deliver every message exactly once
	for round := range *rounds {
		order := slices.Clone(items)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, it := range order {
			t := time.Now()
			o, err := it.run(ctx)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, it.name, err)
			}
			res[it.name] = append(res[it.name], o)
			// Exactly once is the engine's promise here (every attempt
			// answered 200); River redelivers a job whose POST timed out.
			if strings.HasPrefix(it.name, "engine_") && (o.duplicated > 0 || o.dbDouble > 0 || o.distinct != o.n || o.unfinished > 0) {
				notOnce = fmt.Errorf("round %d, %s: not exactly once: %d distinct of %d, %d duplicated, %d rows delivered twice, %d sent but not recorded (sent again when their claim expires)",
					round+1, it.name, o.distinct, o.n, o.duplicated, o.dbDouble, o.unfinished)
			}
			fmt.Printf("round %d %-9s %8.0f deliveries/s  %5.0f µs machine CPU (%.2f cores busy, %2.0f %% in the kernel, %4.1f context switches), %5.0f own (db %4.0f) each  %6d delivered  distinct %6d  duplicated %d  db double %d  unrecorded %d  (%.1fs)%s%s%s\n",
				round+1, it.name, o.rate, o.cpuPer, o.coresBusy(), 100*o.kernelShare, o.switchesPer, o.ownPer, o.dbPer, o.n, o.distinct, o.duplicated, o.dbDouble, o.unfinished, time.Since(t).Seconds(),
				firstText(o.first, o.quarters), splitText(o.split, o.dbSplit), poolsText(o))
		}
	}

	med := func(name string) float64 {
		var xs []float64
		for _, o := range res[name] {
			xs = append(xs, o.rate)
		}
		return benchdb.Median(xs)
	}
	medOf := func(name string, f func(outcome) float64) float64 {
		var xs []float64
		for _, o := range res[name] {
			xs = append(xs, f(o))
		}
		return benchdb.Median(xs)
	}
	medCPU := func(name string) float64 { return medOf(name, func(o outcome) float64 { return o.cpuPer }) }
	medOwn := func(name string) float64 { return medOf(name, func(o outcome) float64 { return o.ownPer }) }
	medDB := func(name string) float64 { return medOf(name, func(o outcome) float64 { return o.dbPer }) }
	medBusy := func(name string) float64 { return medOf(name, outcome.coresBusy) }
	perRound := func(a, b string) []float64 {
		var xs []float64
		for i := range min(len(res[a]), len(res[b])) {
			xs = append(xs, res[a][i].rate/res[b][i].rate)
		}
		return xs
	}
	ratio := func(a, b string) float64 { return benchdb.Median(perRound(a, b)) }
	// spread prints the per-round ratios under a verdict's line, and says
	// so when they fall on both sides of the bar: the verdict is then the
	// run's draw, not the engine's.
	spread := func(a, b string, bar float64) {
		xs := perRound(a, b)
		if len(xs) < 2 {
			return
		}
		words := make([]string, len(xs))
		for i, x := range xs {
			words[i] = fmt.Sprintf("%.2f", x)
		}
		note := ""
		if bar > 0 && slices.Min(xs) < bar && slices.Max(xs) >= bar {
			note = fmt.Sprintf("; the rounds fall on both sides of %.2fx", bar)
		}
		fmt.Printf("%-13s %14s rounds %s%s\n", "", "", strings.Join(words, ", "), note)
	}
	verdict := func(ok bool) string { return map[bool]string{true: "PASS", false: "MISS"}[ok] }
	fmt.Printf("\n== Drain of %d deliveries across %d sinks (median of %d rounds; ratios: median of per-round ratios)\n", *backlog, f.Sinks, *rounds)
	fmt.Printf("(ratio: engine_1 / the baseline, per round; µs of CPU per delivery: the machine's, and own = process + database backends;\n")
	fmt.Printf(" cores busy: rate × machine µs, how much of the machine a drain kept at work, which its own speed moves less than the rate)\n")
	fmt.Printf("%-13s %14s %10s %12s %8s %10s %10s %8s %7s\n", "", "deliveries/s", "ratio", "target", "verdict", "machine µs", "own µs", "db µs", "cores")
	fmt.Printf("%-13s %14.0f %42.0f %10.0f %8.0f %7.2f\n", "engine_1", med("engine_1"), medCPU("engine_1"), medOwn("engine_1"), medDB("engine_1"), medBusy("engine_1"))
	if *baselines {
		for _, b := range []struct {
			name, label, target string
			min                 float64
		}{{"hand", "hand (a)", "-", 0}, {"river", "river (b)", ">= 1.5x", 1.5}, {"budgeted", "budgeted (c)", ">= 0.8x", 0.8}} {
			rb, v := ratio("engine_1", b.name), "-"
			if b.min > 0 {
				v = verdict(rb >= b.min)
			}
			fmt.Printf("%-13s %14.0f %9.3fx %12s %8s %10.0f %10.0f %8.0f %7.2f\n", b.label, med(b.name), rb, b.target, v, medCPU(b.name), medOwn(b.name), medDB(b.name), medBusy(b.name))
			spread("engine_1", b.name, b.min)
		}
		// The two bars side by side: (c) keeps the engine's promises at
		// the least cost its loop knows, so where (c) itself runs at less
		// than 1.5x River, the River bar asks the engine to beat (c).
		cr := ratio("budgeted", "river")
		fmt.Printf("(c) / River %.3fx (median of per-round ratios): >= 1.5x River asks the engine for >= %.3fx (c) in this run\n", cr, 1.5/cr)
		spread("budgeted", "river", 0)
	}

	fmt.Printf("\n== Instances on one database, one backlog (aggregate; ratio to engine_1 of the same round)\n")
	fmt.Printf("%-10s %14s %10s %12s %10s %11s %8s\n", "", "deliveries/s", "/ 1 inst", "duplicated", "db double", "unrecorded", "verdict")
	for _, k := range instances {
		nm := fmt.Sprintf("engine_%d", k)
		dups, double, short, unrec := 0, 0, 0, 0
		for _, o := range res[nm] {
			dups += o.duplicated
			double += o.dbDouble
			unrec += o.unfinished
			if o.distinct != o.n {
				short++
			}
		}
		rk := ratio(nm, "engine_1")
		fmt.Printf("%-10s %14.0f %9.3fx %12d %10d %11d %8s\n", nm, med(nm), rk, dups, double, unrec,
			verdict(rk >= 0.95 && dups == 0 && double == 0 && short == 0 && unrec == 0))
		if k > 1 {
			spread(nm, "engine_1", 0.95)
		}
	}

	if len(w.stats) > 0 {
		fmt.Printf("\n== Engine statements during the traced engine_1 drain (%d deliveries; pgx tracer on the engine's pool: every statement, alone or in a batch)\n", *backlog)
		var calls int64
		for _, s := range w.stats {
			calls += s.Calls
		}
		fmt.Printf("per delivery: %.3f statements, %.3f round trips (a batch is one), %.3f transactions committed (pg_stat_database)\n",
			float64(calls)/float64(*backlog), float64(w.roundTrips)/float64(*backlog), w.commitsPerDelivery)
		fmt.Printf("(time: of the statements sent alone; a batch's statements are timed with their batch, below)\n")
		fmt.Printf("%9s %10s %8s %10s %9s  %s\n", "calls", "per deliv", "batched", "total ms", "mean ms", "statement")
		slices.SortStableFunc(w.stats, func(a, b rig.Stat) int { return cmp.Compare(b.Calls, a.Calls) })
		for _, s := range w.stats {
			fmt.Printf("%9d %10.4f %8d %10.0f %9.3f  %s\n", s.Calls, float64(s.Calls)/float64(*backlog), s.Batched, rig.Ms(s.Time),
				rig.Ms(s.Time)/max(float64(s.Calls-s.Batched), 1), statementLabel(s.SQL))
		}
		fmt.Printf("\n%9s %10s %10s %9s  %s\n", "batches", "per deliv", "total ms", "mean ms", "batch (its statements; BEGIN, COMMIT, SET LOCAL left out)")
		for _, s := range w.batches {
			fmt.Printf("%9d %10.4f %10.0f %9.3f  %s\n", s.Calls, float64(s.Calls)/float64(*backlog), rig.Ms(s.Time),
				rig.Ms(s.Time)/float64(s.Calls), s.SQL)
		}
	}
	if *pgssFlag {
		printPgss(w.pgss, w.pgssPlanning, *backlog)
	}
	return notOnce
}

// engineDrain emits a backlog, starts k engines and times them to the
// last delivery recorded.
func (w *world) engineDrain(ctx context.Context, k int) (outcome, error) {
	if err := w.r.Truncate(ctx); err != nil {
		return outcome{}, err
	}
	n, err := w.r.Backlog(ctx, w.emit, w.f, *backlog)
	if err != nil {
		return outcome{}, err
	}
	if *fannedOut {
		if err := w.r.FanOutBacklog(ctx, w.emit); err != nil {
			return outcome{}, err
		}
	}
	w.r.GS.Reset()
	// The instants the stand-in received a quarter, half and three
	// quarters of the backlog: how fast a drain gets going, beside its
	// first message.
	var quarters [3]atomic.Int64
	w.r.GS.On(func(_ string, got int64, at time.Time) {
		for q := range quarters {
			if got == int64(n)*int64(q+1)/4 {
				quarters[q].Store(at.UnixNano())
			}
		}
	})
	defer w.r.GS.On(nil)
	profile := k == 1 && !w.profiled
	var tracer = w.tracer
	var commits0 int64
	stopProfile := func() {}
	if profile {
		if commits0, err = w.r.Commits(ctx); err != nil {
			return outcome{}, err
		}
		if *cpuprofile != "" {
			if stopProfile, err = startCPUProfile(*cpuprofile); err != nil {
				return outcome{}, err
			}
			defer stopProfile()
		}
		if err := writeAllocs(*memprofile + ".base"); err != nil {
			return outcome{}, err
		}
		tracer.Start()
	}
	// With -open-pools, each instance's pool has opened its connections
	// before the clock starts, as a process's that was running when the
	// backlog came; otherwise they open beside the engines' start, inside
	// the clock, as a process's that starts into the backlog.
	var (
		pools               []*pgxpool.Pool
		poolsOpen, poolsCPU time.Duration
	)
	defer func() {
		for _, p := range pools {
			p.Close() // after the instances' stops (a second Close does nothing)
		}
	}()
	if *openPools {
		t0, c0 := time.Now(), machine()
		for i := range k {
			pool, err := w.r.OpenPool(ctx, int32(*engineConns), tracer, instanceName(i))
			if err != nil {
				return outcome{}, err
			}
			pools = append(pools, pool)
		}
		poolsOpen, poolsCPU = time.Since(t0), machine().Sub(c0).Busy
	}
	var ins []*rig.Instance
	stopAll := func() error {
		var first error
		for _, in := range ins {
			if err := in.Stop(); err != nil && first == nil {
				first = err
			}
		}
		ins = nil
		return first
	}
	defer func() { _ = stopAll() }()
	if profile && *pgssFlag {
		if err := pgssReset(ctx, w.r.Pool); err != nil {
			return outcome{}, err
		}
	}
	start, cpu0, meter := time.Now(), machine(), w.r.StartCPU(ctx)
	for i := range k {
		var pool *pgxpool.Pool
		if pools != nil {
			pool = pools[i]
		} else if pool, err = w.r.NewPool(int32(*engineConns), tracer, instanceName(i)); err != nil {
			return outcome{}, err
		}
		in, err := w.r.ServeOn(pool, w.r.Config(nil, true), instanceName(i))
		if err != nil {
			return outcome{}, err
		}
		ins = append(ins, in)
	}
	delivered := func() (d, failed int64) {
		for _, in := range ins {
			d += in.Delivered.Load()
			failed += in.Failed.Load()
		}
		return d, failed
	}
	deadline := start.Add(*timeoutFlag)
	// Done when every row is recorded delivered. The attempts reported
	// delivered reach n first (a row whose record timed out is reported,
	// stays claimed and is sent again when its claim expires), so the
	// database is asked only from then on.
	for {
		d, failed := delivered()
		if d >= int64(n) {
			var left int
			if err := w.r.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM switchboard.outbox WHERE state <> 'delivered')
				+ (SELECT count(*) FROM switchboard.outbox_events)`).Scan(&left); err != nil {
				return outcome{}, err
			}
			if left == 0 {
				break
			}
			if time.Now().After(deadline) {
				return outcome{}, fmt.Errorf("%d rows not recorded delivered within %v", left, *timeoutFlag)
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if failed > 0 {
			return outcome{}, fmt.Errorf("%d attempts did not deliver", failed)
		}
		if time.Now().After(deadline) {
			return outcome{}, fmt.Errorf("%d of %d delivered within %v", d, n, *timeoutFlag)
		}
		time.Sleep(2 * time.Millisecond)
	}
	took, cpu := time.Since(start), machine().Sub(cpu0)
	proc, db := meter.Stop(ctx)
	if profile {
		stopProfile()
		if err := writeAllocs(*memprofile); err != nil {
			return outcome{}, err
		}
		w.roundTrips, w.batches = tracer.RoundTrips(), tracer.Batches()
		w.stats = tracer.Stop()
		w.profiled = true
		if *pgssFlag {
			if w.pgss, w.pgssPlanning, err = pgssRead(ctx, w.r.Pool); err != nil {
				return outcome{}, err
			}
		}
	}
	var split, dbSplit []int64
	byName := meter.DBByName()
	for i, in := range ins {
		split = append(split, in.Delivered.Load())
		dbSplit = append(dbSplit, byName[instanceName(i)].Microseconds())
	}
	if err := stopAll(); err != nil {
		return outcome{}, err
	}
	o := w.measured(n, took, cpu, proc, db)
	o.split, o.dbSplit = split, dbSplit
	o.poolsOpen, o.poolsCPU = poolsOpen, poolsCPU
	if f := w.r.GS.First(); !f.IsZero() {
		o.first = f.Sub(start)
	}
	for q := range quarters {
		if t := quarters[q].Load(); t != 0 {
			o.quarters[q] = time.Unix(0, t).Sub(start)
		}
	}
	if err := w.r.Pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT outbox_id FROM switchboard.delivery_records
		WHERE status = 'delivered' GROUP BY outbox_id HAVING count(*) > 1) d`).Scan(&o.dbDouble); err != nil {
		return o, err
	}
	if err := w.r.Pool.QueryRow(ctx, `SELECT count(*) FROM switchboard.outbox WHERE state <> 'delivered'`).Scan(&o.unfinished); err != nil {
		return o, err
	}
	if profile {
		time.Sleep(1500 * time.Millisecond) // pg_stat_database lags
		c1, err := w.r.Commits(ctx)
		if err != nil {
			return o, err
		}
		w.commitsPerDelivery = float64(c1-commits0) / float64(n)
	}
	return o, nil
}

// handDrain times baseline (a) over a backlog of the same size.
func (w *world) handDrain(ctx context.Context) (outcome, error) {
	return w.handRun(ctx, *backlog, *handBatch, *handConc)
}

func (w *world) handRun(ctx context.Context, n, batch, conc int) (outcome, error) {
	if err := w.r.Truncate(ctx, "bench_hand_jobs", "bench_hand_records"); err != nil {
		return outcome{}, err
	}
	if err := handLoad(ctx, w.r.Pool, jobs(w.f, w.keys, w.r, n)); err != nil {
		return outcome{}, err
	}
	if _, err := w.r.Pool.Exec(ctx, `ANALYZE bench_hand_jobs`); err != nil {
		return outcome{}, err
	}
	w.r.GS.Reset()
	pool, err := baselinePool(ctx, w.r.URL, int32(conc))
	if err != nil {
		return outcome{}, err
	}
	start, cpu0, meter := time.Now(), machine(), w.r.StartCPU(ctx)
	got, err := hand(ctx, pool, w.r.GS.URL, batch, conc, meter)
	took, cpu := time.Since(start), machine().Sub(cpu0)
	proc, db := meter.Stop(ctx)
	if err != nil {
		return outcome{}, err
	}
	o := w.measured(int(got), took, cpu, proc, db)
	if int(got) != n {
		return o, fmt.Errorf("hand loop recorded %d of %d", got, n)
	}
	return o, nil
}

// riverDrain times baseline (b) over a backlog of the same size.
func (w *world) riverDrain(ctx context.Context, s riverSettings) (outcome, error) {
	if err := w.r.Truncate(ctx, "river_job"); err != nil {
		return outcome{}, err
	}
	js := jobs(w.f, w.keys, w.r, *backlog)
	w.r.GS.Reset()
	var proc, db time.Duration
	took, cpu, err := riverRun(ctx, w.r.URL, w.r.GS.URL, js, s, func() func() {
		m := w.r.StartCPU(ctx)
		return func() { proc, db = m.Stop(ctx) }
	})
	if err != nil {
		return outcome{}, err
	}
	o := w.measured(len(js), took, cpu, proc, db)
	return o, nil
}

// firstText is ", first message after N ms, ¼ ½ ¾ after A B C ms" for
// an engine's drain.
func firstText(first time.Duration, quarters [3]time.Duration) string {
	if first == 0 {
		return ""
	}
	return fmt.Sprintf(", first message after %d ms, ¼ ½ ¾ after %d %d %d ms", first.Milliseconds(),
		quarters[0].Milliseconds(), quarters[1].Milliseconds(), quarters[2].Milliseconds())
}

// poolsText is ", pools opened before the clock: N ms, M ms of machine
// CPU" for a drain whose engines' pools opened before it (-open-pools).
func poolsText(o outcome) string {
	if o.poolsOpen == 0 {
		return ""
	}
	return fmt.Sprintf(", pools opened before the clock in %d ms (%d ms of machine CPU)", o.poolsOpen.Milliseconds(), o.poolsCPU.Milliseconds())
}

// splitText is ", by instance a/b/c" for the attempts of several
// instances, with the CPU each one's backends spent (ms), and nothing for
// one.
func splitText(split, dbSplit []int64) string {
	if len(split) < 2 {
		return ""
	}
	parts, db := make([]string, len(split)), make([]string, len(dbSplit))
	for i, d := range split {
		parts[i] = strconv.FormatInt(d, 10)
	}
	for i, us := range dbSplit {
		db[i] = strconv.FormatInt(us/1000, 10)
	}
	return "  by instance " + strings.Join(parts, "/") + " (their backends' CPU " + strings.Join(db, "/") + " ms)"
}

// instanceName is the name of the i-th engine instance of a drain (from 0),
// its pool's application_name too.
func instanceName(i int) string { return fmt.Sprintf("bench-%d", i+1) }

// coresBusy is how many of the machine's cores the drain kept busy: its
// rate times the machine's busy CPU a delivery.
func (o outcome) coresBusy() float64 { return o.rate * o.cpuPer / 1e6 }

// measured is the outcome of a drain of n deliveries that took took, with
// the machine's busy CPU cpu and the process's and its backends' own CPU
// proc and db, and the stand-in's counts.
func (w *world) measured(n int, took time.Duration, cpu benchdb.Machine, proc, db time.Duration) outcome {
	o := outcome{rate: float64(n) / took.Seconds(), cpuPer: perDelivery(cpu.Busy, n), ownPer: perDelivery(proc+db, n), dbPer: perDelivery(db, n), n: n}
	if cpu.Busy > 0 {
		o.kernelShare = float64(cpu.Kernel) / float64(cpu.Busy)
	}
	o.switchesPer = float64(cpu.Switches) / float64(max(n, 1))
	o.distinct, o.duplicated = w.r.GS.Counts()
	return o
}

// budgetedDrain times baseline (c) over a backlog of the same size.
func (w *world) budgetedDrain(ctx context.Context) (outcome, error) {
	return w.budgetedRun(ctx, *backlog, *budgetBatch, *budgetWork)
}

func (w *world) budgetedRun(ctx context.Context, n, batch, workers int) (outcome, error) {
	if err := w.r.Truncate(ctx, "bench_budget_sinks", "bench_budget_jobs", "bench_budget_records"); err != nil {
		return outcome{}, err
	}
	if err := budgetedLoad(ctx, w.r.Pool, jobs(w.f, w.keys, w.r, n), w.keys); err != nil {
		return outcome{}, err
	}
	if _, err := w.r.Pool.Exec(ctx, `ANALYZE bench_budget_sinks, bench_budget_jobs`); err != nil {
		return outcome{}, err
	}
	w.r.GS.Reset()
	if *cprofile != "" && !w.cprofiled && n == *backlog {
		w.cprofiled = true
		stop, err := startCPUProfile(*cprofile)
		if err != nil {
			return outcome{}, err
		}
		defer stop()
	}
	pool, err := baselinePool(ctx, w.r.URL, int32(workers))
	if err != nil {
		return outcome{}, err
	}
	start, cpu0, meter := time.Now(), machine(), w.r.StartCPU(ctx)
	got, err := budgeted(ctx, pool, w.r.GS.URL, batch, workers, meter)
	took, cpu := time.Since(start), machine().Sub(cpu0)
	proc, db := meter.Stop(ctx)
	if err != nil {
		return outcome{}, err
	}
	o := w.measured(int(got), took, cpu, proc, db)
	if err := w.r.Pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT job_id FROM bench_budget_records
		WHERE status = 'delivered' GROUP BY job_id HAVING count(*) > 1) d`).Scan(&o.dbDouble); err != nil {
		return o, err
	}
	if err := w.r.Pool.QueryRow(ctx, `SELECT count(*) FROM bench_budget_jobs WHERE state <> 'delivered'`).Scan(&o.unfinished); err != nil {
		return o, err
	}
	if int(got) != n || o.unfinished > 0 || o.dbDouble > 0 {
		return o, fmt.Errorf("budgeted loop delivered %d of %d (%d rows not delivered, %d delivered twice)", got, n, o.unfinished, o.dbDouble)
	}
	return o, nil
}

// budgetSweep runs baseline (c) over a few batch sizes and worker counts
// on a smaller backlog and returns the fastest.
func (w *world) budgetSweep(ctx context.Context) (batch, workers int, err error) {
	n := min(*backlog, 6000)
	best := 0.0
	fmt.Printf("budgeted sweep (%d deliveries each):", n)
	for _, c := range []int{1, 2, 4} {
		for _, b := range []int{50, 100, 200} {
			o, err := w.budgetedRun(ctx, n, b, c)
			if err != nil {
				return 0, 0, err
			}
			fmt.Printf(" b%d/w%d %.0f", b, c, o.rate)
			if o.rate > best {
				best, batch, workers = o.rate, b, c
			}
		}
	}
	fmt.Println()
	return batch, workers, nil
}

// sweep runs the hand loop over a few batch sizes and concurrencies on a
// smaller backlog and returns the fastest.
func (w *world) sweep(ctx context.Context) (batch, conc int, err error) {
	n := min(*backlog, 6000)
	best := 0.0
	fmt.Printf("hand sweep (%d deliveries each):", n)
	for _, c := range []int{4, 8, 16, 32} {
		for _, b := range []int{10, 50, 100, 200} {
			o, err := w.handRun(ctx, n, b, c)
			if err != nil {
				return 0, 0, err
			}
			fmt.Printf(" b%d/c%d %.0f", b, c, o.rate)
			if o.rate > best {
				best, batch, conc = o.rate, b, c
			}
		}
	}
	fmt.Println()
	return batch, conc, nil
}

// writesRE finds the tables a statement writes.
var writesRE = regexp.MustCompile(`(?i)\b(UPDATE|INSERT INTO|DELETE FROM)\s+(?:switchboard\.)?(\w+)`)

// statementLabel is a statement's first 90 characters and, for one that
// writes, the tables it writes (statements of one shape, WITH … AS
// MATERIALIZED, differ only there).
func statementLabel(sql string) string {
	label := sql
	if len(label) > 90 {
		label = label[:90] + "…"
	}
	var writes []string
	for _, m := range writesRE.FindAllStringSubmatch(sql, -1) {
		if m[2] == strings.ToUpper(m[2]) {
			continue // FOR UPDATE OF, SKIP LOCKED, DO UPDATE SET
		}
		w := strings.ToLower(strings.Fields(m[1])[0]) + " " + m[2]
		if !slices.Contains(writes, w) {
			writes = append(writes, w)
		}
	}
	if len(writes) > 0 {
		label += " [" + strings.Join(writes, ", ") + "]"
	}
	return label
}

// machine is what the machine has done so far (benchdb.ReadMachine; zero
// where it cannot be read).
func machine() benchdb.Machine {
	m, _ := benchdb.ReadMachine()
	return m
}

// perDelivery is cpu spread over n deliveries, in µs.
func perDelivery(cpu time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / float64(n)
}

// writeAllocs writes the process's allocations so far to path, unless
// -memprofile is unset.
func writeAllocs(path string) error {
	if *memprofile == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}

// startCPUProfile writes a CPU profile of the process to path until stop
// is called (a second stop does nothing).
func startCPUProfile(path string) (stop func(), err error) {
	pf, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			pf.Close()
		})
	}, nil
}
