package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard/notify/bench/internal/fleet"
	"github.com/switchboard/notify/bench/internal/rig"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/internal/testhooks"
)

// fanOutRows is the backlog each op of BenchmarkFanOut fans out: 500
// events, each reaching its owner's 10 sinks, one statement's worth
// (the engine's fan-out batch).
const fanOutRows = 5000

// BenchmarkFanOut measures the fan-out of a drain of events: the events
// of a backlog (the drain's, cmd/drainratio: a dead letter reaching its
// owner's 10 sinks) turned into outbox rows, the work an engine does
// before it claims them and that the drain's baselines, whose jobs are
// written before they start, do not do. Each op fans out a fresh backlog
// of fanOutRows rows through the engine's own path (testhooks.FanOut);
// emitting it and emptying the tables are left out of the timer. Reported
// per row: wall time and the CPU of the database's backends.
func BenchmarkFanOut(b *testing.B) {
	ctx := context.Background()
	r, f, eng := fleetEngine(b, 50, "fanout")
	var (
		rows        int
		wall, dbCPU time.Duration
	)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if err := r.Truncate(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := r.Backlog(ctx, eng, f, fanOutRows); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		meter, t0 := r.StartCPU(ctx), time.Now()
		if _, err := testhooks.FanOut(ctx, eng); err != nil {
			b.Fatal(err)
		}
		wall += time.Since(t0)
		_, db := meter.Stop(ctx)
		dbCPU += db
		var n int
		if err := r.Pool.QueryRow(ctx, `SELECT count(*) FROM switchboard.outbox`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		if n != fanOutRows {
			b.Fatalf("fanned out %d rows, want %d", n, fanOutRows)
		}
		rows += n
	}
	b.ReportMetric(float64(wall.Microseconds())/float64(rows), "µs/row")
	b.ReportMetric(float64(dbCPU.Microseconds())/float64(rows), "db-µs/row")
}

// fleetEngine opens a rig (a database of its own, closed when b ends) with
// a fleet of scopes owner scopes of 10 sinks each, their budgets lifted,
// and an engine on the rig's pool that does not serve: the drain's set-up
// (cmd/drainratio) for a benchmark of one of its statements.
func fleetEngine(b *testing.B, scopes int, tag string) (*rig.Rig, *fleet.Fleet, *engine.Engine) {
	b.Helper()
	ctx := context.Background()
	r, err := rig.Open(ctx, 4)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close(false) })
	f, err := r.Fleet(ctx, scopes, 10, rig.LiftedPerHour, rig.LiftedBurst, tag)
	if err != nil {
		b.Fatal(err)
	}
	eng, err := engine.New(r.Config(r.Pool, true))
	if err != nil {
		b.Fatal(err)
	}
	return r, f, eng
}
