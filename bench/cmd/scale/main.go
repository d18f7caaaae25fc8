// Command scale measures the engine with many configured sinks: -scopes
// owner scopes of 10 sinks each (100,000 sinks by default), of which
// -receiving get one message each during the run. The engine runs in a
// child process of its own (this binary with -child), so that its
// resident memory is the engine's alone; the stand-in and the fixtures
// stay in the parent. The child reports:
//
//   - RSS (VmRSS, and the peak VmHWM) and the Go heap and stacks in use:
//     with the engine made but not serving (the baseline: the process and
//     its libraries), once serving and idle, with every receiving sink's
//     actor alive after the run, and after the actors retired;
//   - per-actor cost: (heap + stacks with the actors alive − serving
//     idle) / actors alive;
//   - AllSinkStatuses() time over every actor alive, and the /ops/actors
//     equivalent for one scope (the scope's sink ids read from the
//     database, AllSinkStatuses() filtered to them, encoded as JSON): median of 20.
//
// Actors retire after ActorIdleAfter (-idle-after, its default of one
// minute; 5 s in -short), so an actor made early in the run may retire
// before the last message is sent: the child samples the number of actors
// alive every 250 ms and reports the most. The run waits for every actor
// to retire. Everything else is the default configuration. -short is the
// CI version (300 scopes, 300 receiving).
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/bench/internal/benchdb"
	"github.com/switchboard/notify/bench/internal/rig"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/notifytype"
)

var (
	short     = flag.Bool("short", false, "a small run for CI: 300 scopes (3,000 sinks), 300 receiving")
	scopes    = flag.Int("scopes", 10000, "owner scopes, 10 sinks each")
	receiving = flag.Int("receiving", 10000, "sinks that receive a message during the run (whole scopes of 10)")
	idleAfter = flag.Duration("idle-after", time.Minute, "the engine's ActorIdleAfter in this run (its default: 1 minute)")
	keep      = flag.Bool("keep", false, "keep the database")

	child = flag.Bool("child", false, "internal: run as the engine process")
	dbURL = flag.String("url", "", "internal: the child's database")
	key   = flag.String("key", "", "internal: the child's secret key, hex")
)

func main() {
	flag.Parse()
	if *short {
		*scopes, *receiving = 300, 300
		if !flagSet("idle-after") {
			*idleAfter = 5 * time.Second
		}
	}
	var err error
	if *child {
		err = runChild(context.Background())
	} else {
		err = run(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

// report is what the child prints, one JSON object a line.
type report struct {
	Stage     string  `json:"stage"`
	RSS       int64   `json:"rss_kb"`
	HWM       int64   `json:"hwm_kb"`
	Heap      uint64  `json:"heap"`
	Stacks    uint64  `json:"stacks"`
	Gorout    int     `json:"goroutines"`
	Actors    int     `json:"actors"`
	StatusMs  float64 `json:"status_ms"`
	ScopeMs   float64 `json:"scope_ms"`
	ForMs     float64 `json:"for_ms"` // SinkStatuses of the scope's human, JSON: the handler's own path
	ScopeSize int     `json:"scope_actors"`
	Peak      int     `json:"peak_actors"` // the most actors alive at one sample
}

func run(ctx context.Context) (err error) {
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
	f, err := r.Fleet(ctx, *scopes, 10, engine.BudgetPerHourDefault, engine.BudgetBurstDefault, "scale")
	if err != nil {
		return err
	}
	fmt.Printf("fleet:   %d sinks in %d scopes (%.1fs to make); %d receiving; ActorIdleAfter %v, everything else default\n\n",
		f.Sinks, len(f.Owners), time.Since(t0).Seconds(), *receiving, *idleAfter)

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, "-child", "-url", r.URL, "-key", hex.EncodeToString(r.Key), "-idle-after", idleAfter.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	ask := func(cmdline string) (report, error) {
		if _, err := io.WriteString(stdin, cmdline+"\n"); err != nil {
			return report{}, err
		}
		if !lines.Scan() {
			return report{}, fmt.Errorf("child ended: %v", lines.Err())
		}
		var rep report
		return rep, json.Unmarshal(lines.Bytes(), &rep)
	}
	var reps []report
	add := func(rep report, err error) error {
		if err == nil {
			reps = append(reps, rep)
			fmt.Printf("%-26s RSS %7.1f MB (peak %7.1f)  heap %7.1f MB  stacks %6.1f MB  goroutines %6d  actors %6d",
				rep.Stage, float64(rep.RSS)/1024, float64(rep.HWM)/1024, mb(rep.Heap), mb(rep.Stacks), rep.Gorout, rep.Actors)
			if rep.StatusMs > 0 {
				fmt.Printf("  AllSinkStatuses() %.2f ms  one scope %.2f ms (%d actors)  most alive %d", rep.StatusMs, rep.ScopeMs, rep.ScopeSize, rep.Peak)
			}
			fmt.Println()
		}
		return err
	}
	last := min(len(f.Owners), (*receiving+9)/10) - 1
	scope := f.Owners[last].Scope.String() // the last to receive: its actors most likely alive
	if err := add(ask("made " + scope)); err != nil {
		return err
	}
	if err := add(ask("serve " + scope)); err != nil {
		return err
	}
	// The receiving sinks: whole scopes of 10, one event each.
	emitter, err := engine.New(r.Config(r.Pool, false))
	if err != nil {
		return err
	}
	target := 0
	r.GS.Reset()
	start := time.Now()
	for i := 0; target < *receiving && i < len(f.Owners); i++ {
		if err := emitOne(ctx, r, emitter, f.Owners[i].Scope); err != nil {
			return err
		}
		target += len(f.Owners[i].Sinks)
	}
	if _, err := r.GS.WaitFor(ctx, int64(target), 5*time.Minute); err != nil {
		return err
	}
	fmt.Printf("%d messages to %d sinks in %.1fs\n", target, target, time.Since(start).Seconds())
	if err := add(ask("busy " + scope)); err != nil {
		return err
	}
	// Wait for the actors to retire.
	deadline := time.Now().Add(*idleAfter + time.Minute)
	var rep report
	for {
		if rep, err = ask("count " + scope); err != nil {
			return err
		}
		if rep.Actors == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := add(ask("retired " + scope)); err != nil {
		return err
	}
	made, idle, busy, retired := reps[0], reps[1], reps[2], reps[3]
	perActor := float64(busy.Heap+busy.Stacks) - float64(idle.Heap+idle.Stacks)
	if busy.Actors > 0 {
		perActor /= float64(busy.Actors)
	}
	v := func(ok bool) string { return map[bool]string{true: "PASS", false: "MISS"}[ok] }
	fmt.Printf("\n== Scale: %d sinks configured, %d receiving (engine in a process of its own)\n", f.Sinks, target)
	fmt.Printf("RSS made, not serving (baseline)  %7.1f MB\n", float64(made.RSS)/1024)
	fmt.Printf("RSS serving, idle                 %7.1f MB\n", float64(idle.RSS)/1024)
	fmt.Printf("RSS peak over the run (VmHWM)     %7.1f MB   target <= 200 MB: %s  (%.2fx the baseline)\n",
		float64(retired.HWM)/1024, v(retired.HWM <= 200*1024), float64(retired.HWM)/float64(made.RSS))
	fmt.Printf("actors alive after the run        %7d      per-actor heap+stack %.1f KB (most alive at once: %d)\n", busy.Actors, perActor/1024, busy.Peak)
	fmt.Printf("actors after ActorIdleAfter       %7d      %s\n", retired.Actors, v(retired.Actors == 0))
	fmt.Printf("AllSinkStatuses(), %d actors     %7.2f ms\n", busy.Actors, busy.StatusMs)
	how := "AllSinkStatuses() filtered"
	fmt.Printf("/ops/actors equivalent, 1 scope   %7.2f ms   target <= 10 ms: %s  (%s)\n", busy.ScopeMs, v(busy.ScopeMs <= 10), how)
	if busy.ForMs > 0 {
		fmt.Printf("SinkStatuses(the scope's human)   %7.2f ms   target <= 10 ms: %s  (the handler's path: teams, sinks by index, their actors, JSON)\n", busy.ForMs, v(busy.ForMs <= 10))
	}
	return nil
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

func emitOne(ctx context.Context, r *rig.Rig, eng *engine.Engine, o notifytype.OwnerScope) error {
	tx, err := r.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if err := eng.Emit(ctx, tx, r.Event(o)); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// runChild is the engine process: it answers one line per command on
// stdin with a report on stdout.
func runChild(ctx context.Context) error {
	k, err := hex.DecodeString(*key)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	rr := &rig.Rig{URL: *dbURL, Pool: pool, Key: k}
	cfg := rr.Config(pool, false)
	cfg.ActorIdleAfter = *idleAfter
	eng, err := engine.New(cfg)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	// served is closed when Serve has returned: the engine's stop removes
	// its heartbeat through the pool, which is closed after it.
	served := make(chan struct{})
	serving := false
	defer func() {
		cancel()
		if serving {
			<-served
		}
	}()
	var peak atomic.Int64
	go func() {
		for {
			select {
			case <-sctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
			if n := int64(len(eng.AllSinkStatuses())); n > peak.Load() {
				peak.Store(n)
			}
		}
	}()
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		stage, scope, _ := strings.Cut(in.Text(), " ")
		if stage == "serve" && !serving {
			serving = true
			go func() {
				defer close(served)
				_ = eng.Serve(sctx)
			}()
			time.Sleep(2 * time.Second) // let it settle: listener, first claim cycle
		}
		rep := measure(stage)
		rep.Actors = len(eng.AllSinkStatuses())
		rep.Peak = int(max(peak.Load(), int64(rep.Actors)))
		if stage == "busy" || stage == "retired" {
			if err := timeStatus(ctx, pool, eng, scope, &rep); err != nil {
				return err
			}
		}
		if err := out.Encode(rep); err != nil {
			return err
		}
	}
	return in.Err()
}

func measure(stage string) report {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep := report{Stage: stage, Heap: ms.HeapInuse, Stacks: ms.StackInuse, Gorout: runtime.NumGoroutine()}
	b, _ := os.ReadFile("/proc/self/status")
	for l := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				rep.RSS = v
			case "VmHWM:":
				rep.HWM = v
			}
		}
	}
	return rep
}

// timeStatus times AllSinkStatuses() and the /ops/actors equivalent for scope:
// the scope's sinks from the database, AllSinkStatuses() filtered to them, JSON;
// and SinkStatuses of the scope's human (what /ops/actors calls for a human
// who is not an operator), JSON.
func timeStatus(ctx context.Context, pool *pgxpool.Pool, eng *engine.Engine, scope string, rep *report) error {
	owner, err := notifytype.ParseOwnerScope(scope)
	if err != nil {
		return err
	}
	var st, sc, sf []float64
	for range 20 {
		t0 := time.Now()
		visible, err := eng.SinkStatuses(ctx, engine.HumanPrincipal(owner.ID))
		if err != nil {
			return err
		}
		if _, err := json.Marshal(map[string]any{"actors": visible}); err != nil {
			return err
		}
		sf = append(sf, rig.Ms(time.Since(t0)))

		t := time.Now()
		_ = eng.AllSinkStatuses()
		st = append(st, rig.Ms(time.Since(t)))

		t = time.Now()
		rows, err := pool.Query(ctx, `SELECT id FROM switchboard.sinks WHERE owner = $1`, scope)
		if err != nil {
			return err
		}
		ids := map[int64]bool{}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids[id] = true
		}
		if err := rows.Err(); err != nil {
			return err
		}
		var mine []engine.SinkStatus
		for _, s := range eng.AllSinkStatuses() {
			if ids[s.SinkID] {
				mine = append(mine, s)
			}
		}
		if _, err := json.Marshal(map[string]any{"actors": mine}); err != nil {
			return err
		}
		sc = append(sc, rig.Ms(time.Since(t)))
		rep.ScopeSize = len(mine)
	}
	rep.StatusMs, rep.ScopeMs, rep.ForMs = benchdb.Median(st), benchdb.Median(sc), benchdb.Median(sf)
	return nil
}
