package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// EmitParams is one event as the outbox statement needs it. The engine
// builds it from an engine.Event.
type EmitParams struct {
	Owner        string
	MatchTypes   []string // subscription event types that match this event
	EventType    string
	Severity     string
	SeverityRank int
	QueueID      int64
	EndpointID   int64
	WebhookID    int64
	DedupKey     *string // nil: the event has no key (its own row)
	Payload      []byte  // JSON content without the body
	PayloadFull  []byte  // JSON content with the body, for opted-in subscriptions
	DueAt        time.Time
	// OnlySinks restricts the statement to these sinks (nil: every match);
	// the engine uses it to finish a windowed emit that raced a concurrent
	// first insert of the same key.
	OnlySinks []int64
	// Notify wakes listening claimers when a row was inserted (delivered
	// at commit).
	Notify bool
}

// EmitResult says what one emit statement did, by sink id.
type EmitResult struct {
	Matched  []int64 // sinks whose subscriptions matched
	Inserted []int64 // sinks that got a new outbox row
	Repeated []int64 // sinks whose open row got a repeat
}

// matchSQL selects the sinks of the event's scope whose subscriptions match
// it, one row per sink; opted-in excerpts win when several subscriptions of
// one sink match. Both the subscription and the sink must be of the event's
// scope (REQ-7).
const matchSQL = `
m AS (
    SELECT s.sink_id, bool_or(s.include_excerpt) AS excerpt
    FROM subscriptions s
    JOIN sinks k ON k.id = s.sink_id
    WHERE s.owner = $1 AND k.owner = $1 AND k.enabled
      AND s.event_types && $2::text[]
      AND s.min_severity_rank <= $3
      AND (cardinality(s.queue_ids) = 0 OR $4 = ANY (s.queue_ids))
      AND (cardinality(s.endpoint_ids) = 0 OR $5 = ANY (s.endpoint_ids))
      AND (cardinality(s.webhook_ids) = 0 OR $6 = ANY (s.webhook_ids))
      AND ($13::bigint[] IS NULL OR s.sink_id = ANY ($13::bigint[]))
    GROUP BY s.sink_id
)`

const insertColumnsSQL = `
    INSERT INTO outbox (sink_id, owner, event_type, severity, dedup_key, payload, include_excerpt, due_at)
    SELECT m.sink_id, $1, $7, $8, $9, CASE WHEN m.excerpt THEN $11::jsonb ELSE $10::jsonb END, m.excerpt, $12
    FROM m ORDER BY m.sink_id
    ON CONFLICT (sink_id, dedup_key) WHERE state IN ('pending', 'held')`

// notifySQL wakes listening claimers (at commit) when the statement
// inserted a row and the engine asked for it ($14).
const notifySQL = `
n AS (
    SELECT pg_notify('switchboard_outbox', '') FROM (SELECT 1 FROM ins LIMIT 1) AS inserted WHERE $14
)`

// emitOccurrenceSQL writes events whose key names one occurrence (a todo's
// n-th dead letter) or that have no key. A repeat of the same occurrence is
// the same dead letter and adds nothing, except that relay.exhausted
// replaces an open todo.dead_lettered row for the same todo (REQ-6).
const emitOccurrenceSQL = `WITH` + matchSQL + `,
ins AS (` + insertColumnsSQL + `
    DO UPDATE SET event_type = excluded.event_type, severity = excluded.severity,
                  payload = excluded.payload, include_excerpt = excluded.include_excerpt
    WHERE outbox.event_type = 'todo.dead_lettered' AND excluded.event_type = 'relay.exhausted'
    RETURNING sink_id
),` + notifySQL + `
SELECT array(SELECT sink_id FROM m), array(SELECT sink_id FROM ins), '{}'::bigint[], (SELECT count(*) FROM n)`

// emitWindowSQL writes events whose key spans a window (a webhook's
// quarantine storm, a rule's subject). The first event opens a row; a
// repeat while the row is open appends to outbox_repeats instead of
// updating the row, so concurrent repeats never wait on one row lock.
//
// The statement sees one snapshot: when a concurrent transaction inserts
// the key's first row after it began, the insert finds the conflict but the
// repeat finds no row, and the sink is in neither list; the engine runs the
// statement again for those sinks.
const emitWindowSQL = `WITH` + matchSQL + `,
ins AS (` + insertColumnsSQL + `
    DO NOTHING
    RETURNING sink_id
),
rep AS (
    INSERT INTO outbox_repeats (outbox_id, sink_id)
    SELECT o.id, o.sink_id
    FROM outbox o JOIN m ON m.sink_id = o.sink_id
    WHERE o.dedup_key = $9 AND o.state IN ('pending', 'held')
      AND NOT EXISTS (SELECT 1 FROM ins WHERE ins.sink_id = o.sink_id)
    RETURNING sink_id
),` + notifySQL + `
SELECT array(SELECT sink_id FROM m), array(SELECT sink_id FROM ins), array(SELECT sink_id FROM rep), (SELECT count(*) FROM n)`

// EmitTx runs one emit statement in tx: one round trip.
func EmitTx(ctx context.Context, tx pgx.Tx, p EmitParams, windowed bool) (EmitResult, error) {
	sql := emitOccurrenceSQL
	if windowed {
		sql = emitWindowSQL
	}
	var only any
	if p.OnlySinks != nil {
		only = p.OnlySinks
	}
	var r EmitResult
	err := tx.QueryRow(ctx, sql,
		p.Owner, p.MatchTypes, p.SeverityRank, p.QueueID, p.EndpointID, p.WebhookID,
		p.EventType, p.Severity, p.DedupKey, p.Payload, p.PayloadFull, p.DueAt, only, p.Notify,
	).Scan(&r.Matched, &r.Inserted, &r.Repeated, nil)
	if err != nil {
		return EmitResult{}, fmt.Errorf("error writing outbox rows: %w", err)
	}
	return r, nil
}
