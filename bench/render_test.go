package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/notify/bench/internal/rig"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// BenchmarkRender words the rows of a drain of events as delivery does:
// renderEvents dead letters (the drain's event, cmd/drainratio), each
// reaching renderSinks sinks, in an order where every sink's rows come in
// event order and the sinks take turns at random (as their actors do).
// Each op words the whole sequence twice, interleaved: with the wordings
// the engine keeps (one call of the kind's Message an event, when its
// wording is still kept at its next row) and afresh. It reports µs a row
// of each, their ratio, and the share of rows that found their event's
// wording kept (%found: the rows whose wording called no Message).
func BenchmarkRender(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("sinks=%d", n), func(b *testing.B) {
			benchRender(b, renderEvents, n)
		})
	}
}

const renderEvents = 2000

func benchRender(b *testing.B, events, sinkCount int) {
	ctx := context.Background()
	r, err := rig.Open(ctx, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close(false) })
	rows := make([]store.OutboxRow, 0, events*sinkCount)
	payloads := make([][]byte, events)
	for i := range payloads {
		ev := r.Event(notifytype.Human("1"))
		if payloads[i], err = json.Marshal(ev.Content); err != nil {
			b.Fatal(err)
		}
	}
	next := make([]int, sinkCount) // each sink's next event
	rnd := rand.New(rand.NewPCG(1, 2))
	for len(rows) < cap(rows) {
		s := rnd.IntN(sinkCount)
		if next[s] == events {
			continue
		}
		rows = append(rows, store.OutboxRow{SinkID: int64(s + 1), EventType: string(host.EventTodoDeadLettered),
			Severity: string(notifytype.SeverityHigh), Count: 1, Payload: payloads[next[s]]})
		next[s]++
	}
	// The host's kinds, each Message counted.
	cfg := r.Config(r.Pool, true)
	var calls atomic.Int64
	cfg.Events = slices.Clone(cfg.Events)
	for i := range cfg.Events {
		words := cfg.Events[i].Message
		cfg.Events[i].Message = func(m engine.EventMessage) sinks.Draft {
			calls.Add(1)
			return words(m)
		}
	}
	pass := func(eng *engine.Engine, kept bool) time.Duration {
		t0 := time.Now()
		for i := range rows {
			testhooks.Render(eng, rows[i], kept)
		}
		return time.Since(t0)
	}
	var kept, fresh time.Duration
	var keptCalls int64
	b.ResetTimer()
	for op := range b.N {
		// A fresh engine each op: its kept wordings start empty. The two
		// passes take turns at going first.
		eng, err := engine.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if op%2 == 1 {
			fresh += pass(eng, false)
		}
		c0 := calls.Load()
		kept += pass(eng, true)
		keptCalls += calls.Load() - c0
		if op%2 == 0 {
			fresh += pass(eng, false)
		}
	}
	n := float64(b.N * len(rows))
	b.ReportMetric(float64(kept.Nanoseconds())/1e3/n, "kept-µs/row")
	b.ReportMetric(float64(fresh.Nanoseconds())/1e3/n, "fresh-µs/row")
	b.ReportMetric(float64(kept)/float64(fresh), "kept/fresh")
	b.ReportMetric(100*(1-float64(keptCalls)/n), "%found")
}
