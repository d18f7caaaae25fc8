package properties

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// skewedClock is the real clock read by an instance whose wall clock is
// off by skew: its timers run at the real pace.
type skewedClock struct {
	clockwork.Clock
	skew time.Duration
}

func (c skewedClock) Now() time.Time                  { return c.Clock.Now().Add(c.skew) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c skewedClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// skews are how far the instances' clocks are off: minutes (under and
// over the claim TTL) or a day, either way.
var skews = []time.Duration{
	-24 * time.Hour, -20 * time.Minute, -90 * time.Second, 3*time.Minute + 7*time.Second, 20 * time.Minute, 24 * time.Hour,
}

// TestInstanceClocksDisagree runs six engines on the database's own clock
// (no test clock stands in for it), whose own clocks disagree by minutes or
// a day, all draining one database. Each check emits, through engines it
// draws, dead letters and quarantines for one sink with a small burst and a
// rate of one an hour (no token returns during a check). Every instant the
// engines compare comes from the database, so:
//   - the sink gets exactly min(dead letters, burst) messages: its budget
//     is never overspent, and never muted by an instance that is ahead;
//   - no row is sent twice: one counted record per row sent;
//   - a quarantine row waits out its 10-minute window by the database's
//     clock: it is due 10 minutes after its event, and is not sent.
func TestInstanceClocksDisagree(t *testing.T) {
	// Scenario: Two instances
	w := newWorld(t)
	rc := newReceiver(t, clockwork.NewRealClock())
	mgr := w.Engine(quietJanitor)
	engines := make([]*engine.Engine, len(skews))
	for i, skew := range skews {
		engines[i], _ = w.Start(func(c *engine.Config) {
			quietJanitor(c)
			c.Clock = skewedClock{clockwork.NewRealClock(), skew}
			testhooks.SetDatabaseClock(c, nil) // production: the database's clock
		})
	}

	rapid.Check(t, func(rt *rapid.T) {
		require.NoError(rt, w.Reset())
		rc.reset(nil)
		burst := rapid.IntRange(1, 4).Draw(rt, "burst")
		deadLetters := rapid.IntRange(1, burst+4).Draw(rt, "deadLetters")
		quarantines := rapid.IntRange(0, 2).Draw(rt, "quarantines")
		emitters := rapid.SliceOfN(rapid.IntRange(0, len(engines)-1), deadLetters+quarantines, deadLetters+quarantines).
			Draw(rt, "emitters")

		_, p, scope := w.Human()
		sink := w.Sink(mgr, p, scope, enginetest.SinkOpts{
			BaseURL: rc.URL, Secret: "gtfya.skew-token", PerHour: 1, Burst: burst,
			Events: []notifytype.EventType{host.EventTodoDeadLettered, host.EventDeliveryQuarantined},
		})
		var emitted time.Time
		require.NoError(rt, w.Pool.QueryRow(w.Ctx, `SELECT clock_timestamp()`).Scan(&emitted))
		for i, k := range emitters {
			eng := engines[k]
			ev := engine.Event{Type: host.EventTodoDeadLettered, Owner: scope, OccurrenceKey: host.DeadLetterKey(int64(i+1), 1),
				Content: sinks.Content{Title: fmt.Sprintf("todo %d", i+1)}}
			if i >= deadLetters {
				ev = engine.Event{Type: host.EventDeliveryQuarantined, Owner: scope, WebhookID: int64(i + 1), Subject: host.QuarantineSubject(int64(i + 1)),
					Content: sinks.Content{Title: "quarantined"}}
			}
			require.NoError(rt, pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error { return eng.Emit(w.Ctx, tx, ev) }))
		}

		// Wait until every dead letter is sent or held and every event fanned
		// out; the quarantine rows wait out their window.
		deadline := time.Now().Add(attemptTimeout)
		for {
			var busy int
			require.NoError(rt, w.Pool.QueryRow(w.Ctx, `
				SELECT (SELECT count(*) FROM switchboard.outbox_events) + (SELECT count(*) FROM switchboard.outbox
				WHERE state = 'claimed' OR (state = 'pending' AND event_type <> 'delivery.quarantined'))`).Scan(&busy))
			if busy == 0 {
				break
			}
			if time.Now().After(deadline) {
				rt.Fatalf("%d rows still due or claimed after %v", busy, attemptTimeout)
			}
			w.NextAttempt(25 * time.Millisecond)
		}

		require.Len(rt, rc.received(), min(deadLetters, burst), "sends: exactly the burst's worth")
		var counted, rowsSent, twice int
		require.NoError(rt, w.Pool.QueryRow(w.Ctx, `
			SELECT count(*), count(DISTINCT outbox_id),
			       (SELECT count(*) FROM (SELECT outbox_id FROM switchboard.delivery_records WHERE sink_id = $1 AND status = 'delivered'
			                              GROUP BY outbox_id HAVING count(*) > 1) x)
			FROM switchboard.delivery_records WHERE sink_id = $1 AND counts_budget`, sink).Scan(&counted, &rowsSent, &twice))
		require.Equal(rt, min(deadLetters, burst), counted)
		require.Equal(rt, counted, rowsSent)
		require.Zero(rt, twice, "a row sent twice")

		if quarantines > 0 {
			var due time.Time
			var state string
			require.NoError(rt, w.Pool.QueryRow(w.Ctx,
				`SELECT due_at, state FROM switchboard.outbox WHERE sink_id = $1 AND event_type = 'delivery.quarantined'`, sink).Scan(&due, &state))
			require.Equal(rt, "pending", state)
			require.WithinDuration(rt, emitted.Add(engine.QuarantineWindowDefault), due, time.Minute,
				"the window is the database's 10 minutes")
		}
	})
}
