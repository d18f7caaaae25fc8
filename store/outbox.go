package store

import (
	"context"
	"fmt"
	"strconv"
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
	Body     *string // the excerpt of the subject's body, kept only for opted-in subscriptions
	// DueAt is the emit's instant; zero: the database's clock_timestamp()
	// when the statement runs (a batched emit, which has no round trip of
	// its own to read the clock with).
	DueAt time.Time
	// DueAfter is how long after DueAt the event is due (a quarantine's
	// window); zero: at once.
	DueAfter time.Duration
	// Notify wakes listening claimers (delivered at commit).
	Notify bool
}

// emitMatchSQL decides, in the emitting transaction, which sinks the event
// goes to: the sinks of its scope whose enabled subscriptions match it
// (type, minimum severity, filters), and those of them whose matching
// subscription opted in to an excerpt. Both the subscription and its sink
// must be of the event's scope (REQ-7).
const emitMatchSQL = `
m AS (
    SELECT s.sink_id, s.include_excerpt FROM switchboard.subscriptions s JOIN switchboard.sinks k ON k.id = s.sink_id
    WHERE s.owner = $1 AND k.owner = $1 AND k.enabled
      AND s.event_types && $3::text[]
      AND s.min_severity_rank <= $5
      AND (cardinality(s.queue_ids) = 0 OR $6 = ANY (s.queue_ids))
      AND (cardinality(s.endpoint_ids) = 0 OR $7 = ANY (s.endpoint_ids))
      AND (cardinality(s.webhook_ids) = 0 OR $8 = ANY (s.webhook_ids))
), sets AS (
    SELECT array_agg(DISTINCT sink_id) AS sink_ids,
           coalesce(array_agg(DISTINCT sink_id) FILTER (WHERE include_excerpt), '{}') AS excerpt_ids
    FROM m
)`

// emitInsertSQL writes the event's one row, with the sinks it matched,
// when it matched any, and nothing otherwise. The excerpt is kept only
// when some matching subscription opted in to it (REQ-9).
const emitInsertSQL = `
INSERT INTO switchboard.outbox_events (owner, event_type, match_types, severity, severity_rank, queue_id, endpoint_id,
                           webhook_id, dedup_key, windowed, payload, body, due_at, sink_ids, excerpt_sink_ids)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,
       CASE WHEN cardinality(sets.excerpt_ids) > 0 THEN $12::text END,
       coalesce($13::timestamptz, clock_timestamp()) + $14::bigint * interval '1 microsecond',
       sets.sink_ids, sets.excerpt_ids
FROM sets WHERE sets.sink_ids IS NOT NULL`

const emitSQL = `WITH` + emitMatchSQL + emitInsertSQL

// emitNotifySQL is emitSQL that also wakes listening claimers (at commit)
// when it wrote the row.
const emitNotifySQL = `WITH` + emitMatchSQL + `, ins AS (` + emitInsertSQL + `
RETURNING 1)
SELECT pg_notify('switchboard_outbox', '') FROM ins`

// emitStatement is the one statement that writes p, and its arguments.
func emitStatement(p EmitParams) (string, []any) {
	sql := emitSQL
	if p.Notify {
		sql = emitNotifySQL
	}
	var dueAt *time.Time
	if !p.DueAt.IsZero() {
		dueAt = &p.DueAt
	}
	return sql, []any{p.Owner, p.EventType, p.MatchTypes, p.Severity, p.SeverityRank, p.QueueID, p.EndpointID,
		p.WebhookID, p.DedupKey, p.Windowed, p.Payload, p.Body, dueAt, p.DueAfter.Microseconds()}
}

// EmitTx writes an event in tx: one statement, one round trip.
func EmitTx(ctx context.Context, tx pgx.Tx, p EmitParams) error {
	sql, args := emitStatement(p)
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("error writing outbox event: %w", err)
	}
	return nil
}

// QueueEmit queues the statement of EmitTx into b: exactly one queued
// statement, which writes the event when b runs, in the transaction b is
// sent in. Its error, if any, comes back from b's results, wrapped as
// EmitTx wraps it.
func QueueEmit(b *pgx.Batch, p EmitParams) {
	sql, args := emitStatement(p)
	b.Queue(sql, args...).Fn = func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("error writing outbox event: %w", err)
		}
		return nil
	}
}

// Replacements say which event types replace which: an event of By[i]
// takes over the open outbox row of its dedup key whose type is Of[i], so
// a sink hears of the occurrence once, as By[i] (its type, severity and
// payload), whichever of the two reached it first; and it is the one
// repeat that still opens a row beside a claimed Of[i] row of its key,
// which takes it in if that attempt fails. The two types must share
// their key space for their keys to meet. The engine builds them from its
// declarations (engine.EventKind.Replaces).
type Replacements struct {
	By, Of []string
}

// args returns the two arrays, never nil (a NULL array matches nothing,
// but says so less plainly).
func (r Replacements) args() (by, of []string) {
	if r.By == nil || r.Of == nil {
		return []string{}, []string{}
	}
	return r.By, r.Of
}

// replacesSQL is the condition that an event of type byType replaces a
// row of type ofType, the pairs being the text arrays byParam and ofParam
// (Replacements.args).
func replacesSQL(byType, ofType, byParam, ofParam string) string {
	return `EXISTS (SELECT 1 FROM unnest(` + byParam + `::text[], ` + ofParam + `::text[]) AS rp(by_type, of_type)
	                WHERE rp.by_type = ` + byType + ` AND rp.of_type = ` + ofType + `)`
}

// fanOutSQL takes a batch of events (oldest first, SKIP LOCKED so that
// instances take disjoint batches) and writes their outbox rows: one per
// event and matching sink, or, for events with a dedup key, one per key
// and sink, coalesced into the row already open for it (D7):
//   - a windowed key (quarantine, rule.notify) adds its events to count;
//   - an occurrence key (a todo's n-th dead letter) is one dead letter
//     however often it is emitted; an event of a type that replaces
//     another ($3 and $4, Replacements: the reference host's
//     relay.exhausted replaces todo.dead_lettered, REQ-6) takes over the
//     open row of that type for its key, its type, severity and payload
//     winning. Its window is the occurrence itself: a repeat of a key
//     whose row is being sent (claimed) or was delivered (delivered,
//     partial) to the sink writes nothing (it would send the same
//     occurrence twice), for as long as the finished row is kept (the
//     janitor's retention); only a replacing event still opens a row
//     beside a claimed row of the type it replaces, which takes it in if
//     the attempt fails (absorbRepeats). A row that ended undeliverable
//     does not hold its key: a repeat is sent.
//
// An event's sinks are joined as "k.id = ANY (sink_ids)", a filter on
// the event's owner's sinks: joined to unnest(sink_ids), the planner
// paired every event with every sink of its owner and then with each
// element of the array (50,000 rows for 5,000, 6.3 ms against 1.1 for a
// batch at 10 sinks; with 10,000 sinks it read all of them, 3.2 ms against
// 2.5).
//
// Within one batch, the events of a sink and key make one row, with the
// content of their first event of a replacing type, or else of their
// first event ("lead_id": a filtered minimum, where an ordered array_agg
// sorted each group on its own, about 1 µs a row of BenchmarkFanOut).
//
// Each event goes to exactly the sinks it matched when it was emitted
// (sink_ids, REQ-10); a sink deleted since gets a delivery record
// (undeliverable, class config) instead of a row, so every event that
// matched at commit ends in a delivery record. An event written before
// migration 0006 has no sink set and is matched as subscriptions are now.
// The excerpt goes only into the rows of sinks whose subscription opted in
// (REQ-9).
//
// One fan-out runs at a time across instances: a statement that finds the
// fan-out lock (LockFamilyFanOut) taken takes no event, and its instance
// goes on to claim. Two fan-outs at once insert into the same last pages
// of the outbox's indexes and wait on each other there: with three
// instances starting on one backlog, each of two 5,000-row fan-outs took
// 610 ms instead of 150, and the database spent 390 µs of CPU a delivery
// instead of 220 (docs/BENCHMARKS.md, session 11). An event is never
// skipped for good: it stays in outbox_events until a fan-out takes it,
// and the instance holding the lock was woken by the same NOTIFY, so it
// claims again once its fan-out commits (and every claimer polls).
var fanOutSQL = `
WITH ev AS (
    DELETE FROM switchboard.outbox_events WHERE id IN (
        SELECT id FROM switchboard.outbox_events
        WHERE (SELECT pg_try_advisory_xact_lock(` + strconv.Itoa(int(LockFamilyFanOut)) + `, 0))
        ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
    RETURNING *
), m AS (
    SELECT ev.id AS event_id, k.id AS sink_id, k.id = ANY (ev.excerpt_sink_ids) AS excerpt
    FROM ev JOIN switchboard.sinks k ON k.id = ANY (ev.sink_ids) AND k.owner = ev.owner
    UNION ALL
    SELECT ev.id, s.sink_id, bool_or(s.include_excerpt)
    FROM ev
    JOIN switchboard.subscriptions s ON s.owner = ev.owner
    JOIN switchboard.sinks k ON k.id = s.sink_id AND k.owner = ev.owner AND k.enabled
    WHERE cardinality(ev.sink_ids) = 0
      AND s.event_types && ev.match_types
      AND s.min_severity_rank <= ev.severity_rank
      AND (cardinality(s.queue_ids) = 0 OR ev.queue_id = ANY (s.queue_ids))
      AND (cardinality(s.endpoint_ids) = 0 OR ev.endpoint_id = ANY (s.endpoint_ids))
      AND (cardinality(s.webhook_ids) = 0 OR ev.webhook_id = ANY (s.webhook_ids))
    GROUP BY ev.id, s.sink_id
), gone AS (
    INSERT INTO switchboard.delivery_records (sink_id, owner, event_type, attempt, counts_budget, status, class, sent_at, finished_at)
    SELECT sid, ev.owner, ev.event_type, 1, false, 'undeliverable', 'config', $2, $2
    FROM ev CROSS JOIN LATERAL unnest(ev.sink_ids) AS sid
    WHERE NOT EXISTS (SELECT 1 FROM switchboard.sinks k WHERE k.id = sid AND k.owner = ev.owner)
    RETURNING 1
), g AS (
    SELECT m.sink_id,
           coalesce(ev.dedup_key, 'event:' || ev.id) AS grp,
           coalesce(min(ev.id) FILTER (WHERE ev.event_type = ANY ($3::text[])), min(ev.id)) AS lead_id,
           min(ev.id) AS first_id,
           count(*) AS n,
           bool_or(m.excerpt) AS excerpt,
           min(ev.due_at) AS due_at
    FROM m JOIN ev ON ev.id = m.event_id
    GROUP BY m.sink_id, grp
), ins AS (
INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, dedup_key, windowed, count, payload, include_excerpt, due_at)
SELECT g.sink_id, ev.owner, ev.event_type, ev.severity, ev.dedup_key, ev.windowed,
       CASE WHEN ev.windowed THEN g.n ELSE 1 END,
       CASE WHEN g.excerpt AND ev.body IS NOT NULL THEN ev.payload || jsonb_build_object('body', ev.body)
            ELSE ev.payload END,
       g.excerpt, g.due_at
FROM g JOIN ev ON ev.id = g.lead_id
WHERE ev.dedup_key IS NULL OR NOT EXISTS (
    SELECT 1 FROM switchboard.outbox x
    WHERE x.sink_id = g.sink_id AND x.dedup_key = ev.dedup_key AND NOT x.windowed
      AND x.state IN ('claimed', 'delivered', 'partial') -- outbox_occurrence_key's predicate, spelled out for the planner
      AND (x.state IN ('delivered', 'partial')
           OR (x.state = 'claimed' AND NOT ` + replacesSQL("ev.event_type", "x.event_type", "$3", "$4") + `)))
ORDER BY g.sink_id, g.first_id
ON CONFLICT (sink_id, dedup_key) WHERE state IN ('pending', 'held') AND dedup_key IS NOT NULL DO UPDATE SET
    count = outbox.count + CASE WHEN outbox.windowed THEN excluded.count ELSE 0 END,
    event_type = CASE WHEN ` + replacesSQL("excluded.event_type", "outbox.event_type", "$3", "$4") + `
                      THEN excluded.event_type ELSE outbox.event_type END,
    severity = CASE WHEN excluded.event_type = ANY ($3::text[]) THEN excluded.severity ELSE outbox.severity END,
    payload = CASE WHEN ` + replacesSQL("excluded.event_type", "outbox.event_type", "$3", "$4") + `
                   THEN excluded.payload ELSE outbox.payload END,
    include_excerpt = outbox.include_excerpt OR excluded.include_excerpt
RETURNING 1
)
SELECT (SELECT count(*) FROM ev), (SELECT count(*) FROM ins), (SELECT count(*) FROM gone)`

// FanOutResult is what one fan-out batch did.
type FanOutResult struct {
	// Events is how many events it took.
	Events int
	// Rows is how many outbox rows it wrote or added to.
	Rows int
	// Gone is how many delivery records it wrote for sinks deleted since
	// their event was emitted.
	Gone int
}

// FanOut fans out at most limit events at now, rep saying which event
// types replace which. A batch is one statement: its events, their outbox
// rows and records commit together.
func FanOut(ctx context.Context, db BatchSender, limit int, now time.Time, rep Replacements) (FanOutResult, error) {
	var r FanOutResult
	b := &pgx.Batch{}
	queueFanOut(b, limit, now, rep, &r)
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return FanOutResult{}, fmt.Errorf("error fanning out events: %w", err)
	}
	return r, nil
}

// queueFanOut queues fanOutSQL into b between fanOutPlan and
// fanOutPlanDone; r gets its counts.
func queueFanOut(b *pgx.Batch, limit int, now time.Time, rep Replacements, r *FanOutResult) {
	by, of := rep.args()
	b.Queue(fanOutPlan)
	b.Queue(fanOutSQL, limit, now, by, of).QueryRow(func(row pgx.Row) error {
		return row.Scan(&r.Events, &r.Rows, &r.Gone)
	})
	b.Queue(fanOutPlanDone)
}

// fanOutPlan and fanOutPlanDone bracket fanOutSQL (in its transaction,
// explicit or a batch's implicit one): no sequential scan while it runs.
// For each row it writes, the fan-out looks up the finished and claimed
// rows of the row's occurrence key (outbox_occurrence_key). A storm fills
// the outbox from nothing in seconds; a plan made while the outbox was
// empty (a connection's cached generic plan, or statistics from before
// the storm) reads the whole outbox for each row instead: measured, 1.3
// million buffer reads and 1.4 s for one fan-out of 5,000 rows, where the
// lookups take 20,000 reads and 30 ms. Ruling the scan out keeps the
// lookups whatever the statistics say
// (TestTheFanOutLooksUpOccurrenceKeysByIndex). fanOutPlan also has the
// rest of the transaction run on generic plans (genericPlans), which
// fanOutPlanDone leaves as it is: a claim follows in the same batch.
//
// The setting's value before is kept in a setting of the transaction's
// own (switchboard.seqscan_before, set first: the subquery holds a
// volatile function, so it is not pulled up) and put back from there.
// Reading it back from pg_settings' reset_val cost 1.3 ms of the
// server's CPU on every claim cycle (pg_settings builds a row for every
// setting), more than the rest of the cycle's statements together
// (pg_stat_statements over faults row 6d, session 7); and reset_val is
// not the value before when the session had set its own.
const (
	fanOutPlan     = `SELECT set_config('enable_seqscan', 'off', true), ` + genericPlans + ` FROM (SELECT set_config('switchboard.seqscan_before', current_setting('enable_seqscan'), true)) AS before`
	fanOutPlanDone = `SELECT set_config('enable_seqscan', current_setting('switchboard.seqscan_before'), true)`
)
