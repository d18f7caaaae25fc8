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
	// Windowed says that repeats of the key add to the open row's count
	// (quarantine, rule.notify); otherwise the key names one occurrence.
	Windowed bool
	Payload  []byte  // JSON content without the body
	Body     *string // the subject's body, for opted-in subscriptions
	DueAt    time.Time
	// Notify wakes listening claimers (delivered at commit).
	Notify bool
}

// emitSQL writes the event's one row when some subscription of its scope
// matches it (type, minimum severity, filters), and nothing otherwise.
// Both the subscription and its sink must be of the event's scope (REQ-7).
const emitSQL = `
INSERT INTO outbox_events (owner, event_type, match_types, severity, severity_rank, queue_id, endpoint_id,
                           webhook_id, dedup_key, windowed, payload, body, due_at)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13
WHERE EXISTS (
    SELECT 1 FROM subscriptions s JOIN sinks k ON k.id = s.sink_id
    WHERE s.owner = $1 AND k.owner = $1 AND k.enabled
      AND s.event_types && $3::text[]
      AND s.min_severity_rank <= $5
      AND (cardinality(s.queue_ids) = 0 OR $6 = ANY (s.queue_ids))
      AND (cardinality(s.endpoint_ids) = 0 OR $7 = ANY (s.endpoint_ids))
      AND (cardinality(s.webhook_ids) = 0 OR $8 = ANY (s.webhook_ids)))`

// emitNotifySQL is emitSQL that also wakes listening claimers (at commit)
// when it wrote the row.
const emitNotifySQL = `WITH ins AS (` + emitSQL + `
RETURNING 1)
SELECT pg_notify('switchboard_outbox', '') FROM ins`

// EmitTx writes an event in tx: one statement, one round trip.
func EmitTx(ctx context.Context, tx pgx.Tx, p EmitParams) error {
	sql := emitSQL
	if p.Notify {
		sql = emitNotifySQL
	}
	_, err := tx.Exec(ctx, sql,
		p.Owner, p.EventType, p.MatchTypes, p.Severity, p.SeverityRank, p.QueueID, p.EndpointID,
		p.WebhookID, p.DedupKey, p.Windowed, p.Payload, p.Body, p.DueAt)
	if err != nil {
		return fmt.Errorf("error writing outbox event: %w", err)
	}
	return nil
}

// fanOutSQL takes a batch of events (oldest first, SKIP LOCKED so that
// instances take disjoint batches) and writes their outbox rows: one per
// event and matching sink, or, for events with a dedup key, one per key
// and sink, coalesced into the row already open for it (D7):
//   - a windowed key (quarantine, rule.notify) adds its events to count;
//   - an occurrence key (a todo's n-th dead letter) is one dead letter
//     however often it is emitted; relay.exhausted replaces
//     todo.dead_lettered (REQ-6).
//
// The body goes only into the rows of sinks whose subscription opted in
// to excerpts (REQ-9). Subscriptions are matched as they are now.
const fanOutSQL = `
WITH ev AS (
    DELETE FROM outbox_events WHERE id IN (
        SELECT id FROM outbox_events ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
    RETURNING *
), m AS (
    SELECT ev.id AS event_id, s.sink_id, bool_or(s.include_excerpt) AS excerpt
    FROM ev
    JOIN subscriptions s ON s.owner = ev.owner
    JOIN sinks k ON k.id = s.sink_id AND k.owner = ev.owner AND k.enabled
    WHERE s.event_types && ev.match_types
      AND s.min_severity_rank <= ev.severity_rank
      AND (cardinality(s.queue_ids) = 0 OR ev.queue_id = ANY (s.queue_ids))
      AND (cardinality(s.endpoint_ids) = 0 OR ev.endpoint_id = ANY (s.endpoint_ids))
      AND (cardinality(s.webhook_ids) = 0 OR ev.webhook_id = ANY (s.webhook_ids))
    GROUP BY ev.id, s.sink_id
), g AS (
    SELECT m.sink_id,
           coalesce(ev.dedup_key, 'event:' || ev.id) AS grp,
           (array_agg(ev.id ORDER BY ev.event_type = 'relay.exhausted' DESC, ev.id))[1] AS lead_id,
           count(*) AS n,
           bool_or(m.excerpt) AS excerpt,
           min(ev.due_at) AS due_at
    FROM m JOIN ev ON ev.id = m.event_id
    GROUP BY m.sink_id, grp
), ins AS (
INSERT INTO outbox (sink_id, owner, event_type, severity, dedup_key, windowed, count, payload, include_excerpt, due_at)
SELECT g.sink_id, ev.owner, ev.event_type, ev.severity, ev.dedup_key, ev.windowed,
       CASE WHEN ev.windowed THEN g.n ELSE 1 END,
       CASE WHEN g.excerpt AND ev.body IS NOT NULL THEN ev.payload || jsonb_build_object('body', ev.body)
            ELSE ev.payload END,
       g.excerpt, g.due_at
FROM g JOIN ev ON ev.id = g.lead_id
ORDER BY g.sink_id, g.grp
ON CONFLICT (sink_id, dedup_key) WHERE state IN ('pending', 'held') DO UPDATE SET
    count = outbox.count + CASE WHEN outbox.windowed THEN excluded.count ELSE 0 END,
    event_type = CASE WHEN excluded.event_type = 'relay.exhausted' THEN excluded.event_type ELSE outbox.event_type END,
    severity = CASE WHEN excluded.event_type = 'relay.exhausted' THEN excluded.severity ELSE outbox.severity END,
    payload = CASE WHEN excluded.event_type = 'relay.exhausted' AND outbox.event_type <> 'relay.exhausted'
                   THEN excluded.payload ELSE outbox.payload END,
    include_excerpt = outbox.include_excerpt OR excluded.include_excerpt
RETURNING 1
)
SELECT (SELECT count(*) FROM ev), (SELECT count(*) FROM ins)`

// FanOut fans out at most limit events and reports how many it took and
// how many outbox rows it wrote or added to. A batch is one statement: its
// events and their outbox rows commit together.
func FanOut(ctx context.Context, db DBTX, limit int) (events, rows int, err error) {
	if err := db.QueryRow(ctx, fanOutSQL, limit).Scan(&events, &rows); err != nil {
		return 0, 0, fmt.Errorf("error fanning out events: %w", err)
	}
	return events, rows, nil
}
