package properties

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// answer is how the receiver answers one request: a status and, when
// retryAfter > 0, a Retry-After header of that many seconds.
type answer struct {
	status     int
	retryAfter int
}

func (a answer) String() string {
	if a.retryAfter > 0 {
		return fmt.Sprintf("%d (Retry-After %ds)", a.status, a.retryAfter)
	}
	return strconv.Itoa(a.status)
}

// request is what the receiver saw: the fake time it arrived at and the
// message, read from a Gotify or an Apprise body.
type request struct {
	at    time.Time
	title string
	body  string
}

// receiver is a Gotify and Apprise API stand-in that answers from a script
// (200 once the script is spent) and records each request at the world's
// fake time.
type receiver struct {
	*httptest.Server
	clock clockwork.Clock

	mu     sync.Mutex
	script []answer
	reqs   []request
}

func newReceiver(t *testing.T, clock clockwork.Clock) *receiver {
	rc := &receiver{clock: clock}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var m struct {
			Title   string `json:"title"`
			Message string `json:"message"` // Gotify
			Body    string `json:"body"`    // Apprise
		}
		_ = json.Unmarshal(raw, &m)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		a := answer{status: http.StatusOK}
		if n := len(rc.reqs); n < len(rc.script) {
			a = rc.script[n]
		}
		rc.reqs = append(rc.reqs, request{at: rc.clock.Now(), title: m.Title, body: m.Message + m.Body})
		if a.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(a.retryAfter))
		}
		w.WriteHeader(a.status)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// reset forgets what was received and answers from script next.
func (rc *receiver) reset(script []answer) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.script, rc.reqs = script, nil
}

func (rc *receiver) received() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.reqs...)
}

// newWorld builds a world whose throwaway database commits without waiting
// for the disk (synchronous_commit off for every later connection): a check
// makes many small transactions, and durability is not what it tests.
func newWorld(t *testing.T) *hosttest.World {
	noteDeadline(t)
	w := hosttest.NewWorld(t)
	_, err := w.Pool.Exec(w.Ctx, `DO $$ BEGIN
		EXECUTE format('ALTER DATABASE %I SET synchronous_commit = off', current_database());
	END $$`)
	require.NoError(t, err)
	w.Pool.Reset() // the world's own connections too
	return w
}

// emit emits evs through eng in one transaction, as one state change of
// the host would.
func emit(rt *rapid.T, w *hosttest.World, eng *engine.Engine, evs ...engine.Event) {
	rt.Helper()
	require.NoError(rt, pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
		for _, ev := range evs {
			if err := eng.Emit(w.Ctx, tx, ev); err != nil {
				return err
			}
		}
		return nil
	}))
}

// quietJanitor keeps the janitor from removing spent repeats while a check
// reads them: it runs at start and then once in a thousand fake hours.
func quietJanitor(c *engine.Config) { c.JanitorInterval = 1000 * time.Hour }

// attemptTimeout bounds the wall time a check waits for an attempt it
// expects, or for the engines to settle: they act within milliseconds of
// the fake clock reaching a due time, and a bound shorter than
// enginetest.WaitTimeout keeps rapid's shrinking quick when they do not.
const attemptTimeout = 10 * time.Second

// nextAttemptOf waits for the next attempt on sink, dropping others.
func nextAttemptOf(rt *rapid.T, w *hosttest.World, sink int64) engine.Attempt {
	rt.Helper()
	deadline := time.Now().Add(attemptTimeout)
	for {
		a, ok := w.NextAttempt(time.Until(deadline))
		if !ok {
			rt.Fatalf("no attempt on sink %d within %v", sink, attemptTimeout)
		}
		if a.SinkID == sink {
			return a
		}
	}
}

func deadLetter(owner notifytype.OwnerScope, todo int64) engine.Event {
	return engine.Event{
		Type: host.EventTodoDeadLettered, Owner: owner, OccurrenceKey: host.DeadLetterKey(todo, 1),
		Content: sinks.Content{Title: fmt.Sprintf("todo %d", todo), Place: "forge", LinkPath: fmt.Sprintf("/board/todos/%d", todo)},
	}
}

// step is one attempt as D10 says it happens: due at due, made at at (the
// fake clock stands at the previous attempt when due is already past, as
// after a long Retry-After).
type step struct {
	due   time.Time
	at    time.Time
	state string
	class notifytype.ErrorClass
}

// classOf is the error class of a status for a sink kind (D11; REQ-3 and
// REQ-4: any 2xx delivers to Gotify, Apprise delivers on 200 only).
func classOf(kind string, status int) notifytype.ErrorClass {
	switch {
	case kind == engine.KindApprise && status == http.StatusFailedDependency:
		return notifytype.ClassPartial
	case kind == engine.KindApprise && status == http.StatusNoContent:
		return notifytype.ClassConfig
	case kind == engine.KindApprise && status == http.StatusOK:
		return notifytype.ClassNone
	case status >= 200 && status <= 299:
		return notifytype.ClassNone
	case status == 401 || status == 403:
		return notifytype.ClassAuth
	case status >= 400 && status <= 499:
		return notifytype.ClassRejected
	default:
		return notifytype.ClassServer
	}
}

// schedule is the model of D10 and Invariant 6: attempt k is due at
// first + 30 s × (2^(k−1) − 1), or later when the previous answer asked
// for it with Retry-After (429 and 503); a 2xx ends the row delivered;
// Apprise 204 ends it at once (config); an Apprise 424 is retried once:
// a row that met a 424 before ends partial at the next one; after the 7th
// failed attempt the row is undeliverable with the last class (partial,
// when the 7th answer was a 424).
func schedule(kind string, answers []answer, first time.Time) []step {
	var (
		steps      []step
		due, at    = first, first
		seen424    bool
		maxAttempt = engine.MaxAttempts
	)
	for k := 1; k <= maxAttempt; k++ {
		a := answers[k-1]
		class := classOf(kind, a.status)
		s := step{due: due, at: at, class: class}
		switch {
		case class == notifytype.ClassNone:
			s.state = "delivered"
		case class.Final():
			s.state = "undeliverable"
		case class == notifytype.ClassPartial && (seen424 || k == maxAttempt):
			s.state = "partial"
		case k == maxAttempt:
			s.state = "undeliverable"
		default:
			s.state = "pending"
		}
		steps = append(steps, s)
		if s.state != "pending" {
			return steps
		}
		seen424 = seen424 || class == notifytype.ClassPartial
		due = first.Add(engine.RetryDelay(k + 1))
		if ra := time.Duration(a.retryAfter) * time.Second; ra > 0 && (a.status == 429 || a.status == 503) && due.Before(at.Add(ra)) {
			// D24: Retry-After delays the attempt at most to the next slot;
			// the last attempt not at all.
			limit := due
			if k+1 < maxAttempt {
				limit = first.Add(engine.RetryDelay(k + 2))
			}
			due = at.Add(ra)
			if due.After(limit) {
				due = limit
			}
		}
		if due.After(at) {
			at = due
		}
	}
	panic("unreachable")
}

// TestRetrySchedule checks D10 and Invariant 6 on one row: for a random
// answer per attempt (5xx with or without Retry-After, 429, 401, 2xx, and
// for Apprise 424 and 204), every attempt reaches the server at the fake
// time the schedule says, the row's due time in the database is exactly
// the next attempt's, and the row ends as the model ends it (delivered,
// partial, or undeliverable with the last class) after at most 7 attempts,
// with one delivery record per attempt and nothing sent afterwards.
func TestRetrySchedule(t *testing.T) {
	w := newWorld(t)
	rc := newReceiver(t, w.Clock)
	eng, _ := w.Start(quietJanitor)

	gotifyAnswers := []answer{
		{status: 500}, {status: 502}, {status: 503}, {status: 429}, {status: 401},
		{status: 200}, {status: 204},
	}
	appriseAnswers := append(gotifyAnswers[:len(gotifyAnswers):len(gotifyAnswers)], answer{status: 424}, answer{status: 424})

	rapid.Check(t, func(rt *rapid.T) {
		require.NoError(rt, w.Reset())
		kind := rapid.SampledFrom([]string{engine.KindGotify, engine.KindApprise}).Draw(rt, "kind")
		pool := gotifyAnswers
		if kind == engine.KindApprise {
			pool = appriseAnswers
		}
		answers := make([]answer, engine.MaxAttempts)
		for k := range answers {
			a := rapid.SampledFrom(pool).Draw(rt, fmt.Sprintf("answer%d", k+1))
			if (a.status == 503 || a.status == 429) && rapid.Bool().Draw(rt, fmt.Sprintf("answer%d.asks", k+1)) {
				a.retryAfter = rapid.IntRange(1, 2400).Draw(rt, fmt.Sprintf("answer%d.retryAfter", k+1))
			}
			answers[k] = a
		}
		rc.reset(answers)

		_, p, scope := w.Human()
		opts := enginetest.SinkOpts{Kind: kind, BaseURL: rc.URL, PerHour: 120, Burst: 30}
		if kind == engine.KindGotify {
			opts.Secret = "gtfya.retry-token"
		} else {
			opts.Options = map[string]string{"config_key": "ops"}
		}
		sink := w.Sink(eng, p, scope, opts)

		first := w.Clock.Now()
		want := schedule(kind, answers, first)
		emit(rt, w, eng, deadLetter(scope, 1))

		var row int64
		for k, s := range want {
			a := nextAttemptOf(rt, w, sink)
			got := rc.received()
			require.GreaterOrEqual(rt, len(got), k+1, "requests after attempt %d", k+1)
			require.Equal(rt, s.at, got[k].at, "attempt %d reached the server at the wrong time (%v after the first; want %v)",
				k+1, got[k].at.Sub(first), s.at.Sub(first))
			require.Equal(rt, k+1, a.Attempt)
			require.Equal(rt, s.state, a.State, "attempt %d answered %v", k+1, answers[k])
			require.Equal(rt, s.class, a.Class, "attempt %d answered %v", k+1, answers[k])
			require.Len(rt, a.Rows, 1)
			row = a.Rows[0]
			if s.state != "pending" {
				break
			}
			if !want[k+1].due.After(w.Clock.Now()) {
				// Already due (a long Retry-After outran the schedule): the
				// engine goes on at once, and the next request's time is
				// the check.
				continue
			}
			var due time.Time
			require.NoError(rt, w.Pool.QueryRow(w.Ctx, `SELECT due_at FROM switchboard.outbox WHERE id = $1`, row).Scan(&due))
			require.True(rt, want[k+1].due.Equal(due), "after attempt %d (%v) the row is due %v after the first; want %v",
				k+1, answers[k], due.Sub(first), want[k+1].due.Sub(first))
			if wait := due.Sub(w.Clock.Now()); wait > 0 {
				w.Clock.Advance(wait)
			}
		}

		last := want[len(want)-1]
		var (
			state   string
			class   *string
			records int
		)
		require.NoError(rt, w.Pool.QueryRow(w.Ctx, `SELECT state, last_class FROM switchboard.outbox WHERE id = $1`, row).Scan(&state, &class))
		require.Equal(rt, last.state, state)
		if last.class != notifytype.ClassNone {
			require.NotNil(rt, class)
			require.Equal(rt, string(last.class), *class)
		}
		require.NoError(rt, w.Pool.QueryRow(w.Ctx, `SELECT count(*) FROM switchboard.delivery_records WHERE outbox_id = $1`, row).Scan(&records))
		require.Equal(rt, len(want), records, "one delivery record per attempt")

		// Nothing more is due, an hour later or ever.
		w.Clock.Advance(time.Hour)
		_, err := w.Settle()
		require.NoError(rt, err)
		require.Len(rt, rc.received(), len(want), "requests after the row ended")
	})
}
