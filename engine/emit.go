package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// emitRaceRetries bounds how often Emit re-runs its statement for sinks
// whose first row of a key was being inserted concurrently. One re-run
// suffices under READ COMMITTED; the bound only guards against a caller's
// REPEATABLE READ transaction, where PostgreSQL reports the conflict as a
// serialization failure instead.
const emitRaceRetries = 3

// Emit writes, in the caller's transaction tx, one outbox row for each sink
// of ev.Owner whose subscriptions match ev (type, filters, minimum
// severity). Nothing matches, nothing is written. The rows exist exactly
// when tx commits (REQ-10).
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
//
// Emit costs one round trip in the common case.
func (e *Engine) Emit(ctx context.Context, tx pgx.Tx, ev Event) error {
	p, windowed, err := e.emitParams(ev)
	if err != nil {
		return err
	}
	p.Notify = !p.DueAt.After(e.cfg.Clock.Now()) && e.mayNotify()
	for range emitRaceRetries {
		r, err := store.EmitTx(ctx, tx, p, windowed)
		if err != nil {
			return fmt.Errorf("error emitting %s: %w", ev.Type, err)
		}
		if !windowed {
			// ON CONFLICT DO UPDATE waits out a concurrent insert of the
			// same occurrence, and the same dead letter is already there.
			return nil
		}
		missing := slices.DeleteFunc(r.Matched, func(id int64) bool {
			return slices.Contains(r.Inserted, id) || slices.Contains(r.Repeated, id)
		})
		if len(missing) == 0 {
			return nil
		}
		p.OnlySinks = missing
	}
	return fmt.Errorf("error emitting %s: dedup key %q kept racing for %d sinks", ev.Type, *p.DedupKey, len(p.OnlySinks))
}

func (e *Engine) emitParams(ev Event) (p store.EmitParams, windowed bool, err error) {
	if !ev.Type.Valid() {
		return p, false, notifytype.InvalidArgumentf("type", "unknown event type %q", ev.Type)
	}
	if !ev.Owner.Valid() {
		return p, false, notifytype.InvalidArgument("owner", "an event needs exactly one owner scope")
	}
	sev := ev.Severity
	if sev == "" {
		sev = ev.Type.DefaultSeverity()
	}
	if !sev.Valid() {
		return p, false, notifytype.InvalidArgumentf("severity", "%q is not low, normal or high", sev)
	}

	now := e.cfg.Clock.Now()
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
			return p, false, notifytype.InvalidArgument("todo_id", "a dead-letter event needs the todo id and its dead-letter count")
		}
		key = "todo:" + strconv.FormatInt(ev.TodoID, 10) + ":" + strconv.Itoa(ev.DeadLetterCount)
		if ev.Type == notifytype.EventRelayExhausted {
			p.MatchTypes = append(p.MatchTypes, string(notifytype.EventTodoDeadLettered))
		}
	case notifytype.EventDeliveryQuarantined:
		if ev.WebhookID <= 0 {
			return p, false, notifytype.InvalidArgument("webhook_id", "a quarantine event needs its webhook")
		}
		key = "webhook:" + strconv.FormatInt(ev.WebhookID, 10)
		p.DueAt = now.Add(QuarantineWindowDefault)
		windowed = true
	case notifytype.EventRuleNotify:
		switch {
		case ev.RuleID > 0 && ev.SubjectKey != "":
			key = "rule:" + strconv.FormatInt(ev.RuleID, 10) + ":" + ev.SubjectKey
		case ev.RuleID > 0 && ev.EventID > 0:
			key = "rule:" + strconv.FormatInt(ev.RuleID, 10) + ":event:" + strconv.FormatInt(ev.EventID, 10)
		default:
			return p, false, notifytype.InvalidArgument("rule_id", "a rule.notify event needs its rule and a subject key or event id")
		}
		windowed = true
	}
	if key != "" {
		p.DedupKey = &key
	}

	ev.Content = withoutNUL(ev.Content)
	lean := ev.Content
	lean.Body = ""
	if p.Payload, err = json.Marshal(lean); err != nil {
		return p, false, fmt.Errorf("error encoding event content: %w", err)
	}
	p.PayloadFull = p.Payload
	if ev.Content.Body != "" {
		if p.PayloadFull, err = json.Marshal(ev.Content); err != nil {
			return p, false, fmt.Errorf("error encoding event content: %w", err)
		}
	}
	return p, windowed, nil
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

func withoutNUL(c sinks.Content) sinks.Content {
	for _, f := range []*string{&c.Title, &c.Place, &c.Summary, &c.Cause, &c.LinkPath, &c.OriginDisplay, &c.OriginPermalink, &c.AttemptSummary, &c.ArtifactHandle, &c.Body} {
		*f = strings.ReplaceAll(*f, "\x00", "")
	}
	return c
}
