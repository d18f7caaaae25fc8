// Command storm drives a dead-letter storm through the reference host's
// transaction: -n dead letters in -duration (10,000 in one minute by
// default) across -sinks owners with one sink each, paced (open loop).
// Each is the host's transaction: BEGIN; UPDATE todos SET state='dead',
// dead_letter_count=dead_letter_count+1 … RETURNING dead_letter_count;
// INSERT INTO attempts …; Emit(todo.dead_lettered); COMMIT.
//
// Two variants in the same run, interleaved over rounds:
//
//   - engine: an engine with the default configuration serves while the
//     storm runs, and for -tail after it;
//   - quiet (baseline): the same storm with no engine serving (the emits
//     still write their rows; nothing drains them).
//
// Reported: the host transaction's p50/p99 in each, their ratio, and for
// the engine the messages the stand-in received: per sink never more than
// the budget allows (burst + rate × elapsed; sinks at the operator's
// default maximum rate, 120/h, burst 10, so that a token refills every
// 30 s and held rows come out within the run), the coalesced messages
// (delivery_records.coalesced_rows > 1) and the accounting of every dead
// letter: sent alone, sent in a coalesced message, or still held.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/bench/internal/benchdb"
	"github.com/switchboard/notify/bench/internal/rig"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

var (
	short    = flag.Bool("short", false, "a small run for CI: 500 dead letters in 3 s, one round")
	rounds   = flag.Int("rounds", 1, "rounds of both variants")
	total    = flag.Int("n", 10000, "dead letters per storm")
	duration = flag.Duration("duration", time.Minute, "length of the storm")
	sinksN   = flag.Int("sinks", 100, "owners, one sink each")
	tail     = flag.Duration("tail", 35*time.Second, "how long the engine serves after the storm")
	perHour  = flag.Int("per-hour", engine.BudgetPerHourMaxDefault, "every sink's budget_per_hour")
	burst    = flag.Int("burst", engine.BudgetBurstDefault, "every sink's budget_burst")
	keep     = flag.Bool("keep", false, "keep the database")
)

func main() {
	flag.Parse()
	if *short {
		*rounds, *total, *duration, *tail = 1, 500, 3*time.Second, time.Second
	}
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
}

type hostOwner struct {
	scope notifytype.OwnerScope
	queue int64
	todos []int64
	key   string
}

type result struct {
	p50, p99, max float64
	late          int
	messages      int64
	maxPerSink    int
	allowed       int // the budget's bound per sink over the run
	coalesced     int // messages standing for more than one dead letter
	inCoalesced   int // dead letters sent in them
	alone         int // dead letters sent one per message
	held          int // dead letters still held or pending at the end
}

type world struct {
	r      *rig.Rig
	owners []*hostOwner
	emit   *engine.Engine
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
	f, err := r.Fleet(ctx, *sinksN, 1, *perHour, *burst, "storm")
	if err != nil {
		return err
	}
	keys, err := r.SinkKeys(ctx)
	if err != nil {
		return err
	}
	w := &world{r: r}
	for _, o := range f.Owners {
		h := &hostOwner{scope: o.Scope, key: keys[o.Sinks[0]]}
		if err := r.Pool.QueryRow(ctx, `INSERT INTO queues (owner, name) VALUES ($1, 'storm') RETURNING id`, o.Scope.String()).Scan(&h.queue); err != nil {
			return err
		}
		rows, err := r.Pool.Query(ctx, `INSERT INTO todos (queue_id, owner, title)
			SELECT $1, $2, 'flaky build ' || g FROM generate_series(1, 10) g RETURNING id`, h.queue, o.Scope.String())
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			h.todos = append(h.todos, id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		w.owners = append(w.owners, h)
	}
	if w.emit, err = engine.New(r.Config(r.Pool, false)); err != nil {
		return err
	}
	fmt.Printf("engine:  every setting at its default; sinks at %d/h burst %d (operator default bounds)\n", *perHour, *burst)
	fmt.Printf("run:     %d rounds; %d dead letters in %v across %d sinks; engine serves %v after\n\n", *rounds, *total, *duration, *sinksN, *tail)

	items := []string{"engine", "quiet"}
	res := map[string][]result{}
	for round := range *rounds {
		order := slices.Clone(items)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, it := range order {
			x, err := w.storm(ctx, it == "engine")
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, it, err)
			}
			res[it] = append(res[it], x)
			fmt.Printf("round %d %-6s host tx p50 %6.2f  p99 %7.2f  max %7.2f ms  (%d began >10 ms late)", round+1, it, x.p50, x.p99, x.max, x.late)
			if it == "engine" {
				fmt.Printf("  messages %d (most to one sink %d, budget allows %d)  coalesced %d carrying %d  alone %d  not sent yet %d",
					x.messages, x.maxPerSink, x.allowed, x.coalesced, x.inCoalesced, x.alone, x.held)
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
	ratio := func(f func(result) float64) float64 {
		var xs []float64
		for i := range res["engine"] {
			xs = append(xs, f(res["engine"][i])/f(res["quiet"][i]))
		}
		return benchdb.Median(xs)
	}
	p50 := func(x result) float64 { return x.p50 }
	p99 := func(x result) float64 { return x.p99 }
	v := func(ok bool) string { return map[bool]string{true: "PASS", false: "MISS"}[ok] }
	e := res["engine"][len(res["engine"])-1]
	fmt.Printf("\n== Storm: %d dead letters in %v across %d sinks (median of %d rounds)\n", *total, *duration, *sinksN, *rounds)
	fmt.Printf("host tx p50: engine draining %.2f ms, quiet %.2f ms, ratio %.2fx\n", med("engine", p50), med("quiet", p50), ratio(p50))
	fmt.Printf("host tx p99: engine draining %.2f ms, quiet %.2f ms, ratio %.2fx\n", med("engine", p99), med("quiet", p99), ratio(p99))
	fmt.Printf("messages (last round): %d for %d dead letters; most to one sink %d, budget allows %d: %s\n",
		e.messages, *total, e.maxPerSink, e.allowed, v(e.maxPerSink <= e.allowed))
	fmt.Printf("every dead letter accounted for: %d alone + %d in %d coalesced messages + %d not sent yet (held or pending) = %d of %d: %s\n",
		e.alone, e.inCoalesced, e.coalesced, e.held, e.alone+e.inCoalesced+e.held, *total, v(e.alone+e.inCoalesced+e.held == *total))
	if e.maxPerSink > e.allowed || e.alone+e.inCoalesced+e.held != *total {
		return fmt.Errorf("a budget was exceeded or a dead letter is unaccounted for")
	}
	return nil
}

// storm runs one storm; with serve, an engine drains while it runs and
// for *tail after.
func (w *world) storm(ctx context.Context, serve bool) (result, error) {
	if err := w.r.Truncate(ctx); err != nil {
		return result{}, err
	}
	var in *rig.Instance
	var mu sync.Mutex
	perSink := map[string]int{}
	w.r.GS.Reset()
	w.r.GS.On(func(key string, _ int64, _ time.Time) { mu.Lock(); perSink[key]++; mu.Unlock() })
	defer w.r.GS.On(nil)
	eng := w.emit
	if serve {
		var err error
		if in, err = w.r.Serve(w.r.Config(nil, false), "bench-storm", 0, nil); err != nil {
			return result{}, err
		}
		defer in.Stop()
		eng = in.Eng
	}
	interval := *duration / time.Duration(*total)
	var lat []float64
	late := 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var first error
	var once sync.Once
	start := time.Now()
	for k := range *total {
		at := start.Add(time.Duration(k) * interval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		} else if -d > 10*time.Millisecond {
			late++
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			o := w.owners[k%len(w.owners)]
			todo := o.todos[(k/len(w.owners))%len(o.todos)]
			t0 := time.Now()
			if err := w.hostTx(ctx, eng, o, todo); err != nil {
				once.Do(func() { first = err })
				return
			}
			mu.Lock()
			lat = append(lat, rig.Ms(time.Since(t0)))
			mu.Unlock()
		})
	}
	wg.Wait()
	if first != nil {
		return result{}, first
	}
	x := result{p50: rig.Pct(lat, 50), p99: rig.Pct(lat, 99), max: rig.Pct(lat, 100), late: late}
	if !serve {
		return x, nil
	}
	time.Sleep(*tail)
	elapsed := time.Since(start)
	if err := in.Stop(); err != nil {
		return x, err
	}
	mu.Lock()
	for _, n := range perSink {
		x.maxPerSink = max(x.maxPerSink, n)
	}
	mu.Unlock()
	x.messages = w.r.GS.Got()
	x.allowed = *burst + int(math.Ceil(elapsed.Hours()*float64(*perHour)))
	if err := w.r.Pool.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE coalesced_rows > 1), coalesce(sum(coalesced_rows) FILTER (WHERE coalesced_rows > 1), 0),
			count(*) FILTER (WHERE coalesced_rows = 1)
		FROM switchboard.delivery_records WHERE status = 'delivered'`).Scan(&x.coalesced, &x.inCoalesced, &x.alone); err != nil {
		return x, err
	}
	if err := w.r.Pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM switchboard.outbox WHERE state IN ('pending', 'held', 'claimed')) +
			(SELECT count(*) FROM switchboard.outbox_events)`).Scan(&x.held); err != nil {
		return x, err
	}
	return x, nil
}

// hostTx is the reference host's dead-letter transaction with its emit.
func (w *world) hostTx(ctx context.Context, eng *engine.Engine, o *hostOwner, todo int64) error {
	return pgx.BeginFunc(ctx, w.r.Pool, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `UPDATE todos SET state = 'dead', dead_letter_count = dead_letter_count + 1, updated_at = now()
			WHERE id = $1 RETURNING dead_letter_count`, todo).Scan(&n); err != nil {
			return fmt.Errorf("update: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO attempts (todo_id, number, kind, outcome, finished_at)
			VALUES ($1, $2, 'agent', 'failed', now())`, todo, n); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		return eng.Emit(ctx, tx, engine.Event{
			Type: host.EventTodoDeadLettered, Owner: o.scope, QueueID: o.queue, OccurrenceKey: host.DeadLetterKey(todo, n),
			Content: host.WithTodo(sinks.Content{Title: "flaky build", Place: "forge"}, host.TodoContent{Cause: "fail at the cap"}),
		})
	})
}
