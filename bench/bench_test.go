package bench_test

import (
	"context"
	"testing"

	"github.com/switchboard/notify/bench/internal/workload"
	"github.com/switchboard/notify/host/hosttest"
)

// setup creates one database for every sub-benchmark of the calling
// benchmark (storetest clones it from the migrated template), adds River's
// tables and the fixtures.
func setup(b *testing.B) *workload.World {
	b.Helper()
	ctx := context.Background()
	pool, err := workload.OpenPool(ctx, hosttest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if err := workload.MigrateRiver(ctx, pool); err != nil {
		b.Fatalf("error migrating River: %v", err)
	}
	w, err := workload.Setup(ctx, pool, hosttest.NewFactory(b, pool))
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// BenchmarkHostTx measures a host's small transaction (UPDATE a todo,
// INSERT an attempt, commit) bare, with engine.Emit matching 1 or 10 sinks,
// and with a River InsertTx. Sub-benchmarks run one after the other, so
// compare them with cmd/emitratio, which interleaves them.
func BenchmarkHostTx(b *testing.B) {
	w := setup(b)
	ctx := context.Background()
	for _, v := range workload.Variants {
		b.Run(v.String(), func(b *testing.B) {
			for b.Loop() {
				if err := w.HostTx(ctx, v); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
		})
	}
	b.StopTimer()
	c, err := w.Count(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Check(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStorm measures workload.StormWorkers concurrent writers, each
// one transaction per event: engine.Emit of delivery.quarantined on one
// webhook (hot: one open row, repeats appended) or on one webhook each
// (distinct), and for reference a plain INSERT ... ON CONFLICT DO UPDATE
// count+1 on one row or on one row each.
func BenchmarkStorm(b *testing.B) {
	w := setup(b)
	ctx := context.Background()
	for _, m := range workload.StormModes {
		b.Run(m.String(), func(b *testing.B) {
			if _, err := w.Storm(ctx, m, b.N); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
	b.StopTimer()
	c, err := w.Count(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Check(); err != nil {
		b.Fatal(err)
	}
}
