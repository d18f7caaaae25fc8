package engine_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// Issue 27 item 1: an embedder declares its own event types.

// jobFailed is an embedder's event type: a job of its own failed. Its
// message is in the embedder's words and links the embedder's page.
func jobFailed() engine.EventKind {
	return engine.EventKind{
		Type:     "job.failed",
		Words:    "A job failed",
		Label:    "Failed jobs",
		Help:     "a job ran out of attempts",
		Severity: notifytype.SeverityHigh,
		Dedup:    engine.Dedup{By: engine.DedupOccurrence},
		Message: func(m engine.EventMessage) sinks.Draft {
			return sinks.Draft{
				Title:    "Job failed: " + m.Content.Title,
				Lines:    []string{fmt.Sprintf("Job %s failed after %s attempts.", m.Content.Place, m.Content.Data["attempts"])},
				Details:  []string{"Error: " + m.Content.Data["error"]},
				Link:     m.Content.LinkPath,
				LinkText: "Open the job",
			}
		},
	}
}

// jobsOnly configures an engine with the embedder's types alone (not the
// reference host's), its own base URL and its own coalesced link.
func jobsOnly(kinds ...engine.EventKind) func(*engine.Config) {
	return func(c *engine.Config) {
		c.Events = kinds
		c.BaseURL = "https://jobs.example.net"
		c.Links = engine.Links{
			Coalesced: func(o notifytype.OwnerScope) string { return "/owners/" + o.String() + "/notifications" },
			Text:      "See them all",
		}
	}
}

// gotifyLinks is a Gotify stand-in that records each message with the URL
// a click opens (extras client::notification).
type gotifyLinks struct {
	*httptest.Server
	mu   sync.Mutex
	msgs []gotifyLinked
}

type gotifyLinked struct {
	Title, Message, Link string
	Priority             int
}

func newGotifyLinks(t *testing.T) *gotifyLinks {
	g := &gotifyLinks{}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			Title    string `json:"title"`
			Message  string `json:"message"`
			Priority int    `json:"priority"`
			Extras   struct {
				Notification struct {
					Click struct {
						URL string `json:"url"`
					} `json:"click"`
				} `json:"client::notification"`
			} `json:"extras"`
		}
		_ = json.Unmarshal(body, &m)
		g.mu.Lock()
		g.msgs = append(g.msgs, gotifyLinked{Title: m.Title, Message: m.Message, Link: m.Extras.Notification.Click.URL, Priority: m.Priority})
		g.mu.Unlock()
	}))
	t.Cleanup(g.Close)
	return g
}

func (g *gotifyLinks) received() []gotifyLinked {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gotifyLinked(nil), g.msgs...)
}

func jobEvent(owner notifytype.OwnerScope, job int64, run int, c sinks.Content) engine.Event {
	if c.Title == "" {
		c.Title = fmt.Sprintf("export-%d", job)
	}
	c.Place = fmt.Sprintf("#%d", job)
	if c.Data == nil {
		c.Data = map[string]string{"error": "exit status 2\x00", "attempts": "3"} // a NUL is dropped, not refused
	}
	c.LinkPath = fmt.Sprintf("/jobs/%d", job)
	return engine.Event{Type: "job.failed", Owner: owner, OccurrenceKey: fmt.Sprintf("%d:%d", job, run), Content: c}
}

// An embedder's job.failed is emitted, delivered to a Gotify server in
// its own words with its own link, at its own severity, and deduplicated
// by its occurrence key: a second emit of one run adds nothing, another
// run is another message.
func TestEmbedderEventTypeIsDeliveredInItsOwnWords(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotifyLinks(t)
	_, p, scope := w.Human()
	eng := w.Serve(jobsOnly(jobFailed()))
	w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.jobs", Events: []notifytype.EventType{"job.failed"}})

	w.Emit(eng, jobEvent(scope, 12, 1, sinks.Content{Title: "nightly-export"}))
	require.Equal(t, "delivered", w.Wait().State)
	w.Emit(eng, jobEvent(scope, 12, 1, sinks.Content{Title: "nightly-export"})) // the same run again
	w.Emit(eng, jobEvent(scope, 12, 2, sinks.Content{Title: "nightly-export"})) // the next run
	a := w.Wait()
	require.Equal(t, "delivered", a.State)
	require.Equal(t, notifytype.EventType("job.failed"), a.EventType)

	msgs := g.received()
	require.Len(t, msgs, 2, "one message per run: the repeat of run 1 added nothing")
	for _, m := range msgs {
		require.Equal(t, "Job failed: nightly-export", m.Title)
		require.Equal(t, "Job #12 failed after 3 attempts.\n\nError: exit status 2\n\n[Open the job](https://jobs.example.net/jobs/12)", m.Message)
		require.Equal(t, "https://jobs.example.net/jobs/12", m.Link)
		require.Equal(t, 8, m.Priority, "the declared severity, high")
	}
	require.Equal(t, 2, w.F.Count(`SELECT count(*) FROM switchboard.outbox WHERE dedup_key LIKE 'job.failed:12:%'`),
		"the key is the type's key space and the emitter's occurrence key")
}

// A type that is not declared is refused by Emit, QueueEmit, EmitToSink and
// subscriptions, with invalid_argument naming the field, and nothing is
// written; the reference host's types are not the engine's.
func TestUndeclaredEventTypeIsRefused(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	_, p, scope := w.Human()
	eng := w.Engine(jobsOnly(jobFailed()))
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: "https://gotify.example.net", Secret: "gtfya.x", Events: []notifytype.EventType{"job.failed"}})

	field := func(err error) string {
		t.Helper()
		require.ErrorIs(t, err, notifytype.ErrInvalidArgument)
		e, ok := notifytype.AsError(err)
		require.True(t, ok)
		return e.Field
	}
	for _, typ := range []notifytype.EventType{"job.exploded", host.EventTodoDeadLettered, ""} {
		ev := engine.Event{Type: typ, Owner: scope, OccurrenceKey: "1:1"}
		err := pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error { return eng.Emit(w.Ctx, tx, ev) })
		require.Equal(t, "type", field(err), "Emit %q", typ)
		require.Contains(t, err.Error(), "not declared")

		b := &pgx.Batch{}
		require.Equal(t, "type", field(eng.QueueEmit(b, ev)), "QueueEmit %q", typ)
		require.Zero(t, b.Len(), "nothing queued")

		err = pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
			_, err := eng.EmitToSink(w.Ctx, tx, sink, ev)
			return err
		})
		require.Equal(t, "type", field(err), "EmitToSink %q", typ)
	}
	_, err := eng.AddSubscription(w.Ctx, p, sink, engine.SubscriptionInput{EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}})
	require.Equal(t, "event_types", field(err))

	// A declared type still needs what its dedup rule keys on.
	err = pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
		return eng.Emit(w.Ctx, tx, engine.Event{Type: "job.failed", Owner: scope})
	})
	require.Equal(t, "occurrence_key", field(err))
	tooMuch := map[string]string{}
	for i := range sinks.MaxDataEntries + 1 {
		tooMuch[fmt.Sprint(i)] = "v"
	}
	err = pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
		return eng.Emit(w.Ctx, tx, jobEvent(scope, 1, 1, sinks.Content{Data: tooMuch}))
	})
	require.Equal(t, "data", field(err))
	require.Zero(t, w.F.Count(`SELECT count(*) FROM switchboard.outbox_events`), "nothing written")

	var types []notifytype.EventType
	for _, k := range eng.EventKinds() {
		types = append(types, k.Type)
	}
	require.Equal(t, []notifytype.EventType{"job.failed", engine.EventAgentNotify, engine.EventDigest}, types,
		"the embedder's types, then the engine's own")
}

// New refuses declarations it cannot honour, naming each.
func TestNewRefusesBadEventDeclarations(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	noMessage := jobFailed()
	noMessage.Type, noMessage.Message = "job.lost", nil
	badName := jobFailed()
	badName.Type = "Job Failed"
	digest := jobFailed()
	digest.Type = engine.EventDigest
	dangling := jobFailed()
	dangling.Type, dangling.AlsoMatches = "job.retried", []notifytype.EventType{"job.nowhere"}
	windowed := jobFailed()
	windowed.Type, windowed.Dedup.Window = "job.windowed", time.Minute

	_, err := engine.New(w.Config(w.Pool, jobsOnly(jobFailed(), jobFailed(), noMessage, badName, digest, dangling, windowed)))
	require.Error(t, err)
	for _, want := range []string{
		`"job.failed" is declared twice`, `"job.lost": Message is required`, `"Job Failed": the name must be`,
		`"digest" is the engine's own`, `AlsoMatches names "job.nowhere"`, `"job.windowed": Dedup.Window is for DedupSubject only`,
	} {
		require.Contains(t, err.Error(), want)
	}
}

// Whatever a declaration's Message returns, the engine keeps the spec's
// rules (REQ-9): no secret of the sink and no URL credentials, no body
// without the subscription's opt-in, no control characters, every value
// on one line and cut, sender-written text cut to 120 before Message sees
// it.
func TestEngineKeepsItsRulesOnADeclaredMessage(t *testing.T) {
	t.Parallel()
	const token = "gtfya.cnry7f3a9c1e5b"
	const password = "cnrypw9d8e7f"
	const bodyCanary = "cnrybody4e2a"
	var seen sync.Map // what Message was given, by title
	greedy := engine.EventKind{
		Type: "job.failed", Words: "A job failed", Dedup: engine.Dedup{By: engine.DedupOccurrence},
		Message: func(m engine.EventMessage) sinks.Draft {
			seen.Store("title", m.Content.Title)
			seen.Store("body", m.Content.Body)
			return sinks.Draft{
				Title: m.Content.Title + " " + strings.Repeat("long title ", 1000),
				Lines: []string{
					"token " + token + " and dsn https://ops:" + password + "@db.internal:5432/jobs",
					strings.Repeat("x", 5000),
					"two\nlines\x1b[31m red\x00",
				},
				Details: []string{"body: " + m.Content.Body},
				Link:    "/jobs/12",
			}
		},
	}
	w := hosttest.NewWorld(t)
	g := newGotifyLinks(t)
	_, p, scope := w.Human()
	eng := w.Serve(jobsOnly(greedy))
	w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: token, Events: []notifytype.EventType{"job.failed"}})

	w.Emit(eng, engine.Event{Type: "job.failed", Owner: scope, OccurrenceKey: "12:1", Content: sinks.Content{
		Title: "\x1b]0;evil\x07" + strings.Repeat("sender ", 100), Body: "the payload " + bodyCanary,
	}})
	require.Equal(t, "delivered", w.Wait().State)

	title, _ := seen.Load("title")
	require.LessOrEqual(t, utf8.RuneCountInString(title.(string)), sinks.TitleMaxRunes, "sender text is cut before Message sees it")
	require.NotContains(t, title, "\x1b")
	body, _ := seen.Load("body")
	require.Empty(t, body, "Message never sees the body")

	msgs := g.received()
	require.Len(t, msgs, 1)
	m := msgs[0]
	all := m.Title + "\n" + m.Message + "\n" + m.Link
	for _, leak := range []string{token, "cnry7f3a9c1e5b", password, bodyCanary} {
		require.NotContains(t, all, leak)
	}
	require.Contains(t, m.Message, "token [redacted] and dsn https://[redacted]@db.internal:5432/jobs")
	require.LessOrEqual(t, utf8.RuneCountInString(m.Title), sinks.MessageTitleMaxRunes)
	require.NotContains(t, m.Title, "\n")
	for _, l := range strings.Split(m.Message, "\n\n") {
		require.LessOrEqual(t, utf8.RuneCountInString(l), sinks.MessageLineMaxRunes+100, "a line is cut (escapes aside)")
		require.NotContains(t, l, "\n", "every value on one line")
	}
	require.NotContains(t, all, "\x1b")
	require.NotContains(t, all, "\x00")
	require.Contains(t, m.Message, "two lines red")
	require.Equal(t, "https://jobs.example.net/jobs/12", m.Link)
}

// The message that stands for a sink's held rows names the declared types
// by their labels and links where Config.Links says, for the sink's owner.
func TestCoalescedMessageLinkComesFromConfig(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotifyLinks(t)
	_, p, scope := w.Human()
	eng := w.Serve(jobsOnly(jobFailed()))
	w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.jobs", Burst: 1, PerHour: 30,
		Events: []notifytype.EventType{"job.failed"}})

	const jobs = 4
	for i := int64(1); i <= jobs; i++ {
		w.Emit(eng, jobEvent(scope, i, 1, sinks.Content{}))
	}
	states := map[string]int{}
	for _, a := range w.WaitN(jobs) {
		states[a.State]++
	}
	require.Equal(t, map[string]int{"delivered": 1, "held": jobs - 1}, states)

	w.Clock.Advance(2 * time.Minute) // a token returns (an hour / 30)
	co := w.Wait()
	require.Equal(t, "delivered", co.State)
	require.Equal(t, notifytype.EventType("coalesced"), co.EventType)

	msgs := g.received()
	require.Len(t, msgs, 2)
	link := "https://jobs.example.net/owners/" + scope.String() + "/notifications"
	require.Equal(t, "Switchboard: 3 notifications waited while this sink's budget was spent", msgs[1].Title)
	require.Equal(t, []string{
		"This sink's budget was spent, so 3 notifications waited; here is how many of each.",
		"Failed jobs: 3",
		"[See them all](" + link + ")",
	}, strings.Split(msgs[1].Message, "\n\n"))
	require.Equal(t, link, msgs[1].Link)
	require.Equal(t, 8, msgs[1].Priority, "the highest declared severity among the held rows")
}

// The reference host's types, declared by the host, read exactly as the
// host's wording (host.Render, whose README golden test holds what a phone
// receives), and the engine's own as their wording: every type, with and
// without repeats and the excerpt.
func TestHostKindsKeepTheReferenceWording(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	eng := w.Engine()
	content := host.WithTodo(engine.Content{
		Title: "Nightly build failed on main", Place: "builds", Summary: "a delivery from an untrusted sender was quarantined",
		Subject: "octocat · org/repo · issue #12", LinkPath: "/board/todos/1817",
		Lines: []string{"- builds: 3 pending", "", "Open: https://switchboard.example.net/board/digests/4"}, Body: "the issue's body",
	}, host.TodoContent{
		Cause: "fail at the cap", OriginDisplay: "acme/forge#12", Attempts: 3, AttemptSummary: "tests still red", ArtifactHandle: "s3://builds/1817.log",
	})
	for _, typ := range host.EventTypes {
		for _, count := range []int{1, 4} {
			for _, excerpt := range []bool{false, true} {
				kind, ok := host.KindOf(typ)
				require.True(t, ok, typ)
				sev := kind.Severity
				m := sinks.Meta{EventType: typ, Severity: sev, Count: count, IncludeExcerpt: excerpt, BaseURL: eng.Config().BaseURL}
				var want sinks.Message
				switch typ {
				case engine.EventAgentNotify, engine.EventDigest:
					want = engine.RenderOwnForTest(content, m, host.Links().Text)
				default:
					want = host.Render(content, m)
				}
				got := eng.RenderForTest(typ, sev, count, excerpt, content)
				require.Equal(t, want, got, "%s ×%d excerpt=%v", typ, count, excerpt)
			}
		}
	}
	// Coalesced: the host's link and words, in the spec's order.
	counts := map[notifytype.EventType]int{host.EventDeliveryQuarantined: 3, host.EventTodoDeadLettered: 9}
	want := sinks.RenderCounts([]sinks.Count{
		{Label: "Dead letters", N: 9, Severity: notifytype.SeverityHigh},
		{Label: "Quarantined deliveries", N: 3, Severity: notifytype.SeverityNormal},
	}, eng.Config().BaseURL+host.CoalescedLinkPath, host.BoardLinkText)
	require.Equal(t, want, eng.RenderCoalescedForTest(notifytype.Human("1"), counts))
}

// Rows already in the outbox when the host's todo fields moved from
// Content into Content.Data carry them as top-level keys ("cause",
// "attempts", "attempt_summary", ...): after the upgrade they read exactly
// as they did before it (the messages below are what the engine made of
// these payloads then), and a key Data has wins over the old one.
func TestRowsStoredBeforeTodoFieldsMovedReadAsBefore(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	eng := w.Engine()
	require.Equal(t, "https://switchboard.example.net", eng.Config().BaseURL)

	deadLetter := `{"title":"Nightly build failed on main","place":"builds","summary":"Todo dead-lettered after 3 attempts",` +
		`"cause":"fail at the cap","link_path":"/board/todos/1817","origin_display":"acme/forge#12","attempts":3,` +
		`"attempt_summary":"3 tests failed in ./engine","artifact_handle":"s3://builds/1817.log"}`
	got := eng.RenderPayloadForTest(host.EventTodoDeadLettered, notifytype.SeverityHigh, 2, false, []byte(deadLetter))
	require.Equal(t, sinks.Message{
		Title: "Dead letter in builds: Nightly build failed on main (and 1 more)",
		Body: "A todo in queue builds dead-lettered after 3 attempts: its last attempt failed and no attempts were left.\n" +
			"This one and 1 more like it.\nOrigin: acme/forge#12\nLast attempt's summary (agent-written): 3 tests failed in ./engine\n" +
			"Artifact: s3://builds/1817.log\nLink: https://switchboard.example.net/board/todos/1817",
		Markdown: "A todo in queue builds dead-lettered after 3 attempts: its last attempt failed and no attempts were left.\n\n" +
			"This one and 1 more like it.\n\nOrigin: acme/forge#12\n\nLast attempt's summary (agent-written): 3 tests failed in ./engine\n\n" +
			"Artifact: s3://builds/1817.log\n\n[Open on the board](https://switchboard.example.net/board/todos/1817)",
		Link:     "https://switchboard.example.net/board/todos/1817",
		Severity: notifytype.SeverityHigh,
	}, got)
	// The same content in today's shape reads the same.
	today, err := json.Marshal(host.WithTodo(engine.Content{Title: "Nightly build failed on main", Place: "builds",
		Summary: "Todo dead-lettered after 3 attempts", LinkPath: "/board/todos/1817"}, host.TodoContent{Cause: "fail at the cap",
		OriginDisplay: "acme/forge#12", Attempts: 3, AttemptSummary: "3 tests failed in ./engine", ArtifactHandle: "s3://builds/1817.log"}))
	require.NoError(t, err)
	require.Equal(t, got, eng.RenderPayloadForTest(host.EventTodoDeadLettered, notifytype.SeverityHigh, 2, false, today))

	relay := `{"title":"Reply to acme/forge#12","place":"replies","cause":"lease expired at the cap","link_path":"/board/todos/1822",` +
		`"origin_permalink":"https://github.com/acme/forge/issues/12","attempts":7}`
	require.Equal(t, sinks.Message{
		Title: "Relay out of attempts in replies: Reply to acme/forge#12",
		Body: "A relay todo in queue replies gave up after 7 attempts: the lease on its last attempt expired and no attempts were left.\n" +
			"Origin: https://github.com/acme/forge/issues/12\nLink: https://switchboard.example.net/board/todos/1822",
		Markdown: "A relay todo in queue replies gave up after 7 attempts: the lease on its last attempt expired and no attempts were left.\n\n" +
			"Origin: https://github.com/acme/forge/issues/12\n\n[Open on the board](https://switchboard.example.net/board/todos/1822)",
		Link:     "https://switchboard.example.net/board/todos/1822",
		Severity: notifytype.SeverityHigh,
	}, eng.RenderPayloadForTest(host.EventRelayExhausted, notifytype.SeverityHigh, 1, false, []byte(relay)))

	// An old key and an entry of Data by the same name: Data's wins.
	both := `{"place":"q","cause":"interrupted","attempts":2,"data":{"cause":"endpoint revoked","attempts":"5"}}`
	require.Equal(t, "A todo in queue q dead-lettered after 5 attempts: the endpoint working on it was revoked.",
		strings.Split(eng.RenderPayloadForTest(host.EventTodoDeadLettered, notifytype.SeverityHigh, 1, false, []byte(both)).Body, "\n")[0])
}

// A digest's message links where Config.Links.Digest says, for its owner
// and id; without it, the message carries no link.
func TestDigestMessageLinkComesFromConfig(t *testing.T) {
	t.Parallel()
	embedder := func(o notifytype.OwnerScope, id int64) string {
		return fmt.Sprintf("https://reports.example.net/%s/%d", o, id)
	}
	for name, tc := range map[string]struct {
		links engine.Links
		want  func(o notifytype.OwnerScope, id int64) string
	}{
		"embedder's": {engine.Links{Digest: embedder}, embedder},
		"none":       {engine.Links{}, func(notifytype.OwnerScope, int64) string { return "" }},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := hosttest.NewWorld(t)
			g := newGotifyLinks(t)
			_, p, scope := w.Human()
			eng := w.Serve(func(c *engine.Config) { c.Links = tc.links })
			dgs := digests.New(eng, digests.Config{Sources: host.NewDigestSources(w.Pool)})
			sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.digest",
				Events: []notifytype.EventType{engine.EventDigest}})
			w.F.Queue(scope, "forge")
			dg, err := dgs.Create(w.Ctx, p, digests.Input{Owner: scope, Name: "morning", Schedule: "* 09:00", SinkIDs: []int64{sink}})
			require.NoError(t, err)
			_, err = dgs.SendNow(w.Ctx, p, dg.ID)
			require.NoError(t, err)
			w.FanOut(eng)
			require.Equal(t, "delivered", w.WaitFor(func(a engine.Attempt) bool { return a.EventType == engine.EventDigest }).State)

			msgs := g.received()
			require.Len(t, msgs, 1)
			require.Equal(t, "Queue digest: morning", msgs[0].Title)
			want := tc.want(scope, dg.ID)
			require.Equal(t, want, msgs[0].Link)
			if want == "" {
				require.NotContains(t, msgs[0].Message, "/board/digests/")
			}
		})
	}
}
