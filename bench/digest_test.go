package bench_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// BenchmarkDigestBuild builds one digest (every section, from the reference
// host's sources, as digests.Service.Preview does) for an owner with 50 queues and
// 100,000 todos (70% done, 15% pending, 10% dead, 5% claimed), beside
// another owner with as many. Each iteration also runs, interleaved, the
// baseline: one scan of the owner's todos counting them by queue and state
// (what the sections would cost without their indexes). It reports the
// medians of both and their ratio; the target is a digest p50 ≤ 100 ms
// (REQ-13, docs/BENCHMARKS.md).
func BenchmarkDigestBuild(b *testing.B) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, hosttest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	f := hosttest.NewFactory(b, pool)
	humanID := f.Human("")
	owner := hostid.Human(humanID)
	other := hostid.Human(f.Human(""))
	for _, o := range []notifytype.OwnerScope{owner, other} {
		for range 50 {
			f.Queue(o, "")
		}
		if _, err := pool.Exec(ctx, `
			INSERT INTO todos (queue_id, owner, title, state, lease_expires_at, last_heartbeat_at, updated_at, created_at)
			SELECT q.ids[1 + g % 50], $1, 'todo ' || g, s.state,
			       CASE WHEN s.state = 'claimed' THEN now() + interval '4 minutes' END,
			       CASE WHEN s.state = 'claimed' THEN now() END,
			       now() - (g % 2880) * interval '1 minute', now() - (g % 2880) * interval '1 minute'
			FROM generate_series(1, 100000) g
			CROSS JOIN (SELECT array_agg(id ORDER BY id) AS ids FROM queues WHERE owner = $1) q
			CROSS JOIN LATERAL (SELECT CASE WHEN g % 20 < 14 THEN 'done' WHEN g % 20 < 17 THEN 'pending'
			                                WHEN g % 20 < 19 THEN 'dead' ELSE 'claimed' END AS state) s`, o.String()); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE todos`); err != nil {
		b.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Pool: pool, Directory: host.NewDirectory(pool), Events: host.Events(), Links: host.Links()})
	if err != nil {
		b.Fatal(err)
	}
	dgs := digests.New(eng, digests.Config{Sources: host.NewDigestSources(pool)})
	sink := f.Sink(storetest.SinkOpts{Owner: owner})
	p := engine.HumanPrincipal(hostid.String(humanID))
	d, err := dgs.Create(ctx, p, digests.Input{Owner: owner, Name: "bench", Schedule: "* 09:00", SinkIDs: []int64{sink}})
	if err != nil {
		b.Fatal(err)
	}

	var built, scans []time.Duration
	for b.Loop() {
		start := time.Now()
		pv, err := dgs.Preview(ctx, p, d.ID)
		if err != nil {
			b.Fatal(err)
		}
		built = append(built, time.Since(start))
		if len(pv.Report.Queues) != 50 || !pv.Report.Pending.Available() || !pv.Report.DeadLetters.Available() {
			b.Fatalf("the digest is not whole: %d queues, %v", len(pv.Report.Queues), pv.Report.Unavailable())
		}
		start = time.Now()
		rows, err := pool.Query(ctx, `SELECT queue_id, state, count(*), min(created_at) FROM todos WHERE owner = $1 GROUP BY 1, 2`, owner.String())
		if err != nil {
			b.Fatal(err)
		}
		rows.Close()
		scans = append(scans, time.Since(start))
	}
	b.StopTimer()
	p50 := func(v []time.Duration) time.Duration {
		slices.Sort(v)
		return v[len(v)/2]
	}
	dp50, sp50 := p50(built), p50(scans)
	b.ReportMetric(float64(dp50.Microseconds())/1000, "digest-p50-ms")
	b.ReportMetric(float64(sp50.Microseconds())/1000, "scan-p50-ms")
	b.ReportMetric(float64(dp50)/float64(sp50), "digest/scan")
}
