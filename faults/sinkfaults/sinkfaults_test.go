package sinkfaults_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/actors"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/sinktest"
	"github.com/switchboard/notify/store"
)

// table collects the cases' results into the scenario's one row.
var table = struct {
	sync.Mutex
	cases, attempts, lost, dups, secrets int
	names                                []string
	pending                              faults.Pending
}{}

// TestMain runs the cases, then writes the scenario's row.
func TestMain(m *testing.M) {
	code := m.Run()
	table.Lock()
	row := faults.Row{
		Scenario:  "3. sink faults (engine on a fake clock, httptest sinks)",
		Load:      fmt.Sprintf("%d faulty sinks, %d attempts", table.cases, table.attempts),
		Faults:    "timeout, reset, slow 9 s, 500→200, 302 to metadata, 401, 429/503 + Retry-After, Apprise 424/204, adapter panic",
		BadInputs: faults.NotApplicable, RowsLost: table.lost, Duplicates: table.dups, SecretsFound: table.secrets,
		Figures: []string{"every case ended in its D11 class on the D10 schedule, at most 7 attempts, none after the last"},
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
	// the D10 slot).
	retryAfter time.Duration
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
	w := enginetest.New(t)
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
	eng := w.Serve()
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{Kind: fc.kind, BaseURL: srv.URL, Secret: secret, Options: fc.options})
	w.Emit(eng, engine.Event{Type: notifytype.EventTodoDeadLettered, Owner: scope, TodoID: 1, DeadLetterCount: 1,
		Content: sinks.Content{Title: "faults " + fc.name, Place: "forge", LinkPath: "/board/todos/1"}})

	var (
		first     time.Time
		overshoot time.Duration // the most a retry was due past its D10 slot
	)
	for k, want := range fc.classes {
		a := w.Wait()
		require.Equal(t, sink, a.SinkID)
		require.Equal(t, k+1, a.Attempt, "attempt number")
		require.Equal(t, want, a.Class, "attempt %d class", k+1)
		var (
			state string
			due   time.Time
			fa    *time.Time
		)
		require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT state, due_at, first_attempt_at FROM outbox WHERE sink_id = $1`, sink).Scan(&state, &due, &fa))
		if k == 0 {
			require.NotNil(t, fa)
			first = *fa
		}
		if k == len(fc.classes)-1 {
			require.Equal(t, fc.final, state, "final state after attempt %d", k+1)
			break
		}
		require.Equal(t, "pending", state, "after attempt %d", k+1)
		slot := first.Add(engine.RetryDelay(k + 2))
		if fc.retryAfter > engine.RetryBase {
			overshoot = max(overshoot, due.Sub(slot))
		} else {
			require.True(t, due.Equal(slot), "attempt %d due %v after the first, want %v (D10)", k+2, due.Sub(first), engine.RetryDelay(k+2))
		}
		w.Clock.Advance(due.Sub(w.Clock.Now()))
	}

	if fc.retryAfter > engine.RetryBase {
		table.pending.Expect(t, "sinkfaults/retry-after", overshoot <= 0,
			"Retry-After: %v put retries up to %v past their D10 slot; the last attempt came %v after the first (D10: 31.5 min)",
			fc.retryAfter, overshoot, w.Clock.Now().Sub(first))
	}

	// Never an 8th attempt, however long we wait.
	w.Clock.Advance(48 * time.Hour)
	if a, more := w.NextAttempt(300 * time.Millisecond); more {
		t.Fatalf("an attempt after the final one: %+v", a)
	}
	require.EqualValues(t, len(fc.classes), requests.Load(), "requests the sink got")
	var records, lastAttempt int
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT count(*), coalesce(max(attempt), 0) FROM delivery_records WHERE sink_id = $1`, sink).Scan(&records, &lastAttempt))
	require.LessOrEqual(t, lastAttempt, engine.MaxAttempts)
	require.Equal(t, len(fc.classes), records)

	found := faults.CountCanary(w.Logs.String(), w.TableJSON("delivery_records"), w.TableJSON("outbox"))
	require.Zero(t, found, "planted secret in logs or records")

	table.Lock()
	defer table.Unlock()
	table.cases++
	table.attempts += len(fc.classes)
	table.secrets += found
	table.names = append(table.names, fc.name)
}

// A panicking adapter restarts its sink's actor, never the process, and
// the actor takes the sink's next row. (The engine's own hook for a
// panicking adapter is internal to its tests: the class the engine records
// for that attempt, D25's abandoned, is checked there once it lands.)
func TestAdapterPanicRestartsTheActorOnly(t *testing.T) {
	t.Parallel()
	worker := &panicky{done: make(chan int64, 4)}
	sup := actors.NewSupervisor(actors.Config{Logger: slog.New(slog.DiscardHandler)}, worker)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- sup.Serve(ctx) }()
	defer func() { cancel(); <-stopped }()

	require.True(t, sup.Dispatch(store.OutboxRow{ID: 1, SinkID: 7}))
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
	table.pending.Note(t, "sinkfaults/panic-abandoned")
	table.Lock()
	table.cases++
	table.attempts += 2
	table.names = append(table.names, "adapter panic")
	table.Unlock()
}

type panicky struct {
	calls atomic.Int32
	done  chan int64
}

func (p *panicky) Deliver(_ context.Context, row store.OutboxRow) actors.Outcome {
	if p.calls.Add(1) == 1 {
		panic("adapter exploded")
	}
	p.done <- row.ID
	return actors.Outcome{}
}

func (p *panicky) Flush(context.Context, int64) actors.Outcome { return actors.Outcome{} }

// Release is what a stopping supervisor calls with queued rows; this worker
// keeps none.
func (p *panicky) Release(context.Context, []store.OutboxRow) {}
