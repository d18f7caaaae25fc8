package sinkfaults_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/actors"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/sinktest"
	"github.com/switchboard/notify/store"
)

// table collects the cases' results into the scenario's one row.
var table = struct {
	sync.Mutex
	cases, attempts, lost, dups, secrets int
	names, figures                       []string
	pending                              faults.Pending
}{}

// TestMain runs the cases, then writes the scenario's row.
func TestMain(m *testing.M) {
	code := m.Run()
	table.Lock()
	row := faults.Row{
		Scenario:  "3. sink faults (engine on a fake clock, httptest sinks)",
		Load:      fmt.Sprintf("%d faulty sinks, %d attempts", table.cases, table.attempts),
		Faults:    "timeout, reset, slow 9 s, 500→200, 302 to metadata, 401, 429/503 + Retry-After, Apprise 424/204, adapter panics",
		BadInputs: faults.NotApplicable, RowsLost: table.lost, Duplicates: table.dups, SecretsFound: table.secrets,
		Figures: append([]string{"every case ended in its D11 class on the D10 schedule (moved by Retry-After only as D24 allows), " +
			"at most 7 attempts, none after the last"}, table.figures...),
		Pending: table.pending.Notes(), Failed: code != 0,
	}
	table.Unlock()
	if err := faults.ReportRow(row); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// fault is one misbehaving sink and what the engine must make of it.
type fault struct {
	name    string
	kind    string // gotify (default) or apprise
	options any
	// answer serves the n-th request (1-based).
	answer func(w http.ResponseWriter, r *http.Request, n int)
	// classes are the expected attempt classes in order; the last one's
	// state is final.
	classes []notifytype.ErrorClass
	final   string // delivered, undeliverable or partial
	// retryAfter is what the server asks for (D24: honoured only inside
	// the D10 schedule).
	retryAfter time.Duration
	// panics is how many of the first attempts the sink's adapter panics
	// in (planted with testhooks.WrapAdapters), its panic value quoting the
	// planted secret; those attempts never reach the server.
	panics int
}

func status(code int) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(code) }
}

func repeat(c notifytype.ErrorClass, n int) []notifytype.ErrorClass {
	out := make([]notifytype.ErrorClass, n)
	for i := range out {
		out[i] = c
	}
	return out
}

func ok(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"id":1}`))
}

var cases = []fault{
	{
		name: "timeout (no answer within 10 s), then 200",
		answer: func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				select { // hang past the guarded client's 10 s
				case <-r.Context().Done():
				case <-time.After(15 * time.Second):
				}
				return
			}
			ok(w)
		},
		classes: []notifytype.ErrorClass{notifytype.ClassTimeout, notifytype.ClassNone}, final: "delivered",
	},
	{
		name: "connection reset on every attempt",
		answer: func(w http.ResponseWriter, _ *http.Request, _ int) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			if tc, isTCP := conn.(*net.TCPConn); isTCP {
				_ = tc.SetLinger(0) // RST instead of FIN
			}
			_ = conn.Close()
		},
		classes: repeat(notifytype.ClassNetwork, engine.MaxAttempts), final: "undeliverable",
	},
	{
		name: "slow: 200 after 9 s",
		answer: func(w http.ResponseWriter, r *http.Request, _ int) {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(9 * time.Second):
			}
			ok(w)
		},
		classes: []notifytype.ErrorClass{notifytype.ClassNone}, final: "delivered",
	},
	{
		name: "500 then 200",
		answer: func(w http.ResponseWriter, _ *http.Request, n int) {
			if n == 1 {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			ok(w)
		},
		classes: []notifytype.ErrorClass{notifytype.ClassServer, notifytype.ClassNone}, final: "delivered",
	},
	{
		name: "302 to the metadata address, never followed",
		answer: func(w http.ResponseWriter, r *http.Request, _ int) {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		},
		classes: repeat(notifytype.ClassRedirect, engine.MaxAttempts), final: "undeliverable",
	},
	{
		name:    "401 on every attempt",
		answer:  status(http.StatusUnauthorized),
		classes: repeat(notifytype.ClassAuth, engine.MaxAttempts), final: "undeliverable",
	},
	{
		name: "429 with Retry-After: 3600 on every attempt",
		answer: func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
		},
		classes: repeat(notifytype.ClassRejected, engine.MaxAttempts), final: "undeliverable", retryAfter: time.Hour,
	},
	{
		name: "503 with Retry-After: 10 (inside the slot), then 200",
		answer: func(w http.ResponseWriter, _ *http.Request, n int) {
			if n == 1 {
				w.Header().Set("Retry-After", "10")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			ok(w)
		},
		classes: []notifytype.ErrorClass{notifytype.ClassServer, notifytype.ClassNone}, final: "delivered", retryAfter: 10 * time.Second,
	},
	{
		name: "429 with Retry-After: 60 on every attempt (inside the schedule)",
		answer: func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", "60")
			w.WriteHeader(http.StatusTooManyRequests)
		},
		classes: repeat(notifytype.ClassRejected, engine.MaxAttempts), final: "undeliverable", retryAfter: time.Minute,
	},
	{
		name:    "adapter panics on every attempt",
		answer:  func(w http.ResponseWriter, _ *http.Request, _ int) { ok(w) },
		classes: repeat(notifytype.ClassAbandoned, engine.MaxAttempts), final: "undeliverable", panics: engine.MaxAttempts,
	},
	{
		name:    "adapter panics once, then 200",
		answer:  func(w http.ResponseWriter, _ *http.Request, _ int) { ok(w) },
		classes: []notifytype.ErrorClass{notifytype.ClassAbandoned, notifytype.ClassNone}, final: "delivered", panics: 1,
	},
	{
		name: "Apprise 424 twice: retried once, then partial", kind: engine.KindApprise, options: map[string]any{"config_key": "ops"},
		answer:  status(http.StatusFailedDependency),
		classes: repeat(notifytype.ClassPartial, 2), final: "partial",
	},
	{
		name: "Apprise 204: config error, never retried", kind: engine.KindApprise, options: map[string]any{"config_key": "ops"},
		answer:  status(http.StatusNoContent),
		classes: []notifytype.ErrorClass{notifytype.ClassConfig}, final: "undeliverable",
	},
}

func TestSinkFaults(t *testing.T) {
	t.Parallel()
	for _, fc := range cases {
		t.Run(fc.name, func(t *testing.T) {
			t.Parallel()
			runFault(t, fc)
		})
	}
}

func runFault(t *testing.T, fc fault) {
	w := hosttest.NewWorld(t)
	var requests atomic.Int32
	srv := sinktest.NewServer(t, func(rw http.ResponseWriter, r *http.Request) {
		fc.answer(rw, r, int(requests.Add(1)))
	})
	secrets := faults.PlantedSecrets()
	secret := secrets.GotifyToken
	if fc.kind == engine.KindApprise {
		secret = fmt.Sprintf(`{"authorization":%q}`, secrets.Authorization)
	}
	_, p, scope := w.Human()
	var (
		panicked atomic.Int32
		eng      *engine.Engine
	)
	if fc.panics > 0 {
		// Planted from outside the engine, through its exported hook: the
		// adapter panics with a value that quotes the secret (D25: the
		// value is never logged).
		eng = w.ServeWith(func(e *engine.Engine) {
			testhooks.WrapAdapters(e, func(_ int64, a sinks.Adapter) sinks.Adapter {
				return panicking{inner: a, left: &panicked, panics: int32(fc.panics), secret: secret}
			})
		})
	} else {
		eng = w.Serve()
	}
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{Kind: fc.kind, BaseURL: srv.URL, Secret: secret, Options: fc.options})
	emit := func(todo int64) {
		w.Emit(eng, engine.Event{Type: host.EventTodoDeadLettered, Owner: scope, OccurrenceKey: host.DeadLetterKey(todo, 1),
			Content: sinks.Content{Title: "faults " + fc.name, Place: "forge", LinkPath: fmt.Sprintf("/board/todos/%d", todo)}})
	}
	emit(1)

	var first time.Time
	for k, want := range fc.classes {
		at := w.Clock.Now() // the attempt runs at this instant: only this test moves the clock
		a := w.Wait()
		require.Equal(t, sink, a.SinkID)
		require.Equal(t, k+1, a.Attempt, "attempt number")
		require.Equal(t, want, a.Class, "attempt %d class", k+1)
		var (
			state string
			due   time.Time
			fa    *time.Time
		)
		require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT state, due_at, first_attempt_at FROM switchboard.outbox WHERE sink_id = $1`, sink).Scan(&state, &due, &fa))
		if k == 0 {
			require.NotNil(t, fa)
			first = *fa
		}
		if k == len(fc.classes)-1 {
			require.Equal(t, fc.final, state, "final state after attempt %d", k+1)
			break
		}
		require.Equal(t, "pending", state, "after attempt %d", k+1)
		want := d24Due(first, at, k+1, fc.retryAfter)
		check := func(ok bool, format string, args ...any) { require.True(t, ok, append([]any{format}, args...)...) }
		if fc.retryAfter > 0 {
			check = func(ok bool, format string, args ...any) {
				table.pending.Expect(t, "sinkfaults/retry-after", ok, format, args...)
			}
		}
		check(due.Equal(want), "Retry-After %v: attempt %d due %v after the first, want %v (D10 slot %v, D24: at most the next slot)",
			fc.retryAfter, k+2, due.Sub(first), want.Sub(first), engine.RetryDelay(k+2))
		if t.Failed() {
			return
		}
		w.Clock.Advance(due.Sub(w.Clock.Now()))
	}
	if len(fc.classes) == engine.MaxAttempts {
		// D24: the last attempt stays at its own slot whatever was asked.
		last := w.Clock.Now().Sub(first)
		require.LessOrEqual(t, last, engine.RetryDelay(engine.MaxAttempts), "the 7th attempt came %v after the first", last)
		if fc.retryAfter > 0 {
			table.Lock()
			table.figures = append(table.figures, fmt.Sprintf("Retry-After: %v on every attempt: attempts at %s after the first (D10 alone: %s)",
				fc.retryAfter, attemptOffsets(t, w, sink, first), d10Offsets()))
			table.Unlock()
		}
	}

	// Never an 8th attempt, however long we wait: two days on, a claim
	// pass takes nothing, and once nothing is claimed or due no attempt
	// came.
	w.Clock.Advance(48 * time.Hour)
	pass, err := testhooks.ClaimOnce(w.Ctx, eng)
	require.NoError(t, err)
	require.Empty(t, pass.Rows, "a row claimed after its final attempt")
	_, err = w.Settle()
	require.NoError(t, err)
	select {
	case a := <-w.Attempts:
		t.Fatalf("an attempt after the final one: %+v", a)
	default:
	}
	wantRequests := len(fc.classes) - min(fc.panics, len(fc.classes))
	require.EqualValues(t, wantRequests, requests.Load(), "requests the sink got")
	var (
		records, lastAttempt int
		classes              []string
	)
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT count(*), coalesce(max(attempt), 0), array_agg(coalesce(class, '') ORDER BY attempt)
		FROM switchboard.delivery_records WHERE sink_id = $1`, sink).Scan(&records, &lastAttempt, &classes))
	require.LessOrEqual(t, lastAttempt, engine.MaxAttempts)
	require.Equal(t, len(fc.classes), records)
	wantClasses := make([]string, len(fc.classes))
	for i, c := range fc.classes {
		wantClasses[i] = string(c)
	}
	require.Equal(t, wantClasses, classes, "each attempt's recorded class")

	if fc.panics > 0 {
		checkPanics(t, w, eng, fc, sink, classes, &requests, emit)
	}

	found := faults.CountCanary(w.Logs.String(), w.TableJSON("delivery_records"), w.TableJSON("outbox"))
	require.Zero(t, found, "planted secret in logs or records")

	table.Lock()
	defer table.Unlock()
	table.cases++
	table.attempts += len(fc.classes)
	table.secrets += found
	table.names = append(table.names, fc.name)
}

// checkPanics checks D25 for a sink whose adapter panicked: every panicked
// attempt recorded failed (or undeliverable, the last) with class
// abandoned and counted against the budget, the row never attempted an 8th
// time, and the sink's actor still serving: the next event to the same
// sink is delivered by it.
func checkPanics(t *testing.T, w *hosttest.World, eng *engine.Engine, fc fault, sink int64, classes []string,
	requests *atomic.Int32, emit func(int64)) {
	t.Helper()
	var abandoned, counted, pastCap int
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT
			count(*) FILTER (WHERE class = 'abandoned' AND status IN ('failed', 'undeliverable')),
			count(*) FILTER (WHERE class = 'abandoned' AND counts_budget),
			count(*) FILTER (WHERE attempt > $2)
		FROM switchboard.delivery_records WHERE sink_id = $1`, sink, engine.MaxAttempts).Scan(&abandoned, &counted, &pastCap))
	wantAbandoned := min(fc.panics, len(fc.classes))
	table.pending.Expect(t, "sinkfaults/panic-abandoned", abandoned == wantAbandoned && counted == wantAbandoned && pastCap == 0,
		"%d panicked attempts: %d recorded failed with class abandoned, %d counted against the budget, %d past attempt %d (classes %v)",
		wantAbandoned, abandoned, counted, pastCap, engine.MaxAttempts, classes)

	// The process and the sink's actor survive: the next event to the same
	// sink goes out.
	before := requests.Load()
	emit(2)
	a := w.Wait()
	require.Equal(t, sink, a.SinkID)
	require.Equal(t, "delivered", a.State, "the sink's next event after the panics: %+v", a)
	require.Equal(t, before+1, requests.Load(), "the next event reached the server")
	var restarts = -1
	for _, st := range eng.AllSinkStatuses() {
		if st.SinkID == sink {
			restarts = st.Restarts
		}
	}
	require.GreaterOrEqual(t, restarts, 0, "the sink's actor is gone from the engine's status")
	table.Lock()
	table.figures = append(table.figures, fmt.Sprintf("%s: %d attempts recorded abandoned (D25), the next event delivered by the same engine, the actor restarted %d times",
		fc.name, abandoned, restarts))
	table.Unlock()
}

// d24Due is when attempt k+1 must be due after attempt k, made at at, of
// a row first attempted at first, when the server asked to wait
// retryAfter (0: it did not). D10 puts it at its slot; D24 lets
// Retry-After delay it up to the next slot, never past it, and not the
// last attempt at all.
func d24Due(first, at time.Time, k int, retryAfter time.Duration) time.Time {
	slot := first.Add(engine.RetryDelay(k + 1))
	asked := at.Add(retryAfter)
	if retryAfter <= 0 || !asked.After(slot) || k+1 >= engine.MaxAttempts {
		return slot
	}
	if next := first.Add(engine.RetryDelay(k + 2)); asked.After(next) {
		return next
	}
	return asked
}

// attemptOffsets lists when a sink's attempts were made, after the first.
func attemptOffsets(t *testing.T, w *hosttest.World, sink int64, first time.Time) string {
	t.Helper()
	rows, err := w.Pool.Query(w.Ctx, `SELECT sent_at FROM switchboard.delivery_records WHERE sink_id = $1 ORDER BY attempt`, sink)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var at time.Time
		require.NoError(t, rows.Scan(&at))
		out = append(out, fmt.Sprint(at.Sub(first).Seconds()))
	}
	require.NoError(t, rows.Err())
	return strings.Join(out, ", ") + " s"
}

func d10Offsets() string {
	var out []string
	for k := 1; k <= engine.MaxAttempts; k++ {
		out = append(out, fmt.Sprint(engine.RetryDelay(k).Seconds()))
	}
	return strings.Join(out, ", ") + " s"
}

// panicking is an adapter that panics on its sink's first panics attempts
// (counted in left, shared by every adapter the engine builds for the
// sink), then delivers through inner.
type panicking struct {
	inner  sinks.Adapter
	left   *atomic.Int32
	panics int32
	secret string
}

func (p panicking) Deliver(ctx context.Context, msg sinks.Message) sinks.Result {
	if p.left.Add(1) <= p.panics {
		panic("adapter exploded holding " + p.secret)
	}
	return p.inner.Deliver(ctx, msg)
}

// A worker that panics (below the engine's own recovery of a panicking
// adapter, which the cases above plant) restarts its sink's actor, never
// the process, and the actor takes the sink's next row.
func TestAdapterPanicRestartsTheActorOnly(t *testing.T) {
	t.Parallel()
	worker := &panicky{done: make(chan int64, 4), panicked: make(chan struct{})}
	sup := actors.NewSupervisor(actors.Config{Logger: slog.New(slog.DiscardHandler)}, worker)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- sup.Serve(ctx) }()
	defer func() { cancel(); <-stopped }()

	require.True(t, sup.Dispatch(store.OutboxRow{ID: 1, SinkID: 7}))
	select {
	case <-worker.panicked:
	case <-time.After(enginetest.WaitTimeout):
		t.Fatal("the worker was never called")
	}
	// Dispatched after the panic: a row queued with the panicking one
	// went down with its step (claimed until its claim expires).
	require.True(t, sup.Dispatch(store.OutboxRow{ID: 2, SinkID: 7}))
	select {
	case id := <-worker.done:
		require.EqualValues(t, 2, id, "the row after the panic is delivered by the restarted actor")
	case <-time.After(enginetest.WaitTimeout):
		t.Fatal("the sink's actor never took the row after the panic")
	}
	var restarts int
	for _, s := range sup.Status() {
		if s.SinkID == 7 {
			restarts = s.Restarts
		}
	}
	require.GreaterOrEqual(t, restarts, 1, "the panic restarts the actor")
	table.Lock()
	table.cases++
	table.attempts += 2
	table.names = append(table.names, "worker panic")
	table.Unlock()
}

type panicky struct {
	calls    atomic.Int32
	done     chan int64
	panicked chan struct{} // closed as the first call panics
}

func (p *panicky) Deliver(_ context.Context, rows []store.OutboxRow) actors.Outcome {
	if p.calls.Add(1) == 1 {
		close(p.panicked)
		panic("adapter exploded")
	}
	for _, r := range rows {
		p.done <- r.ID
	}
	return actors.Outcome{}
}

func (p *panicky) Flush(context.Context, int64) actors.Outcome { return actors.Outcome{} }

// Release is what a stopping supervisor calls with queued rows; this worker
// keeps none.
func (p *panicky) Release(context.Context, []store.OutboxRow) {}
