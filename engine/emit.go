package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
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
// Repeats are coalesced per sink by the event's dedup key (D7):
//   - todo.dead_lettered and relay.exhausted are keyed by the todo and its
//     dead-letter count; a second emit of the same dead letter adds nothing,
//     and relay.exhausted replaces an open todo.dead_lettered row for the
//     same todo. relay.exhausted also matches subscriptions to
//     todo.dead_lettered, so a sink hears of a relay todo's dead letter
//     once, as relay.exhausted, whichever of the two it subscribed to.
//   - delivery.quarantined is keyed by webhook and its row waits out a
//     10-minute window; rule.notify is keyed by rule and subject. A repeat
//     while the row is open counts on that row ("and N more").
//   - agent.notify and digest have no key: each is its own row.
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
	if e.cfg.databaseClock != nil {
		now = e.cfg.databaseClock.Now()
	}
	p, err := e.emitParams(ev, now)
	if err != nil {
		return err
	}
	p.Notify = p.DueAfter <= 0 && e.mayNotify()
	store.QueueEmit(b, p)
	return nil
}

// fanOutBatch is how many events one fan-out statement takes.
const fanOutBatch = 500

// fanOut turns the committed events waiting in the outbox into outbox
// rows, one per matching sink, coalesced by dedup key, until none is left;
// it reports how many events it took. The claimers of every instance do it
// before each claim; tests call it (enginetest.FanOut) to have an
// event's rows at once.
func (e *Engine) fanOut(ctx context.Context) (int, error) {
	total := 0
	for {
		now, err := e.now(ctx)
		if err != nil {
			return total, err
		}
		r, err := store.FanOut(ctx, e.cfg.Pool, fanOutBatch, now)
		total += r.Events
		e.fannedOut(r)
		if err != nil || r.Events < fanOutBatch {
			return total, err
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
	if !ev.Type.Valid() {
		return p, notifytype.InvalidArgumentf("type", "unknown event type %q", ev.Type)
	}
	if !ev.Owner.Valid() {
		return p, notifytype.InvalidArgument("owner", "an event needs exactly one owner scope")
	}
	sev := ev.Severity
	if sev == "" {
		sev = ev.Type.DefaultSeverity()
	}
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
	var key string
	switch ev.Type {
	case notifytype.EventTodoDeadLettered, notifytype.EventRelayExhausted:
		if ev.TodoID <= 0 || ev.DeadLetterCount <= 0 {
			return p, notifytype.InvalidArgument("todo_id", "a dead-letter event needs the todo id and its dead-letter count")
		}
		key = "todo:" + strconv.FormatInt(ev.TodoID, 10) + ":" + strconv.Itoa(ev.DeadLetterCount)
		if ev.Type == notifytype.EventRelayExhausted {
			p.MatchTypes = append(p.MatchTypes, string(notifytype.EventTodoDeadLettered))
		}
	case notifytype.EventDeliveryQuarantined:
		if ev.WebhookID <= 0 {
			return p, notifytype.InvalidArgument("webhook_id", "a quarantine event needs its webhook")
		}
		key = "webhook:" + strconv.FormatInt(ev.WebhookID, 10)
		p.DueAfter = QuarantineWindowDefault
		p.Windowed = true
	case notifytype.EventRuleNotify:
		switch {
		case ev.RuleID > 0 && ev.SubjectKey != "":
			key = "rule:" + strconv.FormatInt(ev.RuleID, 10) + ":" + ev.SubjectKey
		case ev.RuleID > 0 && ev.EventID > 0:
			key = "rule:" + strconv.FormatInt(ev.RuleID, 10) + ":event:" + strconv.FormatInt(ev.EventID, 10)
		default:
			return p, notifytype.InvalidArgument("rule_id", "a rule.notify event needs its rule and a subject key or event id")
		}
		p.Windowed = true
	}
	if key != "" {
		p.DedupKey = &key
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
	for _, f := range []*string{&c.Title, &c.Place, &c.Summary, &c.Cause, &c.LinkPath, &c.OriginDisplay, &c.OriginPermalink, &c.AttemptSummary, &c.ArtifactHandle, &c.Body} {
		*f = strings.ReplaceAll(*f, "\x00", "")
	}
	return c
}
