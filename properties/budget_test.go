package properties

import (
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host/hosttest"
)

// gapGen draws the fake time between two batches of events: none (the same
// instant), seconds, or minutes to hours.
var gapGen = rapid.OneOf(
	rapid.Just(time.Duration(0)),
	rapid.Map(rapid.IntRange(1, 600), func(s int) time.Duration { return time.Duration(s) * time.Second }),
	rapid.Map(rapid.IntRange(10, 180), func(m int) time.Duration { return time.Duration(m) * time.Minute }),
)

// settle waits until the world has nothing due at the fake clock's present
// and returns the attempts seen meanwhile; it waits as long as that takes
// (waitLimit).
func settle(rt *rapid.T, w *hosttest.World) []engine.Attempt {
	rt.Helper()
	seen, err := w.SettleWithin(waitLimit())
	require.NoError(rt, err)
	return seen
}

// failFast bounds rapid's shrinking of a failed check to a few seconds,
// unless -rapid.shrinktime says otherwise: every rerun of a check that
// fails on a deadline costs that deadline, and rapid's default of 30 s of
// shrinking, each rerun finishing its settle and its engines' stops, ran
// past go test's timeout, which then swallowed the failure (issue 23,
// item 9).
func failFast(t *testing.T) {
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.shrinktime" })
	if f := flag.Lookup("rapid.shrinktime"); f != nil && !explicit {
		prev := f.Value.String()
		require.NoError(t, f.Value.Set("3s"))
		t.Cleanup(func() { _ = f.Value.Set(prev) })
	}
}

// openRows counts the outbox rows not yet finished.
func openRows(rt *rapid.T, w *hosttest.World) int {
	rt.Helper()
	var n int
	require.NoError(rt, w.Pool.QueryRow(w.Ctx, `SELECT count(*) FROM switchboard.outbox WHERE state IN ('pending', 'held', 'claimed')`).Scan(&n))
	return n
}

// drainDelivered collects attempts until as many delivered ones as the
// database has delivered records are in seen: an attempt is reported just
// after its rows are recorded, so the last ones may lag.
func drainDelivered(rt *rapid.T, w *hosttest.World, sink int64, seen []engine.Attempt) []engine.Attempt {
	rt.Helper()
	var want int
	require.NoError(rt, w.Pool.QueryRow(w.Ctx,
		`SELECT count(*) FROM switchboard.delivery_records WHERE sink_id = $1 AND status = 'delivered'`, sink).Scan(&want))
	for {
		got := 0
		for _, a := range seen {
			if a.SinkID == sink && a.State == "delivered" {
				got++
			}
		}
		if got >= want {
			require.Equal(rt, want, got, "delivered attempts reported against delivered records")
			return seen
		}
		a, ok := w.NextAttempt(waitLimit())
		if !ok {
			rt.Fatalf("%d delivered records but %d delivered attempts reported", want, got)
		}
		seen = append(seen, a)
	}
}

// requireEachRowDeliveredOnce checks that every outbox row of sink is
// delivered, and in exactly one delivered message: alone, or with the other
// held rows in a coalesced one.
func requireEachRowDeliveredOnce(rt *rapid.T, w *hosttest.World, sink int64, attempts []engine.Attempt) map[int64]int {
	rt.Helper()
	in := map[int64]int{} // row: how many delivered messages it was in
	for _, a := range attempts {
		if a.SinkID != sink || a.State != "delivered" {
			continue
		}
		for _, r := range a.Rows {
			in[r]++
		}
	}
	rows, err := w.Pool.Query(w.Ctx, `SELECT id, state FROM switchboard.outbox WHERE sink_id = $1 ORDER BY id`, sink)
	require.NoError(rt, err)
	var ids []int64
	for rows.Next() {
		var (
			id    int64
			state string
		)
		require.NoError(rt, rows.Scan(&id, &state))
		require.Equal(rt, "delivered", state, "row %d", id)
		require.Equal(rt, 1, in[id], "row %d is in %d delivered messages", id, in[id])
		ids = append(ids, id)
	}
	require.NoError(rt, rows.Err())
	for id := range in {
		require.True(rt, slices.Contains(ids, id), "a delivered message names row %d, not of this sink", id)
	}
	return in
}

// TestBudgetAcrossInstances checks Invariant 4 (D8): with one to four
// engines, each with a pool of its own, draining one database, a sink with
// a random budget (per hour 1..120, burst 1..30) fed bursts of distinct
// dead letters separated by random gaps of fake time never sends more than
// its token bucket allows. From the sink's counted delivery records, for
// every pair of sends i ≤ j, the sends in [t_i, t_j] number at most
// burst + perHour × (t_j − t_i) / 1h. Once enough time passes every row is
// delivered, in exactly one message (alone, or coalesced with the other
// held rows), and the receiver got one request per counted record.
func TestBudgetAcrossInstances(t *testing.T) {
	failFast(t)
	w := newWorld(t)
	rc := newReceiver(t, w.Clock)
	mgr := w.Engine(quietJanitor) // management and Emit; it does not deliver

	rapid.Check(t, func(rt *rapid.T) {
		require.NoError(rt, w.Reset())
		rc.reset(nil)
		instances := rapid.IntRange(1, 4).Draw(rt, "instances")
		perHour := rapid.IntRange(engine.BudgetPerHourMinDefault, engine.BudgetPerHourMaxDefault).Draw(rt, "perHour")
		burst := rapid.IntRange(engine.BudgetBurstMinDefault, engine.BudgetBurstMaxDefault).Draw(rt, "burst")
		type batch struct {
			gap  time.Duration
			size int
		}
		var (
			batches []batch
			total   int
		)
		for i := range rapid.IntRange(1, 5).Draw(rt, "batches") {
			b := batch{
				gap:  gapGen.Draw(rt, fmt.Sprintf("batch%d.gap", i)),
				size: rapid.IntRange(0, min(burst+4, 40-total)).Draw(rt, fmt.Sprintf("batch%d.size", i)),
			}
			total += b.size
			batches = append(batches, b)
		}

		for range instances {
			// stop runs when the check ends, failed or not (a failure
			// panics through the defers), and w.Start's own cleanup runs
			// it at the test's end: it stops the engine and closes its
			// pool, giving up with its reason (enginetest.World.closePool).
			_, stop := w.Start(quietJanitor)
			defer stop()
		}
		_, p, scope := w.Human()
		sink := w.Sink(mgr, p, scope, enginetest.SinkOpts{BaseURL: rc.URL, Secret: "gtfya.budget-token", PerHour: perHour, Burst: burst})

		var attempts []engine.Attempt
		todo := int64(0)
		for _, b := range batches {
			if b.gap > 0 {
				w.Clock.Advance(b.gap)
			}
			evs := make([]engine.Event, b.size)
			for i := range evs {
				todo++
				evs[i] = deadLetter(scope, todo)
			}
			emit(rt, w, mgr, evs...)
			attempts = append(attempts, settle(rt, w)...)
		}
		// A token returns within the hour: held rows go out, coalesced.
		for range 3 {
			if openRows(rt, w) == 0 {
				break
			}
			w.Clock.Advance(time.Hour + time.Minute)
			attempts = append(attempts, settle(rt, w)...)
		}
		require.Zero(rt, openRows(rt, w), "rows still open after hours of budget")
		attempts = drainDelivered(rt, w, sink, attempts)

		// The bucket, from the counted delivery records.
		rows, err := w.Pool.Query(w.Ctx, `
			SELECT sent_at FROM switchboard.delivery_records WHERE sink_id = $1 AND counts_budget ORDER BY sent_at`, sink)
		require.NoError(rt, err)
		var sent []time.Time
		for rows.Next() {
			var at time.Time
			require.NoError(rt, rows.Scan(&at))
			sent = append(sent, at)
		}
		require.NoError(rt, rows.Err())
		for i := range sent {
			if i > 0 && sent[i].Equal(sent[i-1]) {
				continue // the pair's count starts at the first send of t_i
			}
			for j := i; j < len(sent); j++ {
				last := j
				for last+1 < len(sent) && sent[last+1].Equal(sent[j]) {
					last++
				}
				n := int64(last - i + 1)
				d := sent[j].Sub(sent[i])
				// n ≤ burst + perHour × d / 1h, in integers.
				if n*int64(time.Hour) > int64(burst)*int64(time.Hour)+int64(perHour)*int64(d) {
					rt.Fatalf("%d sends in [%v, %v] (%v) exceed the bucket (%d/h, burst %d): sends at %v",
						n, sent[i].Sub(enginetest.Start), sent[j].Sub(enginetest.Start), d, perHour, burst, offsets(sent))
				}
			}
		}

		// Every row delivered, once; one request per counted record.
		in := requireEachRowDeliveredOnce(rt, w, sink, attempts)
		require.Len(rt, in, total, "rows delivered against events emitted")
		require.Len(rt, rc.received(), len(sent), "requests against counted delivery records")
	})
}

// offsets prints times as offsets from the first, for failure messages.
func offsets(ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(ts[0])
	}
	return out
}
