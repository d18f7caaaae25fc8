package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// dueOffsets drives one failing row through every attempt: after each
// attempt it reads when the row is due next and moves the fake clock
// there. It returns each retry's due time as an offset from the first
// attempt, and the attempts reported.
func dueOffsets(t *testing.T, w *hosttest.World, sink int64) ([]time.Duration, []engine.Attempt) {
	t.Helper()
	var (
		offsets  []time.Duration
		attempts []engine.Attempt
	)
	for {
		a := w.Wait()
		attempts = append(attempts, a)
		if a.State != "pending" {
			return offsets, attempts
		}
		var due, first time.Time
		require.NoError(t, w.Pool.QueryRow(w.Ctx,
			`SELECT due_at, first_attempt_at FROM switchboard.outbox WHERE sink_id = $1`, sink).Scan(&due, &first))
		offsets = append(offsets, due.Sub(first))
		if d := due.Sub(w.Clock.Now()); d > 0 {
			w.Clock.Advance(d)
		}
	}
}

// A server's Retry-After delays an attempt at most to the next slot of the
// D10 schedule: it never stretches the schedule past its ~31.5 minutes and
// never adds an attempt (D24).
func TestDeliveryRetryAfterStaysInsideTheSchedule(t *testing.T) {
	t.Parallel()
	// Scenario: Sink down
	for name, c := range map[string]struct {
		retryAfter string
		want       []time.Duration // due offsets of attempts 2..7
	}{
		// Without the bound, a day's wait put attempts at +24 h, +48 h, …
		"a day": {"86400", []time.Duration{90, 210, 450, 930, 1890, 1890}},
		// A short wait is honoured where it falls inside the schedule.
		"45 seconds": {"45", []time.Duration{45, 90, 210, 450, 930, 1890}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := hosttest.NewWorld(t)
			var hits atomic.Int64
			srv := newServer(t, func(rw http.ResponseWriter, _ *http.Request) {
				hits.Add(1)
				rw.Header().Set("Retry-After", c.retryAfter)
				rw.WriteHeader(http.StatusServiceUnavailable)
			})
			_, p, scope := w.Human()
			eng := w.Serve()
			sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: srv, Secret: "gtfya.retry-after"})
			w.Emit(eng, deadLetterOf(scope, 1))

			offsets, attempts := dueOffsets(t, w, sink)
			for i := range c.want {
				c.want[i] *= time.Second
			}
			require.Equal(t, c.want, offsets)
			require.Len(t, attempts, engine.MaxAttempts)
			last := attempts[len(attempts)-1]
			require.Equal(t, "undeliverable", last.State)
			require.Equal(t, engine.MaxAttempts, last.Attempt)
			require.EqualValues(t, engine.MaxAttempts, hits.Load())
			w.Clock.Advance(48 * time.Hour)
			_, err := w.Settle()
			require.NoError(t, err)
			require.EqualValues(t, engine.MaxAttempts, hits.Load(), "no attempt after the seventh")
		})
	}
}

// newServer starts an httptest server answering with h and returns its URL.
func newServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// logLines returns the world's log lines whose message is msg, decoded.
func logLines(w *hosttest.World, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(w.Logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// recordsOf returns the status and class of every delivery record of a
// sink, oldest first, and how many of them count against its budget.
func recordsOf(t *testing.T, w *hosttest.World, sink int64) (statuses []string, counted int) {
	t.Helper()
	for _, r := range deliveryRecords(t, w, sink) {
		statuses = append(statuses, r.Status+"/"+r.Class)
	}
	require.NoError(t, w.Pool.QueryRow(w.Ctx,
		`SELECT count(*) FROM switchboard.delivery_records WHERE sink_id = $1 AND counts_budget`, sink).Scan(&counted))
	return statuses, counted
}

// A panicking adapter is recovered into a classified failure (abandoned):
// logged with sink, event type, scope and class, recorded, retried on
// schedule, and its actor is not restarted (D25).
func TestDeliveryAdapterPanicIsAbandonedAttempt(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	var panicking atomic.Bool
	panicking.Store(true)
	eng := w.ServeWith(func(e *engine.Engine) {
		testhooks.WrapAdapters(e, func(_ int64, a sinks.Adapter) sinks.Adapter {
			return adapterFunc(func(ctx context.Context, m sinks.Message) sinks.Result {
				if panicking.Load() {
					panic("adapter exploded")
				}
				return a.Deliver(ctx, m)
			})
		})
	})
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.panics"})
	w.Emit(eng, deadLetterOf(scope, 1))

	a := w.Wait()
	require.Equal(t, notifytype.ClassAbandoned, a.Class)
	require.Equal(t, "pending", a.State)
	require.Equal(t, 1, a.Attempt)
	lines := logLines(w, "delivery failed")
	require.Len(t, lines, 1, w.Logs.String())
	require.EqualValues(t, sink, lines[0]["sink_id"])
	require.Equal(t, "todo.dead_lettered", lines[0]["event_type"])
	require.Equal(t, scope.String(), lines[0]["owner_scope"])
	require.Equal(t, "abandoned", lines[0]["class"])
	require.NotContains(t, w.Logs.String(), "gtfya.panics")

	panicking.Store(false)
	w.Clock.Advance(engine.RetryDelay(2))
	a = w.Wait()
	require.Equal(t, "delivered", a.State)
	require.Equal(t, 2, a.Attempt)
	statuses, counted := recordsOf(t, w, sink)
	require.Equal(t, []string{"failed/abandoned", "delivered/"}, statuses)
	require.Equal(t, 2, counted, "the panicked attempt may have been sent: it counts")
	for _, s := range eng.AllSinkStatuses() {
		require.Zero(t, s.Restarts, "%+v", s)
	}
}

// abandon makes the sink's pending outbox rows look as an instance that
// died mid-send leaves them: claimed by it, the claim expired, attempts
// counted, and one delivery record still "sending" (one per row, or one
// coalesced record for all of them). It returns the rows.
func abandon(t *testing.T, w *hosttest.World, sink int64, attempts int, coalesced bool) []int64 {
	t.Helper()
	now := w.Clock.Now()
	var ids []int64
	require.NoError(t, pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(w.Ctx, `
			UPDATE switchboard.outbox SET state = 'claimed', claimed_by = 'instance-that-died', claim_expires_at = $2,
			       attempts = $3, first_attempt_at = $4
			WHERE sink_id = $1 AND state = 'pending' RETURNING id`,
			sink, now.Add(-time.Second), attempts, now.Add(-engine.RetryDelay(attempts)))
		if err != nil {
			return err
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return err
		}
		insert := func(outboxID *int64, n int) error {
			_, err := tx.Exec(w.Ctx, `
				WITH rec AS (
				    INSERT INTO switchboard.delivery_records (sink_id, owner, outbox_id, event_type, attempt, coalesced_rows, status, sent_at)
				    SELECT sink_id, owner, $2, event_type, $3, $4, 'sending', $5 FROM switchboard.outbox WHERE id = ($1::bigint[])[1]
				    RETURNING id)
				UPDATE switchboard.outbox SET attempt_record_id = (SELECT id FROM rec) WHERE id = ANY ($1)`,
				ids, outboxID, attempts, n, now.Add(-2*time.Minute))
			return err
		}
		if coalesced {
			return insert(nil, len(ids))
		}
		for _, id := range ids {
			if err := insert(&id, 1); err != nil {
				return err
			}
		}
		return nil
	}))
	return ids
}

// An attempt whose instance died mid-send is recorded as abandoned when
// the row is taken again, and the redelivery is logged (D25).
func TestDeliveryAbandonedAttemptIsRecordedAndRedelivered(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	eng := w.Engine()
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.abandoned"})
	w.Emit(eng, deadLetterOf(scope, 1))
	abandon(t, w, sink, 3, false)

	w.Serve()
	a := w.Wait()
	require.Equal(t, "delivered", a.State)
	require.Equal(t, 4, a.Attempt)
	statuses, counted := recordsOf(t, w, sink)
	require.Equal(t, []string{"failed/abandoned", "delivered/"}, statuses)
	require.Equal(t, 2, counted)
	lines := logLines(w, "redelivering an abandoned attempt")
	require.Len(t, lines, 1, w.Logs.String())
	require.EqualValues(t, sink, lines[0]["sink_id"])
	require.Equal(t, "abandoned", lines[0]["class"])
	require.EqualValues(t, 3, lines[0]["attempt"])
}

// A row whose seventh attempt was abandoned is finished undeliverable
// without an eighth send (D25).
func TestDeliveryAbandonedAtTheCapIsNeverSentAgain(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	eng := w.Engine()
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.capped"})
	w.Emit(eng, deadLetterOf(scope, 1))
	abandon(t, w, sink, engine.MaxAttempts, false)

	w.Serve()
	a := w.Wait()
	require.Equal(t, "undeliverable", a.State)
	require.Equal(t, notifytype.ClassAbandoned, a.Class)
	require.Equal(t, engine.MaxAttempts, a.Attempt)
	require.Empty(t, g.received(), "no eighth attempt")
	var attempts int
	var class string
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT attempts, last_class FROM switchboard.outbox WHERE sink_id = $1`, sink).Scan(&attempts, &class))
	require.Equal(t, engine.MaxAttempts, attempts)
	require.Equal(t, "abandoned", class)
	statuses, _ := recordsOf(t, w, sink)
	require.Equal(t, []string{"failed/abandoned"}, statuses)
}

// A coalesced message whose instance died mid-send does not leave its
// record "sending" (for the 30 days of retention): it is closed as
// abandoned when its rows are taken again.
func TestDeliveryAbandonedCoalescedFlushIsClosed(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	eng := w.Engine()
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.coalesced"})
	w.Emit(eng, deadLetterOf(scope, 1))
	w.Emit(eng, deadLetterOf(scope, 2))
	ids := abandon(t, w, sink, 2, true)
	require.Len(t, ids, 2)

	w.Serve()
	w.WaitN(2)
	var sending int
	require.NoError(t, w.Pool.QueryRow(w.Ctx,
		`SELECT count(*) FROM switchboard.delivery_records WHERE sink_id = $1 AND status = 'sending'`, sink).Scan(&sending))
	require.Zero(t, sending)
	statuses, _ := recordsOf(t, w, sink)
	require.Equal(t, "failed/abandoned", statuses[0])
}

// Stopping an engine gives back the rows queued in its actors' mailboxes,
// so another instance delivers them at once instead of after the claim
// TTL. The rows are queued behind a send in flight: a step takes every
// row queued when it begins, so rows queued before it would be reserved
// with the first, and given back unsent (TestAStopGivesBackTheRowsReservedButNotSent).
func TestDeliveryGracefulStopReleasesQueuedRows(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	entered, release := make(chan struct{}, 8), make(chan struct{})
	eng := w.Engine()
	testhooks.WrapAdapters(eng, func(_ int64, a sinks.Adapter) sinks.Adapter {
		return adapterFunc(func(ctx context.Context, m sinks.Message) sinks.Result {
			entered <- struct{}{}
			<-release
			return a.Deliver(ctx, m)
		})
	})
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.stop"})
	w.Emit(eng, deadLetterOf(scope, 1))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Serve(ctx) }()
	select {
	case <-entered:
	case <-time.After(enginetest.WaitTimeout):
		t.Fatal("no send began")
	}
	for i := range 2 {
		w.Emit(eng, deadLetterOf(scope, int64(i+2)))
	}
	waitQueued(t, eng, sink, 2)
	cancel()
	close(release)
	stopErr := <-done
	require.True(t, errors.Is(stopErr, context.Canceled), "%v", stopErr)
	require.Equal(t, "delivered", w.Wait().State, "the send that had begun is recorded")

	// The send in flight is delivered; the two rows queued are given
	// back, pending, none left claimed.
	require.Equal(t, map[string]int{"delivered": 1, "pending": 2}, w.RowStates(), "the stop said %v; the engine logged:\n%s", stopErr, w.Logs)
	var claimed int
	require.NoError(t, w.Pool.QueryRow(w.Ctx,
		`SELECT count(*) FROM switchboard.outbox WHERE sink_id = $1 AND claimed_by IS NOT NULL`, sink).Scan(&claimed))
	require.Zero(t, claimed)

	// Another instance delivers them without waiting for a claim to expire.
	w.Serve()
	for _, a := range w.WaitN(2) { // every row is reported once: the two after the first
		require.Equal(t, "delivered", a.State)
	}
	require.Len(t, g.received(), 3)
}

// emitCommitted emits ev in a transaction of its own and commits it,
// without fanning it out (as when the claimers are behind).
func emitCommitted(t *testing.T, w *hosttest.World, eng *engine.Engine, ev engine.Event) {
	t.Helper()
	require.NoError(t, pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error { return eng.Emit(w.Ctx, tx, ev) }))
}

// The sinks an event goes to are decided when the emitting transaction
// commits (REQ-10): a subscription added or removed before the fan-out
// changes nothing, and a sink disabled or deleted in that gap still ends in
// a delivery record.
func TestEmitDecidesSinksAtCommit(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	eng := w.Engine()
	opts := func(secret string) enginetest.SinkOpts {
		return enginetest.SinkOpts{BaseURL: g.URL, Secret: secret}
	}
	kept := w.Sink(eng, p, scope, opts("gtfya.kept"))
	unsubscribed := w.Sink(eng, p, scope, opts("gtfya.unsubscribed"))
	disabled := w.Sink(eng, p, scope, opts("gtfya.disabled"))
	deleted := w.Sink(eng, p, scope, opts("gtfya.deleted"))
	late := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.late", Events: []notifytype.EventType{engine.EventAgentNotify}})

	emitCommitted(t, w, eng, deadLetterOf(scope, 1))

	// The gap: subscriptions and sinks change before the fan-out.
	subs, err := eng.ListSubscriptions(w.Ctx, p, unsubscribed)
	require.NoError(t, err)
	require.NoError(t, eng.DeleteSubscription(w.Ctx, p, unsubscribed, subs[0].ID))
	_, err = eng.AddSubscription(w.Ctx, p, late, engine.SubscriptionInput{EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}})
	require.NoError(t, err)
	_, err = eng.SetSinkEnabled(w.Ctx, p, disabled, false)
	require.NoError(t, err)
	require.NoError(t, eng.DeleteSink(w.Ctx, p, deleted))

	w.FanOut(eng)
	var sinksWithRows []int64
	rows, err := w.Pool.Query(w.Ctx, `SELECT sink_id FROM switchboard.outbox ORDER BY sink_id`)
	require.NoError(t, err)
	sinksWithRows, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Equal(t, []int64{kept, unsubscribed, disabled}, sinksWithRows, "the sinks matched at commit that still exist")

	w.Serve()
	got := map[int64]engine.Attempt{}
	for _, a := range w.WaitN(3) {
		got[a.SinkID] = a
	}
	require.Equal(t, "delivered", got[kept].State)
	require.Equal(t, "delivered", got[unsubscribed].State)
	require.Equal(t, "undeliverable", got[disabled].State)
	require.Equal(t, notifytype.ClassConfig, got[disabled].Class)

	// Every sink matched at commit has a delivery record; the late one has none.
	for sink, want := range map[int64]string{
		kept: "delivered/", unsubscribed: "delivered/", disabled: "undeliverable/config", deleted: "undeliverable/config",
	} {
		statuses, _ := recordsOf(t, w, sink)
		require.Equal(t, []string{want}, statuses, "sink %d", sink)
	}
	statuses, _ := recordsOf(t, w, late)
	require.Empty(t, statuses)
	require.Len(t, g.received(), 2)
}

// Emit keeps no more of the sender's body than the spec allows: nothing
// when no matching subscription opted in to an excerpt, the 280-character
// excerpt when one did; and a finished row keeps no payload at all.
func TestEmitKeepsOnlyTheExcerpt(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	_, p2, scope2 := w.Human()
	eng := w.Engine()
	w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.plain"})
	w.Sink(eng, p2, scope2, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.excerpt", IncludeExcerpt: true})
	const canary = "CANARY-beyond-the-excerpt"
	body := strings.Repeat("é", 300) + canary

	ev := deadLetterOf(scope, 1)
	ev.Content.Body = body
	emitCommitted(t, w, eng, ev)
	ev = deadLetterOf(scope2, 2)
	ev.Content.Body = body
	emitCommitted(t, w, eng, ev)

	var stored []*string
	rows, err := w.Pool.Query(w.Ctx, `SELECT body FROM switchboard.outbox_events ORDER BY id`)
	require.NoError(t, err)
	stored, err = pgx.CollectRows(rows, pgx.RowTo[*string])
	require.NoError(t, err)
	require.Len(t, stored, 2)
	require.Nil(t, stored[0], "no subscription opted in: no body")
	require.NotNil(t, stored[1])
	require.Equal(t, sinks.Clean(body, sinks.ExcerptMaxRunes), *stored[1], "only the excerpt")
	require.NotContains(t, *stored[1], canary)
	require.LessOrEqual(t, utf8.RuneCountInString(*stored[1]), sinks.ExcerptMaxRunes)

	w.Serve()
	w.FanOut(eng)
	w.WaitN(2)
	require.NotContains(t, w.TableJSON("outbox"), "é", "a finished row keeps no payload text")
	var payloads []map[string]any
	rows, err = w.Pool.Query(w.Ctx, `SELECT payload FROM switchboard.outbox`)
	require.NoError(t, err)
	payloads, err = pgx.CollectRows(rows, pgx.RowTo[map[string]any])
	require.NoError(t, err)
	require.Len(t, payloads, 2)
	for _, p := range payloads {
		for k := range p {
			require.Contains(t, []string{"link_path", "place"}, k, "a finished row keeps only its board link and place")
		}
	}
}

// The janitor prunes what is of no more use: agent pages past the hour
// they are counted in, expired sessions, used or expired login links.
func TestJanitorPrunesPagesSessionsAndLoginLinks(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	eng := w.Engine()
	now := w.Clock.Now()
	h := w.F.Human("")
	ep := w.F.Endpoint(hosttest.EndpointOpts{Human: h})
	for _, stmt := range []string{
		`INSERT INTO switchboard.agent_pages (endpoint_id, paged_at) VALUES ($1, $2), ($1, $3)`,
		`INSERT INTO sessions (token_hash, human_id, expires_at) VALUES ('old', $4, $5), ('live', $4, $6)`,
		`INSERT INTO login_links (token_hash, human_id, expires_at, used_at)
		 VALUES ('used', $4, $6, $2), ('expired', $4, $5, NULL), ('fresh', $4, $6, NULL)`,
	} {
		_, err := w.Pool.Exec(w.Ctx, `WITH p AS (SELECT $1::bigint, $2::timestamptz, $3::timestamptz, $4::bigint, $5::timestamptz, $6::timestamptz) `+stmt,
			ep, now.Add(-2*time.Hour), now.Add(-time.Minute), h, now.Add(-time.Minute), now.Add(time.Hour))
		require.NoError(t, err)
	}
	require.NoError(t, eng.CleanUp(w.Ctx))
	require.Equal(t, 1, w.F.Count(`SELECT count(*) FROM switchboard.agent_pages`), "the page of the last hour is kept")
	require.Equal(t, 1, w.F.Count(`SELECT count(*) FROM sessions WHERE token_hash = 'live'`))
	require.Equal(t, 1, w.F.Count(`SELECT count(*) FROM sessions`))
	require.Equal(t, 1, w.F.Count(`SELECT count(*) FROM login_links WHERE token_hash = 'fresh'`))
	require.Equal(t, 1, w.F.Count(`SELECT count(*) FROM login_links`))
}

// An attempt whose outcome cannot be written at once (the database is
// locked, slow or gone) is written as soon as it can be: its row stays
// claimed meanwhile, so no instance sends it again, however long the
// database takes (the defect was a 5 s bound after which the row was sent
// a second time once its claim expired).
func TestDeliveryRecordOutlastsADatabaseThatRefusesIt(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	sending, sent := make(chan struct{}), make(chan struct{})
	eng := w.ServeWith(func(e *engine.Engine) {
		// Short enough that a try fails while the lock is held, long
		// enough for a try to land on a busy 2-core box once it is gone
		// (100 ms failed there: issue 23, item 9).
		e.SetRecordTryTimeoutForTest(time.Second)
		testhooks.WrapAdapters(e, func(_ int64, a sinks.Adapter) sinks.Adapter {
			return adapterFunc(func(ctx context.Context, m sinks.Message) sinks.Result {
				close(sending)
				<-sent
				return a.Deliver(ctx, m)
			})
		})
	})
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.record"})
	w.Emit(eng, deadLetterOf(scope, 1))

	// The reservation is committed; until the send ends, take the records
	// away from the recorder.
	<-sending
	tx, err := w.Pool.Begin(w.Ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(w.Ctx) }()
	_, err = tx.Exec(w.Ctx, `LOCK TABLE switchboard.delivery_records IN EXCLUSIVE MODE`)
	require.NoError(t, err)
	close(sent)
	require.Eventually(t, func() bool {
		return len(logLines(w, "error recording delivery outcomes; trying again")) > 0
	}, enginetest.WaitTimeout, 10*time.Millisecond)
	var state string
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT state FROM switchboard.outbox WHERE sink_id = $1`, sink).Scan(&state))
	require.Equal(t, "claimed", state, "the row stays claimed while its outcome waits")
	require.NoError(t, tx.Rollback(w.Ctx))

	a := w.Wait()
	require.Equal(t, "delivered", a.State)
	require.Equal(t, 1, a.Attempt)
	require.Len(t, g.received(), 1, "sent once")
	statuses, _ := recordsOf(t, w, sink)
	require.Equal(t, []string{"delivered/"}, statuses)
	require.Equal(t, map[string]int{"delivered": 1}, w.RowStates())
	require.NotEmpty(t, logLines(w, "recorded delivery outcomes after a failure"))
	require.NotContains(t, w.Logs.String(), "gtfya.record")
}
