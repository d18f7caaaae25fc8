package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// Emit records ev in the caller's transaction tx, when some subscription
// of ev.Owner matches it (type, filters, minimum severity): one single-row
// insert, one round trip, whatever the number of matching sinks. Nothing
// matches, nothing is written. The row carries the ids of the sinks it
// matched in tx, so where the event goes is decided when tx commits
// (REQ-10); the claimers then fan it out into one outbox row per sink of
// that set (see FanOut). Of the subject's body only the 280-character
// excerpt is kept, and only when a matching subscription opted in.
//
// An event of a type not declared (Config.Events) is refused with
// invalid_argument on "type", and nothing is written. Repeats are
// coalesced per sink by the event's dedup key (D7), as its type's
// declaration says (EventKind.Dedup):
//   - DedupOccurrence: keyed by Event.OccurrenceKey; a second emit of the
//     same occurrence adds nothing. A type's AlsoMatches lets it reach the
//     subscriptions of another type; the reference host's relay.exhausted
//     (todo.dead_lettered's key space) replaces an open
//     todo.dead_lettered row of the same key, so a sink hears of a relay
//     todo's dead letter once, as relay.exhausted, whichever of the two it
//     subscribed to.
//   - DedupSubject: keyed by Event.Subject; the row waits out the type's
//     window, and a repeat while it is open counts on it ("and N more").
//   - DedupNone: each emit is its own row.
func (e *Engine) Emit(ctx context.Context, tx pgx.Tx, ev Event) error {
	now, err := e.nowIn(ctx, tx)
	if err != nil {
		return fmt.Errorf("error emitting %s: %w", ev.Type, err)
	}
	p, err := e.emitParams(ev, now)
	if err != nil {
		return err
	}
	p.Notify = p.DueAfter <= 0 && e.mayNotify()
	if err := store.EmitTx(ctx, tx, p); err != nil {
		return fmt.Errorf("error emitting %s: %w", ev.Type, err)
	}
	return nil
}

// QueueEmit is Emit for a host that sends its statements in a pgx.Batch:
// it queues Emit's one statement into b, so the event's row rides the
// round trip that carries the host's own statements, and commits or rolls
// back with them. Send b in the host's transaction (tx.SendBatch), or on
// its own, where PostgreSQL runs the whole batch as one implicit
// transaction. Everything Emit guarantees holds (REQ-10):
//   - the outbox_events row exists if and only if the transaction that
//     ran b commits, and only when some subscription of ev.Owner matched;
//   - the sinks it goes to are those matched when b runs in that
//     transaction (outbox_events.sink_ids), as for Emit;
//   - repeats are coalesced by dedup key exactly as Emit's (see Emit);
//   - the claimers are woken at commit by a NOTIFY, debounced as Emit's
//     (Config.NotifyDebounce); one skipped is found by their poll.
//
// An invalid event is refused at once, with Emit's codes
// (invalid_argument naming the field), and nothing is queued. QueueEmit
// queues exactly one statement, so a host reading b's results one by one
// reads one more; a database error of that statement comes back from b's
// results (BatchResults.Exec or Close), wrapped, where the host checks its
// own. The event's instant is the database's clock_timestamp() when the
// statement runs (a test's stand-in clock, when one is set): the
// database's time, as Emit's, without a round trip of its own.
func (e *Engine) QueueEmit(b *pgx.Batch, ev Event) error {
	if b == nil {
		return notifytype.InvalidArgument("batch", "QueueEmit needs the host's batch")
	}
	var now time.Time // zero: the database's clock, read by the statement
	if e.testDBClock != nil {
		now = e.testDBClock.Now()
	}
	p, err := e.emitParams(ev, now)
	if err != nil {
		return err
	}
	p.Notify = p.DueAfter <= 0 && e.mayNotify()
	store.QueueEmit(b, p)
	return nil
}

// fanOutBatch is how many events one fan-out statement of the fan-out
// service takes.
const fanOutBatch = 500

// fanOutInline is how many events the fan-out in a claim cycle's first
// round trip takes.
const fanOutInline = 100

// fanOut turns the committed events waiting in the outbox into outbox
// rows, one per matching sink, coalesced by dedup key, until none is left;
// it reports how many events it took. each, when not nil, is told of
// every batch that wrote rows, once it committed. The fan-out service
// runs it; tests call it (testhooks.FanOut) to have an event's rows at
// once.
func (e *Engine) fanOut(ctx context.Context, each func()) (int, error) {
	total := 0
	for {
		now, err := e.now(ctx)
		if err != nil {
			return total, err
		}
		r, err := store.FanOut(ctx, e.cfg.Pool, fanOutBatch, now, e.kinds.replaces)
		total += r.Events
		e.fannedOut(r)
		if err == nil && r.Rows > 0 && each != nil {
			each()
		}
		if err != nil || r.Events < fanOutBatch {
			return total, err
		}
	}
}

// fanOuter is the service that fans out the events a claim cycle's own
// fan-out left (more than fanOutInline were waiting): a backlog of events
// becomes rows beside the claims that deliver the rows already there,
// instead of before them.
type fanOuter struct {
	e    *Engine
	wake chan struct{}
}

func newFanOuter(e *Engine) *fanOuter { return &fanOuter{e: e, wake: make(chan struct{}, 1)} }

func (f *fanOuter) String() string { return "fan-out" }

// poke wakes the service without blocking.
func (f *fanOuter) poke() { wakeUp(f.wake) }

// Serve fans out, each time it is poked, every event waiting, and wakes
// the claimer as each batch commits.
func (f *fanOuter) Serve(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.wake:
		}
		if _, err := f.e.fanOut(ctx, f.e.claimer.poke); err != nil && ctx.Err() == nil {
			f.e.log.Error("error fanning out events", "error", err)
		}
	}
}

// analyzeAfterRows is how many outbox rows fanned out since the last
// analysis make the engine refresh the outbox's statistics
// (store.AnalyzeOutbox).
const analyzeAfterRows = 5000

// fannedOut logs what a fan-out batch found of note, and has the outbox
// analyzed once analyzeAfterRows rows arrived since the last time.
func (e *Engine) fannedOut(r store.FanOutResult) {
	if e.sinceAnalyze.Add(int64(r.Rows)) >= analyzeAfterRows && e.analyzing.CompareAndSwap(false, true) {
		e.sinceAnalyze.Store(0)
		go func() {
			defer e.analyzing.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := store.AnalyzeOutbox(ctx, e.cfg.Pool); err != nil {
				e.log.Warn("error refreshing the outbox's statistics", "error", err)
			}
		}()
	}
	if r.Gone > 0 {
		e.log.Warn("events matched sinks deleted before fan-out; recorded as undeliverable",
			"delivery_records", r.Gone, "class", notifytype.ClassConfig)
	}
}

func (e *Engine) emitParams(ev Event, now time.Time) (p store.EmitParams, err error) {
	kind, ok := e.kinds.byType[ev.Type]
	if !ok {
		return p, notifytype.InvalidArgumentf("type", "event type %q is not declared (Config.Events)", ev.Type)
	}
	if !ev.Owner.Valid() {
		return p, notifytype.InvalidArgument("owner", "an event needs exactly one owner scope")
	}
	sev := cmp.Or(ev.Severity, kind.Severity)
	if !sev.Valid() {
		return p, notifytype.InvalidArgumentf("severity", "%q is not low, normal or high", sev)
	}

	p = store.EmitParams{
		Owner:        ev.Owner.String(),
		MatchTypes:   []string{string(ev.Type)},
		EventType:    string(ev.Type),
		Severity:     string(sev),
		SeverityRank: sev.Rank(),
		QueueID:      ev.QueueID,
		EndpointID:   ev.EndpointID,
		WebhookID:    ev.WebhookID,
		DueAt:        now,
	}
	for _, t := range kind.AlsoMatches {
		p.MatchTypes = append(p.MatchTypes, string(t))
	}
	var key string
	switch kind.Dedup.By {
	case DedupOccurrence:
		if ev.OccurrenceKey == "" {
			return p, notifytype.InvalidArgumentf("occurrence_key", "a %s event needs its occurrence key", ev.Type)
		}
		key = kind.Dedup.KeySpace + ":" + ev.OccurrenceKey
	case DedupSubject:
		if ev.Subject == "" {
			return p, notifytype.InvalidArgumentf("subject", "a %s event needs its subject", ev.Type)
		}
		key = kind.Dedup.KeySpace + ":" + ev.Subject
		p.DueAfter = kind.Dedup.Window
		p.Windowed = true
	}
	if key != "" {
		if len(key) > maxDedupKey || strings.ContainsRune(key, 0) {
			field := "occurrence_key"
			if kind.Dedup.By == DedupSubject {
				field = "subject"
			}
			return p, notifytype.InvalidArgumentf(field, "a dedup key is at most %d bytes, without NUL", maxDedupKey)
		}
		p.DedupKey = &key
	}

	if len(ev.Content.Data) > sinks.MaxDataEntries {
		return p, notifytype.InvalidArgumentf("data", "at most %d entries of content data", sinks.MaxDataEntries)
	}
	ev.Content = withoutNUL(ev.Content)
	lean := ev.Content
	lean.Body = ""
	if p.Payload, err = json.Marshal(lean); err != nil {
		return p, fmt.Errorf("error encoding event content: %w", err)
	}
	if ev.Content.Body != "" {
		// Only the excerpt is ever sent (REQ-9): the rest is not kept.
		excerpt := sinks.Clean(ev.Content.Body, sinks.ExcerptMaxRunes)
		p.Body = &excerpt
	}
	return p, nil
}

// mayNotify reports whether this emit should NOTIFY the claimers: at most
// once per Config.NotifyDebounce of wall time, since PostgreSQL serialises
// the commits of notifying transactions. An emit that skips it is found by
// the claimers' poll.
func (e *Engine) mayNotify() bool {
	if e.cfg.NotifyDebounce < 0 {
		return true
	}
	now := time.Now().UnixNano()
	last := e.lastNotify.Load()
	return now-last >= int64(e.cfg.NotifyDebounce) && e.lastNotify.CompareAndSwap(last, now)
}

// withoutNUL drops NUL characters from every field: jsonb refuses them, and
// a sender's NUL must not fail the host's transaction. Rendering drops
// control characters anyway.
func withoutNUL(c sinks.Content) sinks.Content {
	for _, f := range []*string{&c.Title, &c.Place, &c.Summary, &c.Subject, &c.LinkPath, &c.Body} {
		*f = strings.ReplaceAll(*f, "\x00", "")
	}
	if c.Lines != nil {
		lines := make([]string, len(c.Lines))
		for i, l := range c.Lines {
			lines[i] = strings.ReplaceAll(l, "\x00", "")
		}
		c.Lines = lines
	}
	if c.Data != nil {
		data := make(map[string]string, len(c.Data))
		for k, v := range c.Data {
			data[strings.ReplaceAll(k, "\x00", "")] = strings.ReplaceAll(v, "\x00", "")
		}
		c.Data = data
	}
	return c
}
