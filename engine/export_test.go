package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// OpenConnectionForTest exposes openConnection, the check delivery runs on
// every use of a connection, to the external tests.
func (e *Engine) OpenConnectionForTest(ctx context.Context, id int64, scope notifytype.OwnerScope, kind string) (notifytype.Secret, error) {
	_, s, err := e.openConnection(ctx, e.cfg.Pool, id, scope, kind)
	return s, err
}

// JanitorLockKeyForTest is the advisory lock the janitor holds while it
// cleans up, so a test can hold it as another instance would.
const JanitorLockKeyForTest = janitorLockKey

// SetRecordTryTimeoutForTest shortens one try of the recorder's write, so
// a test can make writes fail quickly. Set it before Serve.
func (e *Engine) SetRecordTryTimeoutForTest(d time.Duration) { e.recorder.tryTimeout = d }

// ExpiredSearchesForTest is how many claims have looked for rows whose
// claim expired, counted once each has returned.
func (e *Engine) ExpiredSearchesForTest() int64 { return e.claimer.expiredSearches.Load() }

// FirstSweepPendingForTest reports whether the claimer waits for the
// first sweep after a notification.
func (e *Engine) FirstSweepPendingForTest() bool { return e.claimer.armed.Load() == sweepFirst }

// OnlyASweepLooksForTest reports whether, after at least one
// notification was passed on, the claimer waits for a sweep with nothing
// else that could fan out events: no pass running or asked for, no
// notification's events pending. An event committed then, notifying
// nobody, is found by a sweep or not at all (the poll aside).
func (e *Engine) OnlyASweepLooksForTest() bool {
	c := e.claimer
	if c.notified.Load() == 0 || c.armed.Load() == sweepNone {
		return false
	}
	if !c.passing.TryLock() {
		return false
	}
	defer c.passing.Unlock()
	return !c.events.Load() && len(c.wake) == 0 && c.armed.Load() != sweepNone
}

// NotifiedNowForTest makes the engine's emits act as if one had just sent
// a NOTIFY: those inside the debounce window that follows skip theirs.
func (e *Engine) NotifiedNowForTest() { e.lastNotify.Store(time.Now().UnixNano()) }

// RecordForTest has the recorder write fs as one group, as it writes the
// outcomes of attempts finished together.
func (e *Engine) RecordForTest(fs []store.Finished) {
	group := make([]finishedAttempt, len(fs))
	for i, f := range fs {
		group[i] = finishedAttempt{f: f}
	}
	e.recorder.write(group)
}

// HandForTest records row as handed to its sink's actor, as the claimer
// does when it dispatches it, without queuing it: the test plays the actor
// and the recorder of that copy, which the engine forgets only once the
// copy's outcome is written (RecordForTest).
func (e *Engine) HandForTest(row store.OutboxRow) { e.handed.hand(row) }

// InstanceForTest is the engine's instance name, as its claims carry it.
func (e *Engine) InstanceForTest() string { return e.instance }

// ReserveForTest reserves row as an actor does before it sends, in a group
// of its own, and reports whether the row's attempt began or the row was
// held for a token, or the group's error.
//
// The engine need not be serving: it beats first, as Start does, so that
// its heartbeat lets it dispatch (store.DispatchFence).
func (e *Engine) ReserveForTest(ctx context.Context, row store.OutboxRow) (began, held bool, err error) {
	if err := e.beat(ctx); err != nil {
		return false, false, err
	}
	var r reserved
	q := &reserveReq{ctx: ctx, row: row, slot: &r, answered: make(chan struct{}, 1)}
	if busy := e.reserveGroup(ctx, []*reserveReq{q}); len(busy) > 0 {
		return false, false, errors.New("the sink was locked elsewhere")
	}
	return len(r.res.rows) > 0, r.held, r.err
}

// BudgetForTest is the token bucket a sink's budget is.
type BudgetForTest = tokenBucket

// RenderForTest words one outbox row of type t as delivery does (the
// kind's Message finished by the engine's rules), for tests that compare
// it with the reference wording.
func (e *Engine) RenderForTest(t notifytype.EventType, sev notifytype.Severity, count int, excerpt bool, c sinks.Content) sinks.Message {
	payload, _ := json.Marshal(c)
	return e.render(store.OutboxRow{EventType: string(t), Severity: string(sev), Count: count, IncludeExcerpt: excerpt, Payload: payload})
}

// RenderPayloadForTest words one outbox row of type t whose stored
// content is payload, as delivery does: for rows stored before a change
// of Content's shape.
func (e *Engine) RenderPayloadForTest(t notifytype.EventType, sev notifytype.Severity, count int, excerpt bool, payload []byte) sinks.Message {
	return e.render(store.OutboxRow{EventType: string(t), Severity: string(sev), Count: count, IncludeExcerpt: excerpt, Payload: payload})
}

// RenderUncachedForTest words the row RenderPayloadForTest words, afresh:
// without the engine's kept wordings (renderCache), neither reading nor
// filling them.
func (e *Engine) RenderUncachedForTest(t notifytype.EventType, sev notifytype.Severity, count int, excerpt bool, payload []byte) sinks.Message {
	msg, _ := e.renderRow(store.OutboxRow{EventType: string(t), Severity: string(sev), Count: count, IncludeExcerpt: excerpt, Payload: payload})
	return msg
}

// SetRenderSlotsForTest replaces the engine's kept wordings with n empty
// slots (a power of two): with one, every row's key meets every other's.
// Not while the engine delivers.
func (e *Engine) SetRenderSlotsForTest(n int) { e.renders = newRenderCache(n) }

// RenderOwnForTest words a row of one of the engine's own kinds
// (agent.notify, digest) as delivery does, without an engine: the kind's
// wording of the cleaned content, linked in linkText (Config.Links.Text),
// finished by the engine's rules.
func RenderOwnForTest(c sinks.Content, m sinks.Meta, linkText string) sinks.Message {
	if !m.Severity.Valid() {
		m.Severity = notifytype.SeverityNormal
		for _, k := range OwnEvents() {
			if k.Type == m.EventType {
				m.Severity = k.Severity
			}
		}
	}
	d := ownWording(EventMessage{Type: m.EventType, Severity: m.Severity, Count: m.Count, Content: cleanContent(c)})
	d.LinkText = linkText
	return sinks.Finish(d, m, c.Body)
}

// RenderCoalescedForTest words the message that stands for held rows of
// these counts, for owner, as delivery does.
func (e *Engine) RenderCoalescedForTest(owner notifytype.OwnerScope, counts map[notifytype.EventType]int) sinks.Message {
	var rows []store.OutboxRow
	for t, n := range counts {
		rows = append(rows, store.OutboxRow{EventType: string(t), Count: n})
	}
	return e.renderCoalesced(owner, rows)
}

// SinkStatusesOfForTest exposes sinkStatusesOf, the look-up by sink id
// that SinkStatuses makes.
func (e *Engine) SinkStatusesOfForTest(ids ...int64) []SinkStatus { return e.sinkStatusesOf(ids...) }

// CancelRunForTest does Stop's first step, ending the context every part
// of the running engine works under, and returns without waiting for the
// drain: a test hook that must not block the part it stops (a tracer
// inside the claimer's round trip) stops the engine with it.
func (e *Engine) CancelRunForTest() {
	e.runMu.Lock()
	stop := e.runStop
	e.runMu.Unlock()
	if stop != nil {
		stop()
	}
}

// RunContextForTest is the context every part of the running engine works
// under; nil before Start.
func (e *Engine) RunContextForTest() context.Context {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	return e.runCtx
}

// MayWaitForTest exposes mayWait: whether a row reserved at reservedAt
// with the rows before it may still be sent after them.
func (e *Engine) MayWaitForTest(ctx context.Context, reservedAt time.Time) bool {
	return e.mayWait(ctx, reservedAt)
}

// ReserveGroupForTest reserves rows as the actors' requests of one group
// are, and says what became of each: "began", "held", "busy" (asked again
// in the next group), or the row's error. The engine beats first, as
// ReserveForTest.
func (e *Engine) ReserveGroupForTest(ctx context.Context, rows []store.OutboxRow) ([]string, error) {
	if err := e.beat(ctx); err != nil {
		return nil, err
	}
	qs := make([]*reserveReq, len(rows))
	answers, answered := make([]reserved, len(rows)), make(chan struct{}, len(rows))
	for i, row := range rows {
		qs[i] = &reserveReq{ctx: ctx, row: row, slot: &answers[i], answered: answered}
	}
	busy := e.reserveGroup(ctx, qs)
	out := make([]string, len(rows))
	for i, q := range qs {
		if slices.Contains(busy, q) {
			out[i] = "busy"
			continue
		}
		switch r := answers[i]; {
		case r.err != nil:
			out[i] = r.err.Error()
		case len(r.res.rows) > 0:
			out[i] = "began"
		case r.held:
			out[i] = "held"
		default:
			out[i] = "other: " + r.gone
		}
	}
	return out, nil
}

// FanOutInlineForTest is how many events a claim pass fans out in its own
// round trip (fanOutInline).
const FanOutInlineForTest = fanOutInline

// ServeFanOutForTest runs the fan-out service until ctx ends, as the
// engine's tree does.
func (e *Engine) ServeFanOutForTest(ctx context.Context) error { return e.fanOuter.Serve(ctx) }

// ClaimerWokenForTest reports whether a wake is waiting for the claimer,
// and takes it.
func (e *Engine) ClaimerWokenForTest() bool {
	select {
	case <-e.claimer.wake:
		return true
	default:
		return false
	}
}

// ClaimPassAfterRowsForTest runs one pass of the claimer as Serve's runs
// it when rows fell due, an actor took a row or the fan-out service
// committed rows: not told that events may be waiting.
func (e *Engine) ClaimPassAfterRowsForTest(ctx context.Context) ([]int64, error) {
	rows, _, _, err := e.claimer.pass(ctx, false)
	return rows, err
}
