package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard/notify/bench/internal/workload"
	"github.com/switchboard/notify/host/hosttest"
)

// ownerScopeValues is how many owner scopes one statement of
// BenchmarkOwnerScopeCheck casts.
const ownerScopeValues = 10000

// BenchmarkOwnerScopeCheck measures the owner scope domain's check, which
// the database runs for every outbox row the fan-out writes (the event's
// owner is cast to switchboard.owner_scope): the time of a statement that
// casts ownerScopeValues values, less that of the same statement without
// the cast, per value. Beside it, in the same op, migration 0025's regular
// expression, which the check was until migration 0031, on the same
// values: the ratio is the check's cost against the old one's, measured
// interleaved. Two shapes of owner: a host's integer id (the drains'
// owners) and a uuid.
func BenchmarkOwnerScopeCheck(b *testing.B) {
	ctx := context.Background()
	pool, err := workload.OpenPool(ctx, hosttest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	timed := func(sql string, args ...any) time.Duration {
		t0 := time.Now()
		var n int
		if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			b.Fatal(err)
		}
		if n != ownerScopeValues {
			b.Fatalf("%d values, want %d", n, ownerScopeValues)
		}
		return time.Since(t0)
	}
	for _, shape := range []struct{ name, values string }{
		{"integer", `SELECT 'human:' || (1000 + i % 9000) AS v FROM generate_series(1, $1::int) i`},
		{"uuid", `SELECT 'team:' || md5(i::text)::uuid AS v FROM generate_series(1, $1::int) i`},
	} {
		b.Run(shape.name, func(b *testing.B) {
			var bare, domain, rule0025 time.Duration
			for b.Loop() {
				bare += timed(`SELECT count(v) FROM (`+shape.values+`) s`, ownerScopeValues)
				domain += timed(`SELECT count(v::switchboard.owner_scope) FROM (`+shape.values+`) s`, ownerScopeValues)
				rule0025 += timed(`SELECT count(*) FILTER (WHERE v ~ '^(human|team):[A-Za-z0-9._~:@-]{1,128}$') FROM (`+shape.values+`) s`, ownerScopeValues)
			}
			per := func(d time.Duration) float64 {
				return float64((d - bare).Nanoseconds()) / 1000 / float64(b.N*ownerScopeValues)
			}
			b.ReportMetric(per(domain), "check-µs/value")
			b.ReportMetric(per(rule0025), "0025-µs/value")
			b.ReportMetric(per(domain)/per(rule0025), "check/0025")
		})
	}
}
