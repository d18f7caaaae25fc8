package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/apprise"
	"github.com/switchboard/notify/sinks/sinktest"
)

// adapterFunc is a sinks.Adapter made of a function, for
// testhooks.WrapAdapters.
type adapterFunc func(context.Context, sinks.Message) sinks.Result

func (f adapterFunc) Deliver(ctx context.Context, m sinks.Message) sinks.Result { return f(ctx, m) }

// todoDead is todo's first dead letter on queue forge, with content c
// (its title, place and link filled in when c leaves them empty).
func todoDead(owner notifytype.OwnerScope, todo int64, c sinks.Content) engine.Event {
	if c.Title == "" {
		c.Title = fmt.Sprintf("todo %d", todo)
	}
	if c.Place == "" {
		c.Place = "forge"
	}
	if c.LinkPath == "" {
		c.LinkPath = fmt.Sprintf("/board/todos/%d", todo)
	}
	c = host.WithTodo(c, host.TodoContent{Cause: "fail at the cap"})
	return engine.Event{Type: host.EventTodoDeadLettered, Owner: owner, OccurrenceKey: host.DeadLetterKey(todo, 1), Content: c}
}

// appriseRequest is the JSON body the Apprise API receives.
type appriseRequest map[string]string

func decodeApprise(t *testing.T, r sinktest.Request) appriseRequest {
	t.Helper()
	var m appriseRequest
	require.NoError(t, json.Unmarshal(r.Body, &m), "%s", r.Body)
	return m
}

// answering is a handler that answers status with a short JSON body.
func answering(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{}`)
	}
}

// sinkConnection is the id of a sink's connection.
func sinkConnection(t *testing.T, w *hosttest.World, sink int64) int64 {
	t.Helper()
	var id int64
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT connection_id FROM switchboard.sinks WHERE id = $1`, sink).Scan(&id))
	return id
}

// deliveryRecord is a delivery record as the tests read it.
type deliveryRecord struct {
	Attempt    int
	Status     string
	Class      string
	HTTPStatus int
}

func deliveryRecords(t *testing.T, w *hosttest.World, sink int64) []deliveryRecord {
	t.Helper()
	rows, err := w.Pool.Query(w.Ctx, `
		SELECT attempt, status, coalesce(class, ''), coalesce(http_status, 0)
		FROM switchboard.delivery_records WHERE sink_id = $1 ORDER BY id`, sink)
	require.NoError(t, err)
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (deliveryRecord, error) {
		var r deliveryRecord
		err := row.Scan(&r.Attempt, &r.Status, &r.Class, &r.HTTPStatus)
		return r, err
	})
	require.NoError(t, err)
	return recs
}

// logErrorsOnFailure logs, when the test fails, each distinct error the
// world's engines logged: the engine keeps going after a database error,
// so a test that waits in vain finds its cause there.
func logErrorsOnFailure(t *testing.T, w *hosttest.World) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		seen := map[string]int{}
		var order []string
		for _, l := range strings.Split(w.Logs.String(), "\n") {
			var m struct{ Level, Msg, Error string }
			if json.Unmarshal([]byte(l), &m) != nil || m.Level != "ERROR" {
				continue
			}
			key := m.Msg + ": " + m.Error
			if seen[key] == 0 {
				order = append(order, key)
			}
			seen[key]++
		}
		for _, key := range order {
			t.Logf("engine logged %d× %s", seen[key], key)
		}
	})
}

func TestDeliveryStatefulAppriseSink(t *testing.T) {
	t.Parallel()
	// Scenario: Stateful Apprise sink
	w := hosttest.NewWorld(t)
	withAuth, bare := sinktest.NewServer(t, nil), sinktest.NewServer(t, nil)
	_, p, scope := w.Human()
	eng := w.Serve()
	const auth = "Bearer apprise-proxy-credential"
	ops := map[string]any{"config_key": "ops"}
	authSink := w.Sink(eng, p, scope, enginetest.SinkOpts{
		Kind: engine.KindApprise, BaseURL: withAuth.URL, Secret: `{"authorization":"` + auth + `"}`, Options: ops,
	})
	bareSink := w.Sink(eng, p, scope, enginetest.SinkOpts{Kind: engine.KindApprise, BaseURL: bare.URL, Options: ops})

	// Stored with no Apprise URLs: the one connection's secret holds only
	// the authorization value, the other's holds nothing.
	for _, sink := range []int64{authSink, bareSink} {
		var opts apprise.Options
		var raw []byte
		require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT options FROM switchboard.sinks WHERE id = $1`, sink).Scan(&raw))
		require.NoError(t, json.Unmarshal(raw, &opts))
		require.Equal(t, "ops", opts.ConfigKey)

		secret, err := eng.OpenConnectionForTest(w.Ctx, sinkConnection(t, w, sink), scope, engine.KindApprise)
		require.NoError(t, err)
		stored, err := apprise.ParseSecret(secret.Reveal())
		require.NoError(t, err)
		require.Empty(t, stored.URLs, "a stateful sink stores no Apprise URLs")
		if sink == authSink {
			require.Equal(t, auth, stored.Authorization)
		} else {
			require.True(t, stored.IsZero())
			require.Zero(t, w.F.Count(`SELECT count(*) FROM switchboard.connections WHERE id = $1 AND secret IS NOT NULL`, sinkConnection(t, w, sink)))
		}
	}

	w.Emit(eng, todoDead(scope, 1, sinks.Content{Title: "nightly build"}))
	for _, a := range w.WaitN(2) {
		require.Equal(t, "delivered", a.State, "%+v", a)
		require.Equal(t, 200, a.Status)
	}
	for _, srv := range []*sinktest.Server{withAuth, bare} {
		reqs := srv.Requests()
		require.Len(t, reqs, 1)
		r := reqs[0]
		require.Equal(t, http.MethodPost, r.Method)
		require.Equal(t, "/notify/ops", r.Path)
		require.Empty(t, r.RawQuery)
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		body := decodeApprise(t, r)
		require.ElementsMatch(t, []string{"body", "title", "type", "format"}, keys(body), "a stateful request carries no urls")
		require.Equal(t, "text", body["format"])
		require.Equal(t, apprise.TypeHighDefault, body["type"], "a dead letter is high: failure")
		require.Equal(t, "Dead letter in forge: nightly build", body["title"])
		require.Contains(t, body["body"], "Link: https://switchboard.example.net/board/todos/1")
		if srv == withAuth {
			require.Equal(t, auth, r.Header.Get("Authorization"))
		} else {
			require.Empty(t, r.Header.Get("Authorization"))
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestDeliveryPartialFailure(t *testing.T) {
	t.Parallel()
	// Scenario: Partial failure
	w := hosttest.NewWorld(t)
	srv := sinktest.NewServer(t, answering(http.StatusFailedDependency))
	_, p, scope := w.Human()
	eng := w.Serve()
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{Kind: engine.KindApprise, BaseURL: srv.URL, Options: map[string]any{"config_key": "ops"}})

	w.Emit(eng, todoDead(scope, 1, sinks.Content{}))
	first := w.Wait()
	require.Equal(t, engine.Attempt{
		SinkID: sink, Owner: scope, EventType: host.EventTodoDeadLettered, Rows: first.Rows, Attempt: 1,
		State: "pending", Class: notifytype.ClassPartial, Status: http.StatusFailedDependency,
	}, first)
	require.Len(t, srv.Requests(), 1)

	w.Clock.Advance(engine.RetryDelay(2))
	second := w.Wait()
	require.Equal(t, first.Rows, second.Rows)
	require.Equal(t, 2, second.Attempt)
	require.Equal(t, "partial", second.State)
	require.Equal(t, notifytype.ClassPartial, second.Class)
	require.Len(t, srv.Requests(), 2, "retried exactly once")

	var state, class string
	var finished *time.Time
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT state, last_class, finished_at FROM switchboard.outbox WHERE sink_id = $1`, sink).Scan(&state, &class, &finished))
	require.Equal(t, "partial", state)
	require.Equal(t, "partial", class)
	require.NotNil(t, finished, "partial is final: the row is never claimed again")
	require.Equal(t, []deliveryRecord{
		{Attempt: 1, Status: "failed", Class: "partial", HTTPStatus: 424},
		{Attempt: 2, Status: "partial", Class: "partial", HTTPStatus: 424},
	}, deliveryRecords(t, w, sink))
}

func TestDeliveryTwoInstances(t *testing.T) {
	t.Parallel()
	// Scenario: Two instances
	// Both instances serve before the rows are written, and race for them
	// (SKIP LOCKED, claim tokens); a sink is delivered to by one instance
	// at a time, best effort. How the rows split is the race's: an
	// instance holds up to actors.CapacityDefault rows, enough for a row
	// of each of the 300 sinks, and keeps a sink while it holds rows of it
	// (the claim's "elsewhere"), so the instance whose claims come first
	// may take every sink, and on a busy machine did (0 rows for the
	// other). What the scenario asks holds either way: each row is
	// delivered once, by one of the two.
	const sinkCount, rowCount = 300, 2400
	w := hosttest.NewWorld(t)
	var perInstance [2]atomic.Int64
	instance := func(i int) func(*engine.Config) {
		return func(c *engine.Config) {
			c.BudgetPerHourMax, c.BudgetBurstMax = 100_000, 100_000
			c.Instance = fmt.Sprintf("instance-%d", i)
			seen := c.OnAttempt
			c.OnAttempt = func(a engine.Attempt) {
				perInstance[i].Add(1)
				seen(a)
			}
		}
	}
	one := w.Serve(instance(0))
	w.Serve(instance(1))

	servers := make([]*gotifyServer, sinkCount)
	scopes := make([]notifytype.OwnerScope, sinkCount)
	for i := range sinkCount {
		servers[i] = newGotify(t)
		var p engine.Principal
		_, p, scopes[i] = w.Human()
		w.Sink(one, p, scopes[i], enginetest.SinkOpts{
			BaseURL: servers[i].URL, Secret: fmt.Sprintf("gtfya.two-instances-%d", i), PerHour: 100_000, Burst: 100_000,
			Events: []notifytype.EventType{engine.EventAgentNotify},
		})
	}

	// Every row becomes due at once, at commit: both instances race for
	// all of them.
	title := func(row int) string { return fmt.Sprintf("row-%04d", row) }
	require.NoError(t, pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
		for row := range rowCount {
			if err := one.Emit(w.Ctx, tx, engine.Event{
				Type: engine.EventAgentNotify, Owner: scopes[row%sinkCount], Content: sinks.Content{Title: title(row)},
			}); err != nil {
				return err
			}
		}
		return nil
	}))

	for _, a := range w.WaitN(rowCount) {
		require.Equal(t, "delivered", a.State, "%+v", a)
		require.Equal(t, 1, a.Attempt, "no row was attempted twice")
	}

	delivered := map[string]int{}
	for i, g := range servers {
		for _, m := range g.received() {
			delivered[m.Title]++
			var row int
			_, err := fmt.Sscanf(m.Title, "Agent page: "+"row-%d", &row)
			require.NoError(t, err, m.Title)
			require.Equal(t, i, row%sinkCount, "row %d reached another owner's sink", row)
		}
	}
	for row := range rowCount {
		require.Equal(t, 1, delivered["Agent page: "+title(row)], "row %d", row)
	}
	require.Len(t, delivered, rowCount)
	require.Equal(t, map[string]int{"delivered": rowCount}, w.RowStates())
	require.Equal(t, rowCount, w.F.Count(`SELECT count(*) FROM switchboard.delivery_records`))
	require.Equal(t, rowCount, w.F.Count(`SELECT count(DISTINCT outbox_id) FROM switchboard.delivery_records`))

	a, b := perInstance[0].Load(), perInstance[1].Load()
	t.Logf("instance 0 delivered %d rows, instance 1 %d", a, b)
	require.EqualValues(t, rowCount, a+b, "every row delivered by one of the two instances, once")
}

func TestDeliveryQuarantineStorm(t *testing.T) {
	t.Parallel()
	// Scenario: Quarantine storm
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	eng := w.Serve()
	webhook := w.F.Webhook(scope, "github-forge")
	w.Sink(eng, p, scope, enginetest.SinkOpts{
		BaseURL: g.URL, Secret: "gtfya.storm", Events: []notifytype.EventType{host.EventDeliveryQuarantined},
	})

	const storm = 200
	for i := range storm {
		if i > 0 {
			w.Clock.Advance(1500 * time.Millisecond)
		}
		w.Emit(eng, engine.Event{
			Type: host.EventDeliveryQuarantined, Owner: scope, WebhookID: webhook, Subject: host.QuarantineSubject(webhook),
			Content: sinks.Content{
				Title: fmt.Sprintf("push from mallory #%d", i), Place: "github-forge",
				Summary:  "a delivery from an untrusted sender was quarantined",
				LinkPath: fmt.Sprintf("/board/webhooks/%d/deliveries/%d", webhook, i+1),
			},
		})
	}
	require.Less(t, w.Clock.Since(enginetest.Start), 5*time.Minute)
	require.Equal(t, map[string]int{"pending": 1}, w.RowStates(), "the storm is one row")
	require.Empty(t, g.received(), "nothing is sent while the window is open")

	w.Clock.Advance(enginetest.Start.Add(engine.QuarantineWindowDefault).Sub(w.Clock.Now()))
	a := w.Wait()
	require.Equal(t, "delivered", a.State)
	require.Len(t, a.Rows, 1)

	msgs := g.received()
	require.Len(t, msgs, 1)
	require.Equal(t, "Quarantined delivery on github-forge: push from mallory #0 (and 199 more)", msgs[0].Title)
	require.Contains(t, strings.Split(msgs[0].Message, "\n\n"), "This one and 199 more like it.")
	require.Equal(t, 5, msgs[0].Priority, "quarantine is normal: 5 by default")
	require.Equal(t, map[string]int{"delivered": 1}, w.RowStates())
	require.Equal(t, storm, w.F.Count(`SELECT delivered_count FROM switchboard.outbox`))
}

func TestDeliveryBudgetExhausted(t *testing.T) {
	t.Parallel()
	// Scenario: Budget exhausted
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	eng := w.Serve()
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.budget"})
	logErrorsOnFailure(t, w)

	const todos = 50
	for i := int64(1); i <= todos; i++ {
		if i > 1 {
			w.Clock.Advance(time.Second)
		}
		w.Emit(eng, todoDead(scope, i, sinks.Content{}))
	}
	require.Less(t, w.Clock.Since(enginetest.Start), time.Minute)

	var individual, held []int64
	for _, a := range w.WaitN(todos) {
		require.Len(t, a.Rows, 1)
		switch a.State {
		case "delivered":
			individual = append(individual, a.Rows[0])
		case "held":
			held = append(held, a.Rows[0])
		default:
			t.Fatalf("unexpected attempt %+v", a)
		}
	}
	require.LessOrEqual(t, len(individual), engine.BudgetBurstDefault, "at most the burst goes out at once")
	require.Len(t, individual, engine.BudgetBurstDefault, "the whole burst goes out at once")
	require.Len(t, g.received(), len(individual))
	require.Equal(t, map[string]int{"delivered": len(individual), "held": len(held)}, w.RowStates())

	// The next token returns two minutes (an hour / 30) after the first
	// send.
	w.Clock.Advance(2 * time.Minute)
	co := w.Wait()
	require.Equal(t, engine.Attempt{
		SinkID: sink, Owner: scope, EventType: "coalesced", Rows: co.Rows, Attempt: 1, State: "delivered", Status: 200,
	}, co)
	require.ElementsMatch(t, held, co.Rows, "every held row goes out in the one message")

	msgs := g.received()
	require.Len(t, msgs, len(individual)+1)
	last := msgs[len(msgs)-1]
	require.Equal(t, fmt.Sprintf("Switchboard: %d notifications waited while this sink's budget was spent", todos-engine.BudgetBurstDefault), last.Title)
	lines := strings.Split(last.Message, "\n\n")
	require.Equal(t, []string{
		fmt.Sprintf("This sink's budget was spent, so %d notifications waited; here is how many of each.", todos-engine.BudgetBurstDefault),
		fmt.Sprintf("Dead letters: %d", todos-engine.BudgetBurstDefault),
		"[Open on the board](https://switchboard.example.net/board/notifications)",
	}, lines)
	require.Equal(t, map[string]int{"delivered": todos}, w.RowStates(), "every row ends delivered")
	require.Equal(t, []deliveryRecord{{Attempt: 1, Status: "delivered", HTTPStatus: 200}},
		deliveryRecords(t, w, sink)[len(individual):], "one record for the coalesced message")

	// Nothing more comes of the storm: an hour later a new dead letter goes
	// out on its own, and it is the only message since.
	w.Clock.Advance(time.Hour)
	w.Emit(eng, todoDead(scope, todos+1, sinks.Content{Title: "after the storm"}))
	a := w.Wait()
	require.Equal(t, "delivered", a.State)
	require.Len(t, a.Rows, 1)
	msgs = g.received()
	require.Len(t, msgs, len(individual)+2)
	require.Equal(t, "Dead letter in forge: after the storm", msgs[len(msgs)-1].Title)
}

func TestDeliveryNoPayload(t *testing.T) {
	t.Parallel()
	// Scenario: No payload
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	eng := w.Serve()
	w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.no-payload"})

	title := "Nightly build fails on arm64: " + strings.Repeat("x", 150)
	body := strings.Repeat("ISSUE-BODY-TEXT stack trace follows; the reporter's environment is described here. ", 40)
	w.Emit(eng, todoDead(scope, 7, sinks.Content{Title: title, Body: body}))
	require.Equal(t, "delivered", w.Wait().State)

	msgs := g.received()
	require.Len(t, msgs, 1)
	m := msgs[0]
	truncated := title[:sinks.TitleMaxRunes-1] + "…"
	require.Equal(t, "Dead letter in forge: "+truncated, m.Title)
	require.Contains(t, m.Message, "A todo in queue forge dead-lettered")
	require.NotContains(t, m.Message, "Nightly build fails", "the title is the message's title, not part of its body")
	require.Contains(t, m.Message, "[Open on the board](https://switchboard.example.net/board/todos/7)")
	for _, word := range []string{"ISSUE-BODY-TEXT", "stack trace", "reporter", sinks.ExcerptLabel} {
		require.NotContains(t, m.Title+"\n"+m.Message, word, "no text from the issue body")
	}
	require.NotContains(t, w.TableJSON("outbox"), "ISSUE-BODY-TEXT", "the body is not even stored")
}

func TestDeliveryExcerptByOptIn(t *testing.T) {
	t.Parallel()
	// Scenario: Excerpt by opt-in
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	eng := w.Serve()
	w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.excerpt", IncludeExcerpt: true})

	filler := strings.Repeat("0123456789", 196)
	// An ANSI escape, BEL, DEL, a C1 control and CR LF; NUL has a test of
	// its own (TestDeliveryNULInSenderText).
	body := "Steps\x1b[1m to\x7f reproduce:\x07\u0085\r\n" + filler + "TAIL-OF-BODY"
	require.Len(t, []rune(body), 2000)
	w.Emit(eng, todoDead(scope, 8, sinks.Content{Title: "crash on start", Body: body}))
	require.Equal(t, "delivered", w.Wait().State)

	msgs := g.received()
	require.Len(t, msgs, 1)
	m := msgs[0]
	cleaned := "Steps to reproduce: " + filler
	excerpt := cleaned[:sinks.ExcerptMaxRunes-1] + "…"
	lines := strings.Split(m.Message, "\n\n")
	require.Contains(t, lines, "Sender wrote: "+excerpt, "the first 280 characters, control-stripped and labelled")
	require.Len(t, []rune(strings.TrimPrefix(lines[len(lines)-2], "Sender wrote: ")), sinks.ExcerptMaxRunes)
	require.NotContains(t, m.Message, "TAIL-OF-BODY")
	for _, r := range m.Title + m.Message {
		require.False(t, r != '\n' && unicode.IsControl(r), "control character %U in the message", r)
	}
}

// TestDeliveryNULInSenderText: sender- and agent-written text is
// control-stripped when it is rendered (REQ-9), NUL included; a NUL in it
// must not fail the emit, which runs in the caller's transaction (REQ-10)
// and would fail the state change with it.
func TestDeliveryNULInSenderText(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	eng := w.Serve()
	w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.nul", IncludeExcerpt: true})

	err := pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
		return eng.Emit(w.Ctx, tx, todoDead(scope, 10, sinks.Content{Title: "build\x00 fails", Body: "core\x00 dumped"}))
	})
	require.NoError(t, err, "a NUL in a title or body fails the caller's transaction")
	require.Equal(t, "delivered", w.Wait().State)
	msgs := g.received()
	require.Len(t, msgs, 1)
	require.Equal(t, "Dead letter in forge: build fails", msgs[0].Title)
	require.Contains(t, strings.Split(msgs[0].Message, "\n"), sinks.ExcerptLabel+"core dumped")
}

func TestDeliveryStructuredFailure(t *testing.T) {
	t.Parallel()
	// Scenario: Structured failure
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	g.setStatus(http.StatusUnauthorized)
	_, p, scope := w.Human()
	eng := w.Serve()
	const token = "gtfya.structured-failure-canary"
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: token})

	w.Emit(eng, todoDead(scope, 9, sinks.Content{}))
	a := w.Wait()
	require.Equal(t, notifytype.ClassAuth, a.Class)
	require.Equal(t, http.StatusUnauthorized, a.Status)
	require.Equal(t, "pending", a.State, "auth failures are retried (D10)")
	require.Len(t, g.received(), 1)
	require.Equal(t, token, g.received()[0].Token, "the token was sent, in its header")

	var class string
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT last_class FROM switchboard.outbox WHERE sink_id = $1`, sink).Scan(&class))
	require.Equal(t, "auth", class)
	require.Equal(t, []deliveryRecord{{Attempt: 1, Status: "failed", Class: "auth", HTTPStatus: 401}}, deliveryRecords(t, w, sink))

	var line map[string]any
	for _, l := range strings.Split(w.Logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "delivery failed" {
			require.Nil(t, line, "one failure, one line")
			line = m
		}
	}
	require.NotNil(t, line, "the failure is logged:\n%s", w.Logs.String())
	require.EqualValues(t, sink, line["sink_id"])
	require.Equal(t, "auth", line["class"])
	require.Equal(t, "todo.dead_lettered", line["event_type"])
	require.Equal(t, scope.String(), line["owner_scope"])
	require.EqualValues(t, 401, line["http_status"])
	require.Contains(t, line["error"], "401")

	for _, where := range []string{w.Logs.String(), w.TableJSON("delivery_records"), w.TableJSON("outbox"), fmt.Sprintf("%+v", a)} {
		require.NotContains(t, where, token)
		require.NotContains(t, where, "structured-failure-canary")
	}
}

func TestDeliveryPanicStaysInItsSink(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	ga, gb := newGotify(t), newGotify(t)
	_, p, scope := w.Human()
	var (
		panicky   atomic.Int64 // the sink whose adapter panics
		panicking atomic.Bool
		panicked  = make(chan struct{}, 8)
	)
	panicking.Store(true)
	eng := w.ServeWith(func(e *engine.Engine) {
		testhooks.WrapAdapters(e, func(sinkID int64, a sinks.Adapter) sinks.Adapter {
			if sinkID != panicky.Load() {
				return a
			}
			return adapterFunc(func(ctx context.Context, m sinks.Message) sinks.Result {
				if panicking.Load() {
					panicked <- struct{}{}
					panic("adapter exploded")
				}
				return a.Deliver(ctx, m)
			})
		})
	})
	bad := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: ga.URL, Secret: "gtfya.panics"})
	good := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: gb.URL, Secret: "gtfya.healthy"})
	panicky.Store(bad)

	w.Emit(eng, todoDead(scope, 1, sinks.Content{}))
	bySink := map[int64]engine.Attempt{}
	for _, a := range w.WaitN(2) {
		bySink[a.SinkID] = a
	}
	require.Equal(t, "delivered", bySink[good].State)
	require.Equal(t, notifytype.ClassAbandoned, bySink[bad].Class, "the panic is a classified failure")
	require.Equal(t, "pending", bySink[bad].State, "retried on schedule")
	select {
	case <-panicked:
	case <-time.After(enginetest.WaitTimeout):
		t.Fatal("the adapter never ran")
	}

	// Both actors go on, neither restarted, and the panicked row is
	// delivered at its next slot.
	panicking.Store(false)
	w.Clock.Advance(engine.RetryDelay(2))
	again := w.Wait()
	require.Equal(t, bad, again.SinkID)
	require.Equal(t, "delivered", again.State)
	require.Equal(t, 2, again.Attempt)
	w.Emit(eng, todoDead(scope, 2, sinks.Content{}))
	for _, a := range w.WaitN(2) {
		require.Equal(t, "delivered", a.State, "%+v", a)
	}
	for _, s := range eng.AllSinkStatuses() {
		require.Zero(t, s.Restarts, "%+v", s)
	}
	require.Len(t, gb.received(), 2)
	require.Len(t, ga.received(), 2)
	require.Equal(t, map[string]int{"delivered": 4}, w.RowStates())
}

func TestDeliveryStatusWhileHolding(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	_, p, scope := w.Human()
	eng := w.Serve()
	var ids []int64
	for range 2 {
		g := newGotify(t)
		ids = append(ids, w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.status", PerHour: 1, Burst: 1}))
	}
	slices.Sort(ids)

	for todo := int64(1); todo <= 3; todo++ {
		w.Emit(eng, todoDead(scope, todo, sinks.Content{}))
	}
	states := map[int64][]string{}
	for _, a := range w.WaitN(6) {
		states[a.SinkID] = append(states[a.SinkID], a.State)
	}
	for _, id := range ids {
		require.Equal(t, []string{"delivered", "held", "held"}, states[id])
	}

	// Status is a snapshot; wait until each actor is resting after its last
	// step.
	var st []engine.SinkStatus
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st = eng.AllSinkStatuses()
		require.Len(c, st, len(ids))
		for _, s := range st {
			require.Equal(c, engine.SinkHolding, s.State, "%+v", s)
			require.Zero(c, s.InFlight, "%+v", s)
			require.Zero(c, s.Queued, "%+v", s)
		}
	}, enginetest.WaitTimeout, 5*time.Millisecond)

	for i, s := range st {
		require.Equal(t, ids[i], s.SinkID, "every active actor, by sink id")
		var held int
		var due time.Time
		require.NoError(t, w.Pool.QueryRow(w.Ctx,
			`SELECT count(*), max(due_at) FROM switchboard.outbox WHERE sink_id = $1 AND state = 'held' GROUP BY sink_id`, s.SinkID).Scan(&held, &due))
		require.Equal(t, 2, held)
		require.True(t, due.Equal(enginetest.Start.Add(time.Hour)), "one an hour: the next token in an hour, got %v", due)
		require.True(t, s.NextWake.Equal(due), "NextWake %v, held rows due %v", s.NextWake, due)
		require.GreaterOrEqual(t, s.Tokens, 0.0)
		require.Less(t, s.Tokens, 1.0, "the bucket is empty")
		require.Empty(t, s.LastClass)
		require.Zero(t, s.Restarts)
		require.EqualValues(t, 3, s.Delivered, "three steps: a send and two holds")
		require.Equal(t, held, s.Held, "Held is the number of rows held: %+v", s)
	}
}

func TestDeliveryStatusAfterFlush(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	eng := w.Serve()
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.flush", PerHour: 1, Burst: 1})
	logErrorsOnFailure(t, w)
	for todo := int64(1); todo <= 3; todo++ {
		w.Emit(eng, todoDead(scope, todo, sinks.Content{}))
	}
	w.WaitN(3)

	// When the token returns the held rows go out as one message; then the
	// actor holds nothing and waits for nothing.
	w.Clock.Advance(time.Hour)
	co := w.Wait()
	require.Equal(t, notifytype.EventType("coalesced"), co.EventType)
	require.Len(t, co.Rows, 2)
	require.Equal(t, "delivered", co.State)
	require.Len(t, g.received(), 2)
	require.Equal(t, map[string]int{"delivered": 3}, w.RowStates())

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st := eng.AllSinkStatuses()
		require.Len(c, st, 1)
		require.Equal(c, sink, st[0].SinkID)
		require.Zero(c, st[0].InFlight)
		require.Zero(c, st[0].Held, "after the flush nothing is held: %+v", st[0])
		require.Equal(c, engine.SinkIdle, st[0].State, "after the flush nothing is held: %+v", st[0])
		require.Zero(c, st[0].NextWake, "after the flush no wake-up is due: %+v", st[0])
	}, 2*time.Second, 5*time.Millisecond)
}

func TestDeliveryRetention(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	// The janitor runs at start only; the test calls CleanUp itself.
	eng := w.Serve(func(c *engine.Config) { c.JanitorInterval = 10 * 365 * 24 * time.Hour })
	ok := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.retention"})
	blocked := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: "http://10.0.0.1:9", Secret: "gtfya.retention"})
	deliver := func(todo int64) {
		t.Helper()
		w.Emit(eng, todoDead(scope, todo, sinks.Content{}))
		for _, a := range w.WaitN(2) {
			require.Contains(t, []string{"delivered", "undeliverable"}, a.State, "%+v", a)
		}
	}

	deliver(1) // 31 days old at clean-up: removed
	var pending int64
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `
		INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at, created_at)
		VALUES ($1, $2, 'todo.dead_lettered', 'high', '{}', $3, $4) RETURNING id`,
		ok, scope.String(), enginetest.Start.Add(365*24*time.Hour), enginetest.Start).Scan(&pending))
	w.Clock.Advance(2 * 24 * time.Hour)
	deliver(2) // 29 days old: kept
	w.Clock.Advance(29 * 24 * time.Hour)
	deliver(3) // new: kept

	require.NoError(t, eng.CleanUp(w.Ctx))

	const day = 24 * 60 * 60
	type row struct {
		Sink  int64
		State string
		Age   int64 // seconds
	}
	rows, err := w.Pool.Query(w.Ctx, `
		SELECT sink_id, state, extract(epoch FROM $1 - coalesce(finished_at, created_at))::bigint
		FROM switchboard.outbox ORDER BY id`, w.Clock.Now())
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	require.NoError(t, err)
	require.Equal(t, []row{
		{Sink: ok, State: "pending", Age: 31 * day},
		{Sink: ok, State: "delivered", Age: 29 * day},
		{Sink: blocked, State: "undeliverable", Age: 29 * day},
		{Sink: ok, State: "delivered"},
		{Sink: blocked, State: "undeliverable"},
	}, got, "finished rows older than 30 days are gone; newer and unfinished ones stay")
	rows, err = w.Pool.Query(w.Ctx, `
		SELECT extract(epoch FROM $1 - sent_at)::bigint FROM switchboard.delivery_records ORDER BY id`, w.Clock.Now())
	require.NoError(t, err)
	ages, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Equal(t, []int64{29 * day, 29 * day, 0, 0}, ages, "records older than 30 days are gone")
	require.Contains(t, w.Logs.String(), `"delivery_records":2,"outbox_rows":2`)
}
