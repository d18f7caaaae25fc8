package bench_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard/notify/store"
)

// claimBacklog is the backlog BenchmarkClaim claims from: the drain's
// (cmd/drainratio), 10 sinks of one owner scope. It writes a fresh one
// when claimLow rows are left, before a sink runs out of due rows and a
// claim takes fewer than it asks for.
const (
	claimBacklog = 20000
	claimLow     = 2000
)

// BenchmarkClaim measures one claim statement (store.ClaimDue, as the
// claimer sends it) against the rows it takes, one claim after another on
// one connection, from a fanned-out backlog: what a claim costs the
// database however few rows it takes, and what each row adds. rows=0
// claims with nothing due. A split instance pays the first figure over
// fewer rows (docs/BENCHMARKS.md, session 26). Writing a fresh backlog
// when the last runs low is left out of the timer and the meter. Reported
// per claim: wall time (ns/op), the database's backends' CPU, and the rows
// taken.
func BenchmarkClaim(b *testing.B) {
	ctx := context.Background()
	r, f, eng := fleetEngine(b, 1, "claim")
	refill := func() {
		if err := r.Truncate(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := r.Backlog(ctx, eng, f, claimBacklog); err != nil {
			b.Fatal(err)
		}
		if err := r.FanOutBacklog(ctx, eng); err != nil {
			b.Fatal(err)
		}
	}
	for _, k := range []int{0, 1, 32, 256} {
		b.Run(fmt.Sprintf("rows=%d", k), func(b *testing.B) {
			b.StopTimer()
			refill()
			var (
				claims, rows int
				dbCPU        time.Duration
				left         = claimBacklog
			)
			meter := r.StartCPU(ctx)
			b.StartTimer()
			for range b.N {
				if k > 0 && left-k < claimLow {
					b.StopTimer()
					_, db := meter.Stop(ctx)
					dbCPU += db
					refill()
					left = claimBacklog
					meter = r.StartCPU(ctx)
					b.StartTimer()
				}
				p := store.ClaimParams{Instance: "bench", Now: time.Now(), TTL: time.Hour,
					Limit: max(k, 1), PerSink: 32, SkipExpired: true}
				if k == 0 {
					p.Now = p.Now.Add(-time.Hour) // before the backlog: nothing due
				}
				got, err := store.ClaimDue(ctx, r.Pool, p)
				if err != nil {
					b.Fatal(err)
				}
				if len(got) != k {
					b.Fatalf("claimed %d rows, want %d", len(got), k)
				}
				claims++
				rows += len(got)
				left -= len(got)
			}
			b.StopTimer()
			_, db := meter.Stop(ctx)
			dbCPU += db
			b.ReportMetric(float64(dbCPU.Microseconds())/float64(claims), "db-µs/claim")
			b.ReportMetric(float64(rows)/float64(claims), "rows/claim")
		})
	}
}

// BenchmarkClaimBesideAnotherInstance measures a claim of 32 rows while
// another instance holds sinks of the same backlog: held=N is that
// instance's claimed rows, over N/64 of the 10 sinks (a full mailbox a
// sink), whose sinks every claim here must leave alone (claimDueSQL's
// "elsewhere"). What it costs beyond held=0 is what a split pays each
// claim for the rows the other instance holds. The other instance claims
// again with each fresh backlog.
func BenchmarkClaimBesideAnotherInstance(b *testing.B) {
	ctx := context.Background()
	r, f, eng := fleetEngine(b, 1, "claimbeside")
	const k = 32
	for _, held := range []int{0, 64, 320} {
		refill := func() {
			if err := r.Truncate(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := r.Backlog(ctx, eng, f, claimBacklog); err != nil {
				b.Fatal(err)
			}
			if err := r.FanOutBacklog(ctx, eng); err != nil {
				b.Fatal(err)
			}
			if held == 0 {
				return
			}
			sinks := f.Owners[0].Sinks
			got, err := store.ClaimDue(ctx, r.Pool, store.ClaimParams{Instance: "other", Now: time.Now(), TTL: time.Hour,
				Limit: held, PerSink: 64, SkipExpired: true, SkipSinks: sinks[held/64:]})
			if err != nil {
				b.Fatal(err)
			}
			if len(got) != held {
				b.Fatalf("the other instance claimed %d rows, want %d", len(got), held)
			}
		}
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			b.StopTimer()
			refill()
			var (
				claims, rows int
				dbCPU        time.Duration
				free         = claimBacklog / 10 * (10 - held/64) // the rows of the sinks left to this claim
				left         = free
			)
			meter := r.StartCPU(ctx)
			b.StartTimer()
			for range b.N {
				if left-k < claimLow {
					b.StopTimer()
					_, db := meter.Stop(ctx)
					dbCPU += db
					refill()
					left = free
					meter = r.StartCPU(ctx)
					b.StartTimer()
				}
				got, err := store.ClaimDue(ctx, r.Pool, store.ClaimParams{Instance: "bench", Now: time.Now(), TTL: time.Hour,
					Limit: k, PerSink: 32, SkipExpired: true})
				if err != nil {
					b.Fatal(err)
				}
				if len(got) != k {
					b.Fatalf("claimed %d rows, want %d", len(got), k)
				}
				claims++
				rows += len(got)
				left -= len(got)
			}
			b.StopTimer()
			_, db := meter.Stop(ctx)
			dbCPU += db
			b.ReportMetric(float64(dbCPU.Microseconds())/float64(claims), "db-µs/claim")
		})
	}
}
