package bench_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard/notify/bench/internal/fleet"
	"github.com/switchboard/notify/bench/internal/rig"
	"github.com/switchboard/notify/engine"
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
	for _, k := range []int{0, 1, 32, 256} {
		b.Run(fmt.Sprintf("rows=%d", k), func(b *testing.B) {
			claims, rows := meterClaims(b, r, k, claimBacklog, func() { freshBacklog(b, r, eng, f) },
				func() ([]store.OutboxRow, error) {
					p := store.ClaimParams{Instance: "bench", Now: time.Now(), TTL: time.Hour,
						Limit: max(k, 1), PerSink: 32, SkipExpired: true}
					if k == 0 {
						p.Now = p.Now.Add(-time.Hour) // before the backlog: nothing due
					}
					return store.ClaimDue(ctx, r.Pool, p)
				})
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
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			refill := func() {
				freshBacklog(b, r, eng, f)
				if held == 0 {
					return
				}
				got, err := store.ClaimDue(ctx, r.Pool, store.ClaimParams{Instance: "other", Now: time.Now(), TTL: time.Hour,
					Limit: held, PerSink: 64, SkipExpired: true, SkipSinks: f.Owners[0].Sinks[held/64:]})
				if err != nil {
					b.Fatal(err)
				}
				if len(got) != held {
					b.Fatalf("the other instance claimed %d rows, want %d", len(got), held)
				}
			}
			free := claimBacklog / 10 * (10 - held/64) // the rows of the sinks left to this claim
			meterClaims(b, r, k, free, refill, func() ([]store.OutboxRow, error) {
				return store.ClaimDue(ctx, r.Pool, store.ClaimParams{Instance: "bench", Now: time.Now(), TTL: time.Hour,
					Limit: k, PerSink: 32, SkipExpired: true})
			})
		})
	}
}

// freshBacklog empties the rig's tables and writes a backlog of
// claimBacklog rows over f's sinks, fanned out.
func freshBacklog(b *testing.B, r *rig.Rig, eng *engine.Engine, f *fleet.Fleet) {
	b.Helper()
	ctx := context.Background()
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

// meterClaims runs b.N claims (claim), each of which must take want rows,
// after refill, and again whenever fewer than claimLow of the free rows
// the claims may take would be left (never when want is 0). Refills are
// left out of the timer and of the meter of the database's CPU. It
// reports db-µs/claim and returns the claims and the rows taken.
func meterClaims(b *testing.B, r *rig.Rig, want, free int, refill func(), claim func() ([]store.OutboxRow, error)) (claims, rows int) {
	ctx := context.Background()
	b.StopTimer()
	refill()
	var (
		dbCPU time.Duration
		left  = free
	)
	meter := r.StartCPU(ctx)
	b.StartTimer()
	for range b.N {
		if want > 0 && left-want < claimLow {
			b.StopTimer()
			_, db := meter.Stop(ctx)
			dbCPU += db
			refill()
			left = free
			meter = r.StartCPU(ctx)
			b.StartTimer()
		}
		got, err := claim()
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != want {
			b.Fatalf("claimed %d rows, want %d", len(got), want)
		}
		claims++
		rows += len(got)
		left -= len(got)
	}
	b.StopTimer()
	_, db := meter.Stop(ctx)
	dbCPU += db
	b.ReportMetric(float64(dbCPU.Microseconds())/float64(claims), "db-µs/claim")
	return claims, rows
}
