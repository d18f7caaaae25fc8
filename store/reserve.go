package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file holds the statements of a group reservation and a group
// record: the delivery engine reserves the budgets of many sinks in one
// transaction, and records the outcomes of many attempts in another, so
// that a delivery pays for a share of two commits rather than two commits
// of its own.

// LockedSink is a sink locked for a group reservation, with its budget
// state: the theoretical arrival time recorded by its latest counted
// delivery record (zero when none).
type LockedSink struct {
	SinkForDelivery
	TAT time.Time
}

// Locked is what QueueLockForDelivery read once its batch has run.
type Locked struct {
	// Sinks are the sinks locked, by id.
	Sinks map[int64]LockedSink
	// Busy are the sinks another transaction held: neither locked nor
	// read. A sink neither locked nor busy was deleted.
	Busy map[int64]bool
}

// QueueBeginOnHeldRows queues, into b, the start of a transaction that
// changes rows this instance holds: BEGIN, then heldRowsPlan. A group
// reservation and a group record begin so.
func QueueBeginOnHeldRows(b *pgx.Batch) {
	b.Queue(`BEGIN`)
	b.Queue(heldRowsPlan)
}

// QueueLockForDelivery queues, into b (which must run in a transaction of
// READ COMMITTED, the default), the statements that open a group
// reservation, filling l as they run:
//
//   - the sinks' rows are locked, those another transaction holds (another
//     instance's reservation, a coalesced message, an edit, a delete)
//     skipped rather than waited for. FOR NO KEY UPDATE excludes every
//     other reservation and any change of the sink, but not the key-share
//     locks that writing an outbox row for the sink takes;
//   - their budgets are read from the delivery records by a statement of
//     its own, after the locks: a statement that waited for a lock still
//     reads with the snapshot it began with, which would miss the records
//     of a reservation that committed meanwhile. The same statement tells
//     a skipped sink (it still exists) from a deleted one.
//
// The rows are not locked: the statements that change them check that
// this instance still holds them.
func QueueLockForDelivery(b *pgx.Batch, sinkIDs []int64, l *Locked) {
	l.Sinks = make(map[int64]LockedSink, len(sinkIDs))
	l.Busy = map[int64]bool{}
	b.Queue(`
		SELECT k.id, k.owner, k.kind, k.enabled, k.options, k.budget_per_hour, k.budget_burst,
		       c.id, c.owner, c.kind, c.account_key, c.secret
		FROM switchboard.sinks k JOIN switchboard.connections c ON c.id = k.connection_id
		WHERE k.id = ANY ($1)
		ORDER BY k.id
		FOR NO KEY UPDATE OF k SKIP LOCKED`, nonNilIDs(sinkIDs)).Query(func(rows pgx.Rows) error {
		var s LockedSink
		_, err := pgx.ForEachRow(rows, []any{&s.ID, &s.Owner, &s.Kind, &s.Enabled, &s.Options, &s.PerHour, &s.Burst,
			&s.ConnectionID, &s.ConnectionOwner, &s.ConnectionKind, &s.BaseURL, &s.SealedSecret}, func() error {
			l.Sinks[s.ID] = s
			return nil
		})
		if err != nil {
			return fmt.Errorf("error locking sinks for delivery: %w", err)
		}
		return nil
	})
	b.Queue(`
		SELECT s, EXISTS (SELECT 1 FROM switchboard.sinks WHERE id = s),
		       (SELECT max(d.budget_tat) FROM switchboard.delivery_records d WHERE d.sink_id = s AND d.counts_budget)
		FROM unnest($1::bigint[]) AS s`, nonNilIDs(sinkIDs)).Query(func(rows pgx.Rows) error {
		var (
			id     int64
			exists bool
			tat    *time.Time
		)
		_, err := pgx.ForEachRow(rows, []any{&id, &exists, &tat}, func() error {
			s, ok := l.Sinks[id]
			switch {
			case !ok && exists:
				l.Busy[id] = true
			case ok && tat != nil:
				s.TAT = *tat
				l.Sinks[id] = s
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("error reading sink budgets: %w", err)
		}
		return nil
	})
}

// Hold parks a claimed row until its sink's next token.
type Hold struct {
	Row    Claimed
	SinkID int64
	Until  time.Time
}

// QueueHoldRows queues, into b, the statements that park claimed rows
// until their sinks' next tokens (D9) and move every held row of those
// sinks to the same time (a row whose own retry falls due later keeps
// its time); held gets how many rows each sink holds now.
func QueueHoldRows(b *pgx.Batch, holds []Hold, instance string, held map[int64]int, rep Replacements) {
	ids := make([]int64, len(holds))
	tokens := make([]int64, len(holds))
	sinkIDs := make([]int64, len(holds))
	until := make([]time.Time, len(holds))
	for i, h := range holds {
		ids[i], tokens[i], sinkIDs[i], until[i] = h.Row.ID, h.Row.Token, h.SinkID, h.Until
	}
	by, of := rep.args()
	b.Queue(holdRowsSQL, ids, until, instance, tokens, by, of)
	b.Queue(`
		WITH s AS (
		    SELECT DISTINCT ON (sink_id) sink_id, until
		    FROM unnest($1::bigint[], $2::timestamptz[]) AS u(sink_id, until)
		    ORDER BY sink_id, until DESC
		)
		UPDATE switchboard.outbox o SET due_at = greatest(o.due_at, s.until) FROM s
		WHERE o.sink_id = s.sink_id AND o.state = 'held'
		RETURNING o.sink_id`, sinkIDs, until).Query(func(rows pgx.Rows) error {
		var id int64
		if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { held[id]++; return nil }); err != nil {
			return fmt.Errorf("error rescheduling held rows: %w", err)
		}
		return nil
	})
}

// holdRowsSQL parks claimed rows: $1 their ids, $2 their due times, $3
// the instance holding them, $4 their claims' tokens, $5 and $6 the
// Replacements. A row taking in the open row a repeat of its key opened
// meanwhile: absorbRepeats.
var holdRowsSQL = `
		WITH ` + heldRowsByTID(`unnest($1::bigint[], $4::bigint[], $2::timestamptz[]) AS u(id, token, until)`) + `,
		mine AS (
		    SELECT o.id, o.sink_id, o.dedup_key, 'held' AS state FROM u JOIN switchboard.outbox o ON o.ctid = u.tid
		    WHERE o.claimed_by = $3 AND o.claim_token = u.token
		), ` + absorbRepeats("mine", "$5") + `
		UPDATE switchboard.outbox SET state = 'held', due_at = u.until, claimed_by = NULL, claim_expires_at = NULL,
		       claim_token = NULL, ` + absorbedSet("$5", "$6") + `, payload = ` + absorbedPayload("$5", "$6") + `
		FROM u LEFT JOIN extra ON extra.keep = u.id
		WHERE outbox.ctid = u.tid AND outbox.claimed_by = $3 AND outbox.claim_token = u.token`

// Start is a row whose attempt begins: a token of its sink is reserved,
// and the sink's budget state after it is TAT.
type Start struct {
	Row Claimed
	TAT time.Time
}

// StartedRow is a row whose attempt began: its payload (a claim leaves it
// out, claimedRowColumns), the attempt's number and the time of the row's
// first attempt (this one's, when it had none), and the id of the
// attempt's delivery record. The rest of the row is as its holder claimed
// it: nothing but its holder changes a row while its claim token stands,
// and the start changes nothing else, so it is not read back.
type StartedRow struct {
	ID             int64
	Payload        []byte
	Attempts       int
	FirstAttemptAt *time.Time
	RecordID       int64
}

// QueueStartAttempts queues, into b, the statement that begins an attempt
// on each row this instance holds: it writes the attempt's delivery
// record (status "sending", its attempt the row's attempts and one,
// counted against the budget, carrying the sink's budget state), and
// nothing to the row but a lock, unless its claim is short (below). Rows
// their claims no longer hold, and rows that had maxAttempts attempts
// already, are left alone and absent from *started. An attempt on a row
// that was abandoned (begun under an earlier claim, its outcome never
// written) was closed and counted by the claim that took the row over
// (claimDueSQL). Nothing starts unless instance's heartbeat lets it
// dispatch at the database's clock (DispatchFence; at fenceAt when not
// zero, a test's fake clock).
//
// The attempt is counted on the row when its outcome is written
// (finishRowsSQL, from the record), not here: a drain writes each row
// three times (fan-out, claim, outcome) rather than four, a tenth less
// WAL a delivery (docs/BENCHMARKS.md, session 13). Until
// then the record is the attempt's count: an attempt whose outcome was
// never written (its instance died mid-send) is counted when the row is
// taken over (takenOverCount), and a give-back deletes the record, with
// nothing on the row to undo.
//
// The row is locked (FOR NO KEY UPDATE) while its record is written: a
// claim taking rows over (claimDueSQL's chosen) skips it, and a statement
// that changed it meanwhile (a takeover committed first) leaves it out,
// its new version found by a tid other than the one looked up. A claim
// shorter than three quarters of ttl is extended to ttl from now (a row
// that waited in its actor's mailbox behind a slow sink): every attempt
// starts with at least that much of its claim left, so that the send
// (at most half a claim, mayWait) and the outcome's write end before any
// other instance may take the row. A start right after its claim, as in
// a drain, writes nothing to the row.
func QueueStartAttempts(b *pgx.Batch, starts []Start, instance string, now time.Time, ttl time.Duration, maxAttempts int, started *[]StartedRow, fenceAt time.Time) {
	ids := make([]int64, len(starts))
	tokens := make([]int64, len(starts))
	tats := make([]time.Time, len(starts))
	for i, s := range starts {
		ids[i], tokens[i], tats[i] = s.Row.ID, s.Row.Token, s.TAT
	}
	b.Queue(startAttemptsSQL, ids, tats, instance, now, ttl, tokens, maxAttempts, nullTime(fenceAt)).Query(func(rows pgx.Rows) error {
		out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StartedRow, error) {
			var r StartedRow
			err := row.Scan(&r.ID, &r.Payload, &r.Attempts, &r.FirstAttemptAt, &r.RecordID)
			return r, err
		})
		if err != nil {
			return fmt.Errorf("error starting attempts: %w", err)
		}
		*started = out
		return nil
	})
}

// startAttemptsSQL is QueueStartAttempts' statement.
var startAttemptsSQL = `
		WITH ` + heldRowsByTID(`unnest($1::bigint[], $6::bigint[], $2::timestamptz[]) AS u(id, token, tat)`) + `, started AS (
		    SELECT o.id, o.sink_id, o.owner, o.event_type, o.payload, o.attempts + 1 AS attempt,
		           coalesce(o.first_attempt_at, $4) AS first_attempt_at, o.claim_expires_at, u.tid, u.tat,
		           nextval('switchboard.delivery_records_id_seq') AS rec
		    FROM u JOIN switchboard.outbox o ON o.ctid = u.tid
		    WHERE o.claimed_by = $3 AND o.claim_token = u.token AND o.attempts < $7
		      AND ` + DispatchFence("$3", "$8") + `
		    FOR NO KEY UPDATE OF o
		), extended AS (
		    UPDATE switchboard.outbox o SET claim_expires_at = $4::timestamptz + $5::interval
		    FROM started s WHERE o.ctid = s.tid AND s.claim_expires_at < $4::timestamptz + $5::interval * 3 / 4
		), rec AS (
		    INSERT INTO switchboard.delivery_records (id, sink_id, owner, outbox_id, event_type, attempt, counts_budget,
		                                  coalesced_rows, status, sent_at, budget_tat)
		    OVERRIDING SYSTEM VALUE
		    SELECT rec, sink_id, owner, id, event_type, attempt, true, 1, 'sending', $4, tat
		    FROM started
		)
		SELECT id, payload, attempt, first_attempt_at, rec FROM started ORDER BY id`

// BatchSender sends a pgx.Batch: a pool, a connection or a transaction.
type BatchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Finished is how one attempt ended: its delivery record's end and what
// its rows become.
type Finished struct {
	RecordID   int64
	Rows       []Claimed
	Status     string // of the record: delivered, failed, partial, undeliverable
	Class      string
	HTTPStatus int
	Outcome    RowOutcome
	// Outcomes, when not nil, is each row's own outcome (one per entry of
	// Rows, in its order), in place of Outcome: the rows of a coalesced
	// message each keep their own attempt count and retry schedule.
	Outcomes []RowOutcome
	At       time.Time
}

// addTo adds f's rows with their outcomes to r.
func (f Finished) addTo(r *rowOutcomes) {
	if f.Outcomes == nil {
		r.add(f.Rows, f.RecordID, f.Outcome, f.At)
		return
	}
	for i, row := range f.Rows {
		r.add([]Claimed{row}, f.RecordID, f.Outcomes[i], f.At)
	}
}

// RecordFinished records the ends of many attempts at once: their delivery
// records and their rows (see FinishRows: only rows this instance still
// holds change), in one statement (recordFinishedSQL), one transaction and
// one round trip. db must not be in a transaction; a pool or a connection
// of one releases a connection whose batch failed mid-transaction rather
// than reuse it.
func RecordFinished(ctx context.Context, db interface {
	BatchSender
	DBTX
}, fs []Finished, instance string, rep Replacements) error {
	var (
		recIDs   = make([]int64, len(fs))
		statuses = make([]string, len(fs))
		classes  = make([]string, len(fs))
		https    = make([]int32, len(fs))
		ats      = make([]time.Time, len(fs))
		rows     rowOutcomes
	)
	for i, f := range fs {
		recIDs[i], statuses[i], classes[i], https[i], ats[i] = f.RecordID, f.Status, f.Class, int32(f.HTTPStatus), f.At
		f.addTo(&rows)
	}
	var done []int64
	b := &pgx.Batch{}
	QueueBeginOnHeldRows(b)
	b.Queue(recordFinishedSQL, append(rows.args(instance, rep), recIDs, statuses, classes, https, ats)...).Query(func(rs pgx.Rows) error {
		var err error
		done, err = collectIDs(rs, nil)
		return err
	})
	b.Queue(`COMMIT`)
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("error recording %d attempts: %w", len(fs), err)
	}
	// Rows another transaction changed meanwhile, or that another instance
	// took: rare, and written on their own.
	if err := finishRowsAgain(ctx, db, rows, done, instance, rep); err != nil {
		return fmt.Errorf("error recording the rows of %d attempts: %w", len(fs), err)
	}
	return nil
}

// Unsent names a row whose attempt began (QueueStartAttempts) under the
// claim Row and the delivery record RecordID, and was never sent.
type Unsent struct {
	Row      Claimed
	RecordID int64
}

// GiveBackUnsent undoes the attempts of rows this instance started and did
// not send (its actor reserved them with the rows before them and stopped,
// or ran out of claim time, before their turn): each row is pending again,
// due as it was and unclaimed, and its "sending" record deleted, which
// gives the token back to the sink's budget (BudgetTAT reads the records)
// and uncounts the attempt (the start counted it nowhere else). Only a row
// still held under its claim and still in that attempt (RecordID, its
// "sending" record) changes; a repeat of its key that opened a row
// meanwhile is taken in (absorbRepeats). It returns how many rows it gave
// back; a row it leaves keeps its "sending" record, and is closed as
// abandoned when it is taken again (D25): counted, never sent twice. Rows
// of one key go back one at a time, as ReleaseRows's do.
func GiveBackUnsent(ctx context.Context, db DBTX, rows []Unsent, instance string, rep Replacements) (int, error) {
	ids, tokens, recs := make([]int64, len(rows)), make([]int64, len(rows)), make([]int64, len(rows))
	for i, r := range rows {
		ids[i], tokens[i], recs[i] = r.Row.ID, r.Row.Token, r.RecordID
	}
	by, of := rep.args()
	n := 0
	for try := 0; try < 2 && n < len(rows); try++ {
		// A row changed while the statement ran is left out by its tid
		// (heldRowsByTID); the second statement, with a snapshot of its
		// own, gives back those still held, as ReleaseRows does.
		tag, err := db.Exec(ctx, giveBackUnsentSQL, ids, tokens, instance, by, of, recs)
		if len(rows) > 1 && isUniqueViolation(err, "outbox_open_key") {
			// Two of rows have one key (as ReleaseRows).
			k, err := oneAtATime(ctx, db, rows, instance, rep, GiveBackUnsent)
			return n + k, err
		}
		if err != nil {
			return n, fmt.Errorf("error giving back unsent rows %v: %w", ids, err)
		}
		n += int(tag.RowsAffected())
	}
	return n, nil
}

var giveBackUnsentSQL = `
		WITH ` + heldRowsByTID(`unnest($1::bigint[], $2::bigint[], $6::bigint[]) AS u(id, token, rec)`) + `,
		mine AS (
		    SELECT o.id, o.sink_id, o.dedup_key, 'pending' AS state FROM u JOIN switchboard.outbox o ON o.ctid = u.tid
		    WHERE o.claimed_by = $3 AND o.claim_token = u.token AND ` + inAttempt("o.id", "u.rec") + `
		), ` + absorbRepeats("mine", "$4") + `, unsent AS (
		    DELETE FROM switchboard.delivery_records d USING u JOIN mine ON mine.id = u.id
		    WHERE d.id = u.rec AND d.outbox_id = u.id AND d.status = 'sending'
		)
		UPDATE switchboard.outbox SET state = 'pending', claimed_by = NULL, claim_expires_at = NULL, claim_token = NULL,
		       ` + absorbedSet("$4", "$5") + `, payload = ` + absorbedPayload("$4", "$5") + `
		FROM u LEFT JOIN extra ON extra.keep = u.id
		WHERE outbox.ctid = u.tid AND outbox.claimed_by = $3 AND outbox.claim_token = u.token AND ` + inAttempt("outbox.id", "u.rec") + ``

// inAttempt is the condition that the row whose id is row is in the
// attempt whose record is rec: the record, written by the attempt's start
// (startAttemptsSQL) for this row alone, is still "sending".
func inAttempt(row, rec string) string {
	return `EXISTS (SELECT 1 FROM switchboard.delivery_records d WHERE d.id = ` + rec + ` AND d.outbox_id = ` + row + ` AND d.status = 'sending')`
}
