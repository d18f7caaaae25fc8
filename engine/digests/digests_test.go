package digests_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digest"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// withSources is the digests of an engine with the reference host's digest
// sources; with fast, its scheduler looks for due digests every 10 ms.
func withSources(w *hosttest.World, fast bool) digests.Config {
	c := digests.Config{Sources: host.NewDigestSources(w.Pool)}
	if fast {
		c.Interval = 10 * time.Millisecond
	}
	return c
}

// slotAgo is a daily UTC schedule whose latest send time is ago before the
// database's now, rounded down to the minute (so it is between ago and
// ago + 1 minute late).
func slotAgo(t *testing.T, w *hosttest.World, ago time.Duration) string {
	t.Helper()
	var hhmm string
	require.NoError(t, w.Pool.QueryRow(w.Ctx,
		`SELECT to_char(date_trunc('minute', (now() AT TIME ZONE 'UTC') - $1::interval), 'HH24:MI')`, ago).Scan(&hhmm))
	return "TZ=UTC * " + hhmm
}

// backdate makes a digest two days old, so that its latest send time falls
// after its creation.
func backdate(t *testing.T, w *hosttest.World, id int64) {
	t.Helper()
	_, err := w.Pool.Exec(w.Ctx, `UPDATE switchboard.digests SET created_at = now() - interval '2 days' WHERE id = $1`, id)
	require.NoError(t, err)
}

// deadTodo inserts a todo on queue that dead-lettered just now.
func deadTodo(t *testing.T, w *hosttest.World, queue int64, title string) int64 {
	t.Helper()
	id := w.F.Todo(hosttest.TodoOpts{Queue: queue, Title: title})
	_, err := w.Pool.Exec(w.Ctx, `UPDATE todos SET state = 'dead', dead_letter_count = 1, updated_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	return id
}

func requireCode(t *testing.T, err error, code notifytype.Code, field string) {
	t.Helper()
	require.Error(t, err)
	ce, ok := notifytype.AsError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, code, ce.Code, "%v", err)
	if field != "" {
		require.Equal(t, field, ce.Field, "%v", err)
	}
}

type digestWorld struct {
	w     *hosttest.World
	eng   *engine.Engine
	dgs   *digests.Service
	g     *gotifyServer
	p     engine.Principal
	scope notifytype.OwnerScope
	sink  int64
	queue int64
}

func newDigestWorld(t *testing.T, configure ...func(*engine.Config)) digestWorld {
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	eng := w.Engine(configure...)
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.digest"})
	return digestWorld{w: w, eng: eng, dgs: digests.New(eng, withSources(w, false)), g: g, p: p, scope: scope, sink: sink, queue: w.F.Queue(scope, "forge")}
}

func (d digestWorld) digest(t *testing.T, in digests.Input) digests.Digest {
	t.Helper()
	in.Owner = d.scope
	if in.Name == "" {
		in.Name = "morning"
	}
	if in.SinkIDs == nil && in.CairnConnectionID == 0 {
		in.SinkIDs = []int64{d.sink}
	}
	dg, err := d.dgs.Create(d.w.Ctx, d.p, in)
	require.NoError(t, err)
	return dg
}

func (d digestWorld) digestRows(t *testing.T) int {
	return d.w.F.Count(`SELECT count(*) FROM switchboard.outbox WHERE event_type = 'digest'`)
}

func TestDigestOneSendAcrossInstances(t *testing.T) {
	t.Parallel()
	// Scenario: One send across instances
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	engA, engB := w.Serve(), w.Serve()
	a, b := digests.New(engA, withSources(w, true)), digests.New(engB, withSources(w, true))
	sink := w.Sink(engA, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.digest"})
	w.F.Queue(scope, "forge")
	// Their own clocks disagree by an hour; the claim is on the database's.
	dg, err := b.Create(w.Ctx, p, digests.Input{Owner: scope, Name: "nine", Schedule: slotAgo(t, w, time.Minute), SinkIDs: []int64{sink}})
	require.NoError(t, err)
	backdate(t, w, dg.ID)

	att := w.WaitFor(func(a engine.Attempt) bool { return a.EventType == engine.EventDigest })
	require.Equal(t, "delivered", att.State)
	// Both instances have passed since: neither claims the time again.
	for _, eng := range []*digests.Service{a, b} {
		n, err := eng.RunDue(w.Ctx)
		require.NoError(t, err)
		require.Zero(t, n)
	}
	_, err = w.Settle()
	require.NoError(t, err)
	require.Equal(t, 1, w.F.Count(`SELECT count(*) FROM switchboard.digest_runs WHERE digest_id = $1 AND outcome = 'sent'`, dg.ID))
	require.Equal(t, 1, w.F.Count(`SELECT count(*) FROM switchboard.outbox WHERE event_type = 'digest'`))
	var sent int
	for _, m := range g.received() {
		if strings.HasPrefix(m.Title, "Queue digest: ") {
			sent++
		}
	}
	require.Equal(t, 1, sent)
}

func TestDigestClaimIsExclusiveUnderConcurrency(t *testing.T) {
	t.Parallel()
	d := newDigestWorld(t)
	other := digests.New(d.w.Engine(), withSources(d.w, false))
	dg := d.digest(t, digests.Input{Schedule: slotAgo(t, d.w, 2*time.Minute)})
	backdate(t, d.w, dg.ID)

	var wg sync.WaitGroup
	claims := make(chan int, 16)
	for i := range 16 {
		eng := d.dgs
		if i%2 == 1 {
			eng = other
		}
		wg.Go(func() {
			n, err := eng.RunDue(d.w.Ctx)
			require.NoError(t, err)
			claims <- n
		})
	}
	wg.Wait()
	close(claims)
	total := 0
	for n := range claims {
		total += n
	}
	require.Equal(t, 1, total)
	require.Equal(t, 1, d.digestRows(t))
}

func TestDigestMissedTimeSentOnceIfLessThanAnHourLate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		late    time.Duration
		outcome string
		rows    int
	}{
		{59 * time.Minute, "sent", 1},
		{61 * time.Minute, "late", 0},
	} {
		t.Run(tc.late.String(), func(t *testing.T) {
			t.Parallel()
			d := newDigestWorld(t)
			dg := d.digest(t, digests.Input{Schedule: slotAgo(t, d.w, tc.late)})
			backdate(t, d.w, dg.ID)

			n, err := d.dgs.RunDue(d.w.Ctx)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.Equal(t, tc.rows, d.digestRows(t))
			runs, err := d.dgs.Runs(d.w.Ctx, d.p, dg.ID, 10)
			require.NoError(t, err)
			require.Len(t, runs, 1)
			require.Equal(t, tc.outcome, runs[0].Outcome)

			// Recovery sends (or skips) it once: the next pass does nothing.
			n, err = d.dgs.RunDue(d.w.Ctx)
			require.NoError(t, err)
			require.Zero(t, n)
			require.Equal(t, tc.rows, d.digestRows(t))
		})
	}
}

func TestDigestNotDueBeforeItsTimeNorBeforeItExisted(t *testing.T) {
	t.Parallel()
	d := newDigestWorld(t)
	// Created now, its latest send time a minute ago was before it existed.
	d.digest(t, digests.Input{Schedule: slotAgo(t, d.w, time.Minute)})
	n, err := d.dgs.RunDue(d.w.Ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, d.digestRows(t))
}

func TestDigestInvalidSchedule(t *testing.T) {
	t.Parallel()
	// Scenario: Invalid schedule
	d := newDigestWorld(t)
	_, err := d.dgs.Create(d.w.Ctx, d.p, digests.Input{Owner: d.scope, Name: "bad", Schedule: "Mon-Fri 25:00", SinkIDs: []int64{d.sink}})
	requireCode(t, err, notifytype.CodeInvalidArgument, "schedule")
	require.Zero(t, d.w.F.Count(`SELECT count(*) FROM switchboard.digests`))

	dg := d.digest(t, digests.Input{Schedule: "Mon-Fri 09:00"})
	bad := "Mon-Fri 25:00"
	_, err = d.dgs.Update(d.w.Ctx, d.p, dg.ID, digests.Patch{Schedule: &bad})
	requireCode(t, err, notifytype.CodeInvalidArgument, "schedule")
	got, err := d.dgs.Get(d.w.Ctx, d.p, dg.ID)
	require.NoError(t, err)
	require.Equal(t, "Mon-Fri 09:00", got.Schedule, "a refused update changes nothing")
}

func TestDigestSixthRefused(t *testing.T) {
	t.Parallel()
	d := newDigestWorld(t)
	for i := range digests.MaxPerScope {
		d.digest(t, digests.Input{Name: fmt.Sprintf("d%d", i), Schedule: "* 09:00"})
	}
	_, err := d.dgs.Create(d.w.Ctx, d.p, digests.Input{Owner: d.scope, Name: "sixth", Schedule: "* 09:00", SinkIDs: []int64{d.sink}})
	requireCode(t, err, notifytype.CodeInvalidArgument, "digests")
	require.Equal(t, 5, d.w.F.Count(`SELECT count(*) FROM switchboard.digests`))
}

func TestDigestValidatesTargetsAndPermissions(t *testing.T) {
	t.Parallel()
	d := newDigestWorld(t)
	_, err := d.dgs.Create(d.w.Ctx, d.p, digests.Input{Owner: d.scope, Name: "x", Schedule: "* 09:00", SinkIDs: []int64{}})
	requireCode(t, err, notifytype.CodeInvalidArgument, "sink_ids")

	// Another human's sink, queue and Cairn connection.
	_, pb, scopeB := d.w.Human()
	sinkB := d.w.F.Sink(storetest.SinkOpts{Owner: scopeB})
	queueB := d.w.F.Queue(scopeB, "forge")
	connB := d.w.F.Connection(storetest.ConnectionOpts{Owner: scopeB, Kind: "cairn"})
	_, err = d.dgs.Create(d.w.Ctx, d.p, digests.Input{Owner: d.scope, Name: "x", Schedule: "* 09:00", SinkIDs: []int64{sinkB}})
	requireCode(t, err, notifytype.CodeInvalidArgument, "sink_ids")
	_, err = d.dgs.Create(d.w.Ctx, d.p, digests.Input{Owner: d.scope, Name: "x", Schedule: "* 09:00", SinkIDs: []int64{d.sink}, QueueIDs: []int64{queueB}})
	requireCode(t, err, notifytype.CodeInvalidArgument, "queue_ids")
	_, err = d.dgs.Create(d.w.Ctx, d.p, digests.Input{Owner: d.scope, Name: "x", Schedule: "* 09:00", CairnConnectionID: connB})
	requireCode(t, err, notifytype.CodeForbidden, "")
	require.Zero(t, d.w.F.Count(`SELECT count(*) FROM switchboard.digests`))

	// B cannot see or change A's digest (D3), nor create one in A's scope.
	dg := d.digest(t, digests.Input{Schedule: "* 09:00"})
	_, err = d.dgs.Get(d.w.Ctx, pb, dg.ID)
	requireCode(t, err, notifytype.CodeNotFound, "")
	requireCode(t, d.dgs.Delete(d.w.Ctx, pb, dg.ID), notifytype.CodeNotFound, "")
	_, err = d.dgs.Create(d.w.Ctx, pb, digests.Input{Owner: d.scope, Name: "y", Schedule: "* 09:00", SinkIDs: []int64{d.sink}})
	requireCode(t, err, notifytype.CodeNotFound, "")

	// A team member reads the team's digests but may not write them (D2).
	team := d.w.F.Team("")
	d.w.F.Member(team, hostid.Number(d.p.HumanID), "admin")
	memberID := d.w.F.Human("")
	d.w.F.Member(team, memberID, "member")
	teamScope := hostid.Team(team)
	teamSink := d.w.F.Sink(storetest.SinkOpts{Owner: teamScope})
	tdg, err := d.dgs.Create(d.w.Ctx, d.p, digests.Input{Owner: teamScope, Name: "team", Schedule: "* 09:00", SinkIDs: []int64{teamSink}})
	require.NoError(t, err)
	member := engine.HumanPrincipal(hostid.String(memberID))
	_, err = d.dgs.Get(d.w.Ctx, member, tdg.ID)
	require.NoError(t, err)
	requireCode(t, d.dgs.Delete(d.w.Ctx, member, tdg.ID), notifytype.CodeForbidden, "")
	_, err = d.dgs.SendNow(d.w.Ctx, member, tdg.ID)
	requireCode(t, err, notifytype.CodeForbidden, "")

	// An endpoint needs the notifications grant.
	ep := engine.EndpointPrincipal(1, d.p.HumanID, d.scope, notifytype.GrantTodos)
	_, err = d.dgs.List(d.w.Ctx, ep, d.scope)
	requireCode(t, err, notifytype.CodeForbidden, "")
}

// stubSources measures what the reference host does not, as a host that
// had them would: every such section available and zero (or given).
type stubSources struct {
	*host.DigestSources
	unheard []digest.NamedCount
}

func (s stubSources) Quarantined(context.Context, digests.Query) ([]digest.NamedCount, error) {
	return nil, nil
}
func (s stubSources) UnheardDoorbells(context.Context, digests.Query) ([]digest.NamedCount, error) {
	return s.unheard, nil
}
func (s stubSources) ClockedOut(context.Context, digests.Query) ([]string, error) {
	return nil, nil
}
func (s stubSources) AdmissionDeferred(context.Context, digests.Query) (map[int64]int, error) {
	return map[int64]int{}, nil
}

func TestDigestUnmeasuredIsNotZero(t *testing.T) {
	t.Parallel()
	// Scenario: Unmeasured is not zero
	d := newDigestWorld(t)
	d.w.F.Todo(hosttest.TodoOpts{Queue: d.queue, Title: "fresh"})
	dg := d.digest(t, digests.Input{Schedule: slotAgo(t, d.w, time.Minute)})

	pv, err := d.dgs.Preview(d.w.Ctx, d.p, dg.ID)
	require.NoError(t, err)
	require.Equal(t, digest.NotMeasured, pv.Report.UnheardDoorbells.Unavailable)
	require.False(t, pv.Quiet, "an unavailable section makes a digest not quiet")
	// Every unmeasured section is folded into one line, never shown as
	// zero, and the lead does not promise quiet (issue 25 item 4).
	require.Contains(t, pv.Text, "\nUnavailable (not measured on this instance): unanswered agent wake-ups, endpoints clocked out, work deferred by queue budgets.")
	require.True(t, strings.HasPrefix(pv.Text, "Nothing needs attention in what was measured; 3 sections could not be measured.\n"), pv.Text)
	require.NotContains(t, pv.Text, "0 unanswered")
	require.NotContains(t, pv.Text, "no unanswered")

	// So a digest with nothing else to say is still sent.
	backdate(t, d.w, dg.ID)
	n, err := d.dgs.RunDue(d.w.Ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, d.digestRows(t))
}

func TestDigestQuietDay(t *testing.T) {
	t.Parallel()
	// Scenario: Quiet day
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	eng := w.Engine()
	dgs := digests.New(eng, digests.Config{Sources: stubSources{DigestSources: host.NewDigestSources(w.Pool)}})
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.digest"})
	queue := w.F.Queue(scope, "forge")
	w.F.Todo(hosttest.TodoOpts{Queue: queue, Title: "young and pending"})

	quiet, err := dgs.Create(w.Ctx, p, digests.Input{Owner: scope, Name: "quiet", Schedule: slotAgo(t, w, time.Minute), SinkIDs: []int64{sink}})
	require.NoError(t, err)
	require.True(t, quiet.SkipWhenQuiet, "skip_when_quiet defaults to true")
	require.Equal(t, time.Hour, quiet.QuietThreshold)
	pv, err := dgs.Preview(w.Ctx, p, quiet.ID)
	require.NoError(t, err)
	require.Empty(t, pv.Report.Unavailable())
	require.True(t, pv.Quiet)

	backdate(t, w, quiet.ID)
	n, err := dgs.RunDue(w.Ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, w.F.Count(`SELECT count(*) FROM switchboard.outbox WHERE event_type = 'digest'`), "no digest is sent")
	runs, err := dgs.Runs(w.Ctx, p, quiet.ID, 5)
	require.NoError(t, err)
	require.Equal(t, "quiet", runs[0].Outcome)

	// One trouble count makes the next digest worth sending; so does a
	// queue older than the threshold.
	deadTodo(t, w, queue, "broken")
	pv, err = dgs.Preview(w.Ctx, p, quiet.ID)
	require.NoError(t, err)
	require.False(t, pv.Quiet)
	_, err = w.Pool.Exec(w.Ctx, `UPDATE todos SET state = 'done' WHERE state = 'dead'`)
	require.NoError(t, err)
	_, err = w.Pool.Exec(w.Ctx, `UPDATE todos SET created_at = now() - interval '61 minutes' WHERE state = 'pending'`)
	require.NoError(t, err)
	pv, err = dgs.Preview(w.Ctx, p, quiet.ID)
	require.NoError(t, err)
	require.False(t, pv.Quiet, "a queue older than the threshold is not quiet")
}

func TestDigestAnotherOwnersQueues(t *testing.T) {
	t.Parallel()
	// Scenario: Another owner's queues
	d := newDigestWorld(t)
	for range 2 {
		d.w.F.Todo(hosttest.TodoOpts{Queue: d.queue, Title: "a's todo"})
	}
	deadTodo(t, d.w, d.queue, "a's dead letter")
	_, _, scopeB := d.w.Human()
	queueB := d.w.F.Queue(scopeB, "forge") // the same name
	for range 5 {
		d.w.F.Todo(hosttest.TodoOpts{Queue: queueB, Title: "b's todo"})
	}
	for range 3 {
		deadTodo(t, d.w, queueB, "b's secret dead letter")
	}
	claimedB := d.w.F.Todo(hosttest.TodoOpts{Queue: queueB})
	_, err := d.w.Pool.Exec(d.w.Ctx, `UPDATE todos SET state = 'claimed', lease_expires_at = now() - interval '1 hour' WHERE id = $1`, claimedB)
	require.NoError(t, err)

	dg := d.digest(t, digests.Input{Schedule: "* 09:00"})
	pv, err := d.dgs.Preview(d.w.Ctx, d.p, dg.ID)
	require.NoError(t, err)
	r := pv.Report
	require.Equal(t, []digest.Queue{{ID: d.queue, Name: "forge"}}, r.Queues)
	require.Equal(t, 2, r.Pending.Data[d.queue].Count)
	require.Equal(t, 1, r.DeadLetters.Data[d.queue].Count)
	require.Zero(t, r.StalledLeases.Data[d.queue])
	require.Len(t, r.Pending.Data, 1)
	require.NotContains(t, pv.Text, "b's")
	require.Contains(t, pv.Text, "- Dead letter: a's dead letter: https://switchboard.example.net/board/todos/")
	require.Contains(t, pv.Text, "- 2 todos waiting, the oldest for under a minute")
}

func TestDigestSections(t *testing.T) {
	t.Parallel()
	d := newDigestWorld(t)
	other := d.w.F.Queue(d.scope, "inbox")
	old := d.w.F.Todo(hosttest.TodoOpts{Queue: d.queue})
	_, err := d.w.Pool.Exec(d.w.Ctx, `UPDATE todos SET created_at = now() - interval '2 hours 5 minutes' WHERE id = $1`, old)
	require.NoError(t, err)
	// Claimed: one healthy, one lease expired (not reaped), one silent
	// for more than twice its TTL though its lease runs on.
	for _, set := range []string{
		`lease_expires_at = now() + interval '4 minutes', last_heartbeat_at = now()`,
		`lease_expires_at = now() - interval '1 minute', last_heartbeat_at = now() - interval '2 minutes'`,
		`lease_expires_at = now() + interval '1 hour', last_heartbeat_at = now() - interval '11 minutes'`,
	} {
		id := d.w.F.Todo(hosttest.TodoOpts{Queue: d.queue, LeaseTTL: 300})
		_, err := d.w.Pool.Exec(d.w.Ctx, `UPDATE todos SET state = 'claimed', `+set+` WHERE id = $1`, id)
		require.NoError(t, err)
	}
	var titles []int64
	for i := range 7 {
		titles = append(titles, deadTodo(t, d.w, other, fmt.Sprintf("dead %d\x1b[31m\n%s", i, strings.Repeat("x", 200))))
	}
	// A dead letter before the previous digest does not count.
	before := deadTodo(t, d.w, other, "long ago")
	_, err = d.w.Pool.Exec(d.w.Ctx, `UPDATE todos SET updated_at = now() - interval '3 days' WHERE id = $1`, before)
	require.NoError(t, err)

	dg := d.digest(t, digests.Input{Schedule: "* 09:00"})
	pv, err := d.dgs.Preview(d.w.Ctx, d.p, dg.ID)
	require.NoError(t, err)
	r := pv.Report
	require.True(t, r.First)
	require.Equal(t, 1, r.Pending.Data[d.queue].Count)
	require.GreaterOrEqual(t, r.Pending.Data[d.queue].OldestAge, 2*time.Hour+5*time.Minute)
	require.Equal(t, 3, r.Claimed.Data[d.queue])
	require.Equal(t, 2, r.StalledLeases.Data[d.queue])
	require.Equal(t, 7, r.DeadLetters.Data[other].Count)
	require.Len(t, r.DeadLetters.Data[other].Recent, digest.MaxDeadLetterTitles)
	require.Contains(t, pv.Text, "Needs attention: 7 dead letters, 2 stalled todos, a todo waiting 2h 5m.\n")
	require.Contains(t, pv.Text, "- 1 todo waiting, the oldest for 2h 5m")
	require.Contains(t, pv.Text, fmt.Sprintf("https://switchboard.example.net/board/todos/%d", titles[6]))
	require.NotContains(t, pv.Text, fmt.Sprintf("/board/todos/%d\n", titles[0]), "only five titles")
	require.Contains(t, pv.Text, "- 7 dead letters in all, the latest 5 above")
	require.NotContains(t, pv.Text, "\x1b")
	for _, l := range strings.Split(pv.Text, "\n") {
		if title, ok := strings.CutPrefix(l, "- Dead letter: "); ok {
			title, _, _ = strings.Cut(title, ": https://")
			require.LessOrEqual(t, len([]rune(title)), 120, "titles are truncated (REQ-9)")
		}
	}
	require.Contains(t, pv.Markdown, "## Queue inbox")
	require.Contains(t, pv.Markdown, "https://switchboard.example.net/board/digests/")
	require.Contains(t, pv.Markdown, "# Digest morning")
}

// failingSources fails one section and hangs another.
type failingSources struct {
	*host.DigestSources
	canary string
}

func (s failingSources) Pending(context.Context, digests.Query) (map[int64]digest.Pending, error) {
	return nil, errors.New("relation todos_" + s.canary + " does not exist")
}

func (s failingSources) DeadLetters(ctx context.Context, _ digests.Query) (map[int64]digest.DeadLetters, error) {
	<-ctx.Done()
	return map[int64]digest.DeadLetters{}, nil // a source that answers late, as zero: dropped
}

func TestDigestSourceThatFailsOrTimesOutIsUnavailable(t *testing.T) {
	t.Parallel()
	d := newDigestWorld(t)
	canary := "cnry" + fmt.Sprint(time.Now().UnixNano())
	dgs := digests.New(d.w.Engine(), digests.Config{
		Sources:        failingSources{DigestSources: host.NewDigestSources(d.w.Pool), canary: canary},
		SectionTimeout: 2 * time.Second,
	})
	dg := d.digest(t, digests.Input{Schedule: slotAgo(t, d.w, time.Minute)})
	pv, err := dgs.Preview(d.w.Ctx, d.p, dg.ID)
	require.NoError(t, err)
	require.Equal(t, "its source failed, the instance's log says why", pv.Report.Pending.Unavailable)
	require.Equal(t, "timed out after 2s", pv.Report.DeadLetters.Unavailable)
	require.True(t, pv.Report.Claimed.Available(), "other sections stand")
	require.False(t, pv.Quiet)
	require.Contains(t, pv.Text, "\nUnavailable (its source failed, the instance's log says why): waiting todos.")
	require.Contains(t, pv.Text, "\nUnavailable (timed out after 2s): dead letters.")
	require.NotContains(t, pv.Text, "no dead letters")
	require.NotContains(t, pv.Text, canary, "a source's error text never reaches the digest")
	require.Contains(t, d.w.Logs.String(), canary, "it is logged")
}

func TestDigestSendNowKeepsTheScheduledSlot(t *testing.T) {
	t.Parallel()
	d := newDigestWorld(t)
	dg := d.digest(t, digests.Input{Schedule: slotAgo(t, d.w, time.Minute)})
	backdate(t, d.w, dg.ID)
	run, err := d.dgs.SendNow(d.w.Ctx, d.p, dg.ID)
	require.NoError(t, err)
	require.Equal(t, "sent", run.Outcome)
	require.Equal(t, 1, run.SinksQueued)
	require.Equal(t, 1, d.digestRows(t))
	got, err := d.dgs.Get(d.w.Ctx, d.p, dg.ID)
	require.NoError(t, err)
	require.Nil(t, got.LastSentAt)

	n, err := d.dgs.RunDue(d.w.Ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the scheduled time is still sent")
	require.Equal(t, 2, d.digestRows(t))
}

func TestDigestSinkDownAppearsInTheNextDigest(t *testing.T) {
	t.Parallel()
	// Scenario: Sink down
	// (its first half, seven attempts over about 30 minutes, is
	// TestDeliverySinkDown; this is the next digest's "could not deliver").
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	down := newGotify(t)
	down.setStatus(http.StatusBadGateway)
	_, p, scope := w.Human()
	eng := w.Serve()
	dgs := digests.New(eng, withSources(w, false))
	w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: down.URL, Secret: "gtfya.down"})
	up := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.up", Events: []notifytype.EventType{engine.EventDigest}})
	w.F.Queue(scope, "forge")

	w.Emit(eng, deadLetterOf(scope, 2))
	for k := 1; k <= engine.MaxAttempts; k++ {
		a := w.WaitFor(func(a engine.Attempt) bool { return a.EventType == host.EventTodoDeadLettered })
		if k < engine.MaxAttempts {
			w.Clock.Advance(engine.RetryDelay(k+1) - engine.RetryDelay(k))
		} else {
			require.Equal(t, "undeliverable", a.State)
		}
	}

	dg, err := dgs.Create(w.Ctx, p, digests.Input{Owner: scope, Name: "next", Schedule: slotAgo(t, w, time.Minute), SinkIDs: []int64{up}})
	require.NoError(t, err)
	backdate(t, w, dg.ID)
	n, err := dgs.RunDue(w.Ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	a := w.WaitFor(func(a engine.Attempt) bool { return a.EventType == engine.EventDigest })
	require.Equal(t, "delivered", a.State)
	var msg gotifyMessage
	for _, m := range g.received() {
		if strings.HasPrefix(m.Title, "Queue digest: ") {
			msg = m
		}
	}
	require.Equal(t, "Queue digest: next", msg.Title)
	require.Contains(t, msg.Message, "Needs attention: 1 notification not delivered.")
	require.Contains(t, msg.Message, "\n\n1 notification could not be delivered.")
}

func TestDigestCountsQuarantineOfItsOwnWebhooks(t *testing.T) {
	t.Parallel()
	d := newDigestWorld(t)
	_, _, scopeB := d.w.Human()
	mine := d.w.F.Webhook(d.scope, "github")
	theirs := d.w.F.Webhook(scopeB, "github")
	for _, hook := range []struct {
		id    int64
		owner notifytype.OwnerScope
		n     int
	}{{mine, d.scope, 3}, {theirs, scopeB, 7}} {
		for range hook.n {
			_, err := d.w.Pool.Exec(d.w.Ctx, `INSERT INTO webhook_deliveries (webhook_id, owner, received_at, outcome, payload, trace)
				VALUES ($1, $2, now(), 'quarantined', '{}', '{}')`, hook.id, hook.owner.String())
			require.NoError(t, err)
		}
	}
	dg := d.digest(t, digests.Input{Schedule: "* 09:00"})
	pv, err := d.dgs.Preview(d.w.Ctx, d.p, dg.ID)
	require.NoError(t, err)
	require.Equal(t, []digest.NamedCount{{Name: "github", Count: 3}}, pv.Report.Quarantined.Data)
	require.Contains(t, pv.Text, "Quarantined deliveries (from senders not trusted yet):\n- github: 3 deliveries")
	require.Contains(t, pv.Text, "Needs attention: 3 quarantined deliveries.")
	require.False(t, pv.Quiet)
}

// Every write of a digest (create, change, send now, delete) is recorded
// in the write log with its author, in the write's own transaction
// (REQ-5); a refused change records nothing.
func TestDigestWritesRecordTheirAuthor(t *testing.T) {
	t.Parallel()
	d := newDigestWorld(t)
	dg := d.digest(t, digests.Input{Schedule: "* 09:00"})
	name := "evening"
	_, err := d.dgs.Update(d.w.Ctx, d.p, dg.ID, digests.Patch{Name: &name})
	require.NoError(t, err)
	bad := "every day at nine"
	_, err = d.dgs.Update(d.w.Ctx, d.p, dg.ID, digests.Patch{Schedule: &bad})
	requireCode(t, err, notifytype.CodeInvalidArgument, "schedule")
	_, err = d.dgs.SendNow(d.w.Ctx, d.p, dg.ID)
	require.NoError(t, err)
	require.NoError(t, d.dgs.Delete(d.w.Ctx, d.p, dg.ID))

	ws, err := store.ListWrites(d.w.Ctx, d.w.Pool, "digest", dg.ID)
	require.NoError(t, err)
	var actions []string
	for _, w := range ws {
		actions = append(actions, w.Action)
		require.Equal(t, d.p.HumanID, w.HumanID, w.Action)
		require.Zero(t, w.EndpointID, w.Action)
		require.Equal(t, d.scope.String(), w.Owner, w.Action)
	}
	require.Equal(t, []string{"digest.create", "digest.update", "digest.send", "digest.delete"}, actions)
}
