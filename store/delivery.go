package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OutboxRow is an outbox row as the delivery engine works on it.
type OutboxRow struct {
	ID             int64
	SinkID         int64
	Owner          string
	EventType      string
	Severity       string
	Payload        []byte
	IncludeExcerpt bool
	Attempts       int
	FirstAttemptAt *time.Time
	LastClass      string
	DueAt          time.Time
	// Count is how many events the row stands for (1 plus its repeats).
	Count int
	// DedupKey is the row's event's dedup key (nil: it has none); at most
	// one row of a key is open (outbox_open_key).
	DedupKey *string
	// HadPartial reports that an attempt was answered as a partial
	// failure (Apprise 424), which is retried once.
	HadPartial bool
	// ClaimToken is the token of the claim that handed the row over (0
	// for a row that is not claimed): every statement that changes the
	// row as this claim's names it (Claim).
	ClaimToken int64
	// TakenFrom is set by ClaimDue alone: the token of the claim the row
	// was taken from (one that had expired, or whose instance died), 0
	// for a row that was pending. A row taken pending was given back by
	// the claim that held it last (its outcome written, or released):
	// that claim's copy has ended.
	TakenFrom int64
	// Abandoned is set by ClaimDue alone, on a row it took over whose
	// attempt begun under the claim it took it from was never finished:
	// the claim closed that attempt's record as abandoned, and counted it
	// (takenOverCount).
	Abandoned bool
}

// Claimed names an outbox row as one claim holds it: a statement given it
// changes the row only while that claim holds it (migration 0018), so an
// outcome written late never overwrites a newer claim of the row.
type Claimed struct {
	ID    int64
	Token int64
}

// Claim names the row as the claim that handed it over holds it.
func (r OutboxRow) Claim() Claimed { return Claimed{ID: r.ID, Token: r.ClaimToken} }

// Claims names rows as the claims that handed them over hold them.
func Claims(rows []OutboxRow) []Claimed {
	out := make([]Claimed, len(rows))
	for i, r := range rows {
		out[i] = r.Claim()
	}
	return out
}

// splitClaims returns the ids and tokens of rows, as statements take them.
func splitClaims(rows []Claimed) (ids, tokens []int64) {
	ids, tokens = make([]int64, len(rows)), make([]int64, len(rows))
	for i, r := range rows {
		ids[i], tokens[i] = r.ID, r.Token
	}
	return ids, tokens
}

// finishedPayload is what a final row keeps of its payload (REQ-1: nothing
// beyond its delivery record): the board link and the place (queue or
// webhook name), so the board can list the notification beside its
// records. Title, summary, excerpt and body are cleared.
const finishedPayload = `jsonb_strip_nulls(jsonb_build_object('link_path', payload->'link_path', 'place', payload->'place'))`

const outboxRowColumns = outboxRowHead + `o.payload` + outboxRowTail

// outboxRowHead and outboxRowTail are the columns of an OutboxRow before
// and after its payload.
const (
	outboxRowHead = `o.id, o.sink_id, o.owner, o.event_type, o.severity, `
	outboxRowTail = `, o.include_excerpt,
	o.attempts, o.first_attempt_at, coalesce(o.last_class, '') AS last_class, o.due_at, o.count, o.had_partial,
	coalesce(o.claim_token, 0) AS claim_token, o.dedup_key`
)

func collectOutboxRows(rows pgx.Rows, err error) ([]OutboxRow, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (OutboxRow, error) {
		var r OutboxRow
		err := row.Scan(&r.ID, &r.SinkID, &r.Owner, &r.EventType, &r.Severity, &r.Payload, &r.IncludeExcerpt,
			&r.Attempts, &r.FirstAttemptAt, &r.LastClass, &r.DueAt, &r.Count, &r.HadPartial, &r.ClaimToken, &r.DedupKey)
		return r, err
	})
}

// collectIDs collects the ids a query returns (its rows and error, as
// db.Query returns them).
func collectIDs(rows pgx.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// ClaimParams bounds one claim.
type ClaimParams struct {
	Instance string
	Now      time.Time
	TTL      time.Duration
	// Limit is how many rows the instance's actors can take now.
	Limit int
	// PerSink caps the rows of one sink in one claim.
	PerSink int
	// SkipSinks are sinks whose actor has no room.
	SkipSinks []int64
	// SkipExpired leaves rows whose claim expired for a later claim: they
	// are looked for once a second, not on every claim of a drain (the
	// search reads every claimed row).
	SkipExpired bool
	// Handed are rows this instance still has queued or in flight: their
	// claims may expire (a slow sink ahead of them), but this instance
	// does not take them over again, whoever holds them by then (itself,
	// or another instance that took them and let its claim expire in
	// turn); another instance may. Taken over while its copy here was
	// still in flight, the row had to be given that copy's token back
	// (RestoreClaim), and a copy that ended meanwhile, its outcome refused
	// under the new token, left the row claimed with no copy to send it
	// until the claim expired (the delivery state machine: a settle that
	// waited for ever on such a row;
	// TestAClaimLeavesARowHandedHereWhoeverHoldsIt).
	Handed []int64
	// Replaces is what the fan-out of FanOutAndClaim and
	// FanOutClaimAndWake takes as FanOut's rep; the claim does not use it.
	Replaces Replacements
}

// ClaimDue claims, in one statement, due pending rows and rows whose claim
// expired or whose instance stopped beating (it died mid-delivery:
// Heartbeat), oldest first, at most Limit and at most PerSink per sink.
// The claim hands each row over with a new token (OutboxRow.ClaimToken),
// which every later statement on the row names. The candidates are read without locks, and
// only the rows chosen among them are locked (FOR UPDATE SKIP LOCKED, the
// condition checked again on the row's latest version): concurrent
// claimers on other instances take disjoint rows, and a claim writes a
// lock only on the rows it takes. A row another claimer holds is skipped:
// the claim takes fewer rows, never a row twice.
//
// A claim that does not look for rows to take over (SkipExpired, most
// claims: the search runs once a second) leaves every sink another
// instance has rows of claimed, expired or dead ones included: taking the
// sink's later rows, it sent them ahead of the rows it would take over a
// second later, or that their instance, judged dead while it lived, then
// gave back (TestAClaimThatTakesNothingOverLeavesTheSinksOfRowsItCouldTakeOver).
//
// A due row whose sink has rows claimed by another instance (its claims
// not expired) is left to that instance, and so is a row of that sink
// whose own claim expired or whose instance died: the instance holding the
// sink takes it over in its turn, behind the rows it holds, where another
// taking it would send it beside them, ahead of the sink's earlier rows
// that instance may yet give back
// (TestARowTakenOverIsLeftToTheInstanceHoldingItsSink). One instance at a
// time delivers to a sink, in the order its rows fell due, and instances
// reserving budgets never wait for each other's sink locks. A sink is free
// again for every instance once its claimed rows are finished, their
// claims expire, or the instance stops beating (it died). The sinks other
// instances hold are listed once per claim, from the claimed rows (a few
// per sink being delivered), rather than looked up for each candidate row:
// with three instances the candidates are mostly rows of sinks the others
// hold. They are read as two ranges of outbox_claimed_by, the instances
// before this one and those after it ("<> me" in a deterministic
// collation, where only equal bytes compare equal), so that an instance
// alone reads nothing: neither its own claimed rows nor the index entries
// of rows finished since the last vacuum, which a drain piles up by the
// thousand.
func ClaimDue(ctx context.Context, db BatchSender, p ClaimParams) ([]OutboxRow, error) {
	var rows []OutboxRow
	b := &pgx.Batch{}
	b.Queue(claimPlan)
	queueClaimDue(b, p, &rows)
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("error claiming outbox rows: %w", err)
	}
	return rows, nil
}

// queueClaimDue queues a claim into b, whose rows go to *rows. A claim
// leaves a sink whose rows another live instance holds ("elsewhere"), as
// its snapshot shows them: one instance at a time delivers to a sink, best
// effort. Two claims that run at the same moment do not see each other's
// rows, but a claim takes a sink's rows only up to the first it could not
// lock ("kept"), so the second meets the rows the first locked and leaves
// the sink to it; only a row that became pending between the two, due
// before the first one's rows, goes to the second while the first holds
// the sink. The claims after them leave the sink to them until those rows
// are finished (TestOneInstancePerSinkIsBestEffortWithinOneClaim). Claims
// do not take turns under a lock: that made them exact, but cost two or
// three instances 10-15 % of their throughput (docs/BENCHMARKS.md), and
// the spec asks exactness of rows (SKIP LOCKED), not of sinks; budgets
// hold either way (the reservation locks the sink).
//
// The claim holds its instance's LockFamilyClaim from just before its
// statement to the end of its transaction (the batch's, or the caller's):
// a flush of the same instance waits for it before it looks for rows
// queued here (ClaimHeld).
func queueClaimDue(b *pgx.Batch, p ClaimParams, rows *[]OutboxRow) {
	b.Queue(claimLockSQL, LockFamilyClaim, p.Instance)
	b.Queue(claimDueSQL, p.args()...).Query(func(rs pgx.Rows) error {
		var err error
		*rows, err = collectClaimedRows(rs)
		return err
	})
}

// claimLockSQL takes an instance's LockFamilyClaim alone for a claim;
// flushLockSQL takes it shared for a flush (ClaimHeld).
const (
	claimLockSQL = `SELECT pg_advisory_xact_lock($1, hashtext($2))`
	flushLockSQL = `SELECT pg_advisory_xact_lock_shared($1, hashtext($2))`
)

// claimDueSQL is ClaimDue's statement; its arguments are ClaimParams.args.
//
// The takeover condition (issue 23, defect 4): a row another instance
// holds is taken before its claim expires only once that instance's
// alive_until has passed ("dead"), a fence after the last instant it could
// start an attempt (Beat, DispatchFence): by then every attempt it began
// has ended and had its grace to be recorded. "dead" locks the heartbeat
// rows it reads (FOR SHARE), skipping one a beat is writing: a beat that
// committed after this statement's snapshot is seen (the lock reads the
// latest version and checks the condition again), and an instance cannot
// beat, and so start an attempt, until the claim that judged it dead has
// committed. The instance's own starts then find its rows' tokens changed.
//
// A claim takes a run of each sink's due rows: sink by sink in the order
// their first rows fell due ("first_due"), each one's first PerSink due
// rows (read from outbox_pending_sink, migration 0027), until it has Limit
// rows. Rows of one sink are taken in due order as before; across sinks, a
// sink's later rows may be taken before another sink's earlier ones, which
// the next claim takes. Taken one row a sink in due order, a backlog over
// 1,000 sinks gave each actor's step 1.4 rows (docs/BENCHMARKS.md, session
// 15).
//
// The sinks come from their notes (switchboard.due_sinks, migration 0029),
// not from their rows: "first_due" reads the notes due by now in due
// order, leaving out the sinks it may not take (SkipSinks, elsewhere),
// until it has read 4 × Limit of them. It reads a few notes a sink
// however many rows the sink has, so an instance holding few sinks, or
// none, no longer reads every other sink's due row at each claim
// (TestAClaimReadsNotTheRowsOfSinksHeldElsewhere). Every pending row is
// covered by a note of its sink due no later than it, written with it by
// the outbox's triggers (TestEveryWayARowBecomesPendingIsNoted). The claim
// rewrites the notes of the sinks it took pending rows of, and of those it
// found no due row of ("rewritten"; the run's LEFT JOIN keeps such a sink
// as a row without an id): it deletes those its snapshot shows ("noted",
// skipping any another claim is deleting) and writes one due at the
// sink's first pending row it did not take ("renoted"), if any
// (TestAClaimRewritesTheNotesOfTheSinksItReads). A note written after its
// snapshot is not among those it deletes, and a row its snapshot shows
// pending is covered by the note it writes: concurrent writers and claims
// need no lock for the invariant to hold, and a writer never waits on a
// note (an embedder's transaction writing a rule's row holds up nobody).
// A note may be early, its rows taken by a claim that did not see it, or
// its sink deleted: the claim that reads it finds no due row and rewrites
// it. "first_due" is read by the run alone, so that the run stops at the
// sink that fills the claim rather than reading every sink first_due
// lists (a claim of 256 rows over 1,000 sinks read 14 of them).
//
// "chosen" locks the picks by primary key (id = ANY of them): a join of
// the picks against the outbox was planned, with a backlog's statistics,
// as a hash join over a scan of the whole outbox (TestTheClaimLocksItsPicksByID).
//
// "kept" is what the claim takes of "chosen": each sink's picks up to the
// first it could not lock. When it locked every pick, as nearly every
// claim does, "kept" is "chosen" at the cost of two counts (the rows
// before a skipped pick are looked for only when a pick was skipped: a
// window over the picks cost every claim 5-8 % more, BenchmarkClaim). A
// pick is skipped when another claim holds its lock, and that claim may
// yet roll back (its instance crashed, or its statement timed out): had
// this one taken the sink's later picks, they would go out while the
// earlier row waited pending
// (TestAClaimTakesASinksRowsOnlyUpToOneItCouldNotLock). Everything after
// "chosen" reads "kept": the rows it leaves stay pending under the notes
// that cover them, and the claimer looks again when its actors take a row,
// a notification comes or its poll fires. A writer's lock holds the sink
// the same way: a repeat of a key counted on its open row
// (enqueueForSinkSQL's ON CONFLICT, in the caller's transaction) keeps the
// sink's later rows until that transaction ends, rather than letting them
// overtake the row it is adding to.
//
// Each row comes back with the token it was taken from (chosen reads it
// on the version it locks; 0 for a pending row): OutboxRow.TakenFrom.
//
// A row taken over from another claim may have an attempt begun under it
// whose outcome was never written (its instance died mid-send, or the
// outcome was given up). Its record, the row's own or a coalesced
// message's linked from it, is closed as abandoned ("abandoned": still
// counted against the budget, D25), and the attempt is counted on the row
// (takenOverCount), in the statement that takes the row, before anything
// reads its attempts: the row comes back with OutboxRow.Abandoned set. An
// attempt is open only while the claim that began it holds its row. The
// records are looked for only when the claim took a row over ("EXISTS
// ... over", a condition the plan checks once, before it reads the
// table): on the engine's generic plan, with statistics from when the
// table was small, the look-up scanned every record at every claim
// (TestAClaimThatTakesNothingOverReadsNoRecord).
var claimDueSQL = `
		WITH dead AS MATERIALIZED (
		    SELECT name FROM switchboard.outbox_instances WHERE alive_until <= $2 AND name <> $1
		    FOR SHARE SKIP LOCKED
		), elsewhere AS MATERIALIZED (
		    SELECT sink_id FROM switchboard.outbox
		    WHERE state = 'claimed' AND claimed_by < $1
		      AND (NOT $7 OR (claim_expires_at > $2 AND claimed_by NOT IN (SELECT name FROM dead)))
		    UNION
		    SELECT sink_id FROM switchboard.outbox
		    WHERE state = 'claimed' AND claimed_by > $1
		      AND (NOT $7 OR (claim_expires_at > $2 AND claimed_by NOT IN (SELECT name FROM dead)))
		), first_due AS (
		    SELECT sink_id, min(due_at) AS due_at FROM (
		        SELECT sink_id, due_at FROM switchboard.due_sinks
		        WHERE due_at <= $2 AND sink_id <> ALL ($6::bigint[])
		          AND sink_id NOT IN (SELECT sink_id FROM elsewhere)
		        ORDER BY due_at, sink_id
		        LIMIT $4 * 4) d
		    GROUP BY sink_id
		    ORDER BY 2, 1
		    LIMIT $4
		), due AS (
		    SELECT r.id, f.sink_id, r.due_at FROM first_due f LEFT JOIN LATERAL (
		        SELECT id, due_at FROM switchboard.outbox
		        WHERE sink_id = f.sink_id AND state = 'pending' AND due_at <= $2
		        ORDER BY due_at, id
		        LIMIT $5) r ON true
		    ORDER BY f.due_at, f.sink_id, r.due_at, r.id
		    LIMIT $4
		), expired AS (
		    SELECT id, sink_id, due_at FROM switchboard.outbox
		    WHERE $7 AND state = 'claimed' AND sink_id <> ALL ($6::bigint[])
		      AND (claim_expires_at <= $2 OR claimed_by IN (SELECT name FROM dead))
		      AND id <> ALL ($8::bigint[])
		      AND sink_id NOT IN (SELECT sink_id FROM elsewhere)
		    ORDER BY claim_expires_at
		    LIMIT $4
		), candidates AS (
		    SELECT * FROM due WHERE id IS NOT NULL UNION ALL SELECT * FROM expired
		), ranked AS (
		    SELECT id, sink_id, row_number() OVER (PARTITION BY sink_id ORDER BY due_at, id) AS n, due_at
		    FROM candidates
		), picked AS (
		    SELECT id, sink_id, due_at FROM ranked WHERE n <= $5 ORDER BY due_at, id LIMIT $4
		), chosen AS (
		    SELECT o.id, o.sink_id, coalesce(o.claim_token, 0) AS taken_from, o.state = 'claimed' AS over, o.attempt_record_id AS linked,
		           o.due_at AS picked_due
		    FROM switchboard.outbox o
		    WHERE o.id = ANY (ARRAY(SELECT id FROM picked))
		      AND ((o.state = 'pending' AND o.due_at <= $2)
		       OR (o.state = 'claimed' AND (o.claim_expires_at <= $2 OR o.claimed_by IN (SELECT name FROM dead))))
		    FOR UPDATE OF o SKIP LOCKED
		), kept AS (
		    SELECT c.* FROM chosen c
		    WHERE (SELECT count(*) FROM chosen) = (SELECT count(*) FROM picked)
		       OR NOT EXISTS (SELECT 1 FROM picked p
		                      WHERE p.sink_id = c.sink_id AND (p.due_at, p.id) < (c.picked_due, c.id)
		                        AND p.id NOT IN (SELECT id FROM chosen))
		), rewritten AS (
		    SELECT sink_id FROM kept WHERE NOT over
		    UNION
		    SELECT sink_id FROM due WHERE id IS NULL
		), noted AS (
		    DELETE FROM switchboard.due_sinks WHERE ctid = ANY (ARRAY(
		        SELECT ctid FROM switchboard.due_sinks WHERE sink_id = ANY (ARRAY(SELECT sink_id FROM rewritten))
		        FOR UPDATE SKIP LOCKED))
		), renoted AS (
		    INSERT INTO switchboard.due_sinks (sink_id, due_at)
		    SELECT w.sink_id, n.due_at FROM rewritten w CROSS JOIN LATERAL (
		        SELECT due_at FROM switchboard.outbox
		        WHERE sink_id = w.sink_id AND state = 'pending' AND id <> ALL (ARRAY(SELECT id FROM kept))
		        ORDER BY due_at, id
		        LIMIT 1) n
		), abandoned AS (
		    UPDATE switchboard.delivery_records SET status = 'failed', class = 'abandoned', finished_at = $2
		    WHERE EXISTS (SELECT 1 FROM kept WHERE over) AND status = 'sending'
		      AND (outbox_id = ANY (ARRAY(SELECT id FROM kept WHERE over))
		       OR id = ANY (ARRAY(SELECT linked FROM kept WHERE over AND linked IS NOT NULL)))
		    RETURNING id, outbox_id
		), claimed AS (
		    UPDATE switchboard.outbox o SET state = 'claimed', claimed_by = $1, claim_expires_at = $2 + $3::interval,
		           claim_token = (SELECT nextval('switchboard.outbox_claim_token')),
		           ` + takenOverCount + `
		    WHERE o.id = ANY (ARRAY(SELECT id FROM kept))
		    RETURNING ` + claimedRowColumns + `, o.attempt_record_id
		)
		SELECT ` + claimedColumns + `, kept.taken_from,
		       EXISTS (SELECT 1 FROM abandoned a WHERE a.outbox_id = claimed.id OR a.id = claimed.attempt_record_id)
		FROM claimed JOIN kept USING (id) ORDER BY due_at, id`

// takenOverCount counts, on a row a claim takes over from another claim,
// the attempts begun under that claim: an attempt is counted on its row
// when its outcome is written (finishRowsSQL), and one whose outcome never
// was (its instance died mid-send, or its outcome was given up) is counted
// only in its record. The row's attempts become the highest attempt among
// its own records, its first attempt's time the earliest, before anything
// reads them against the cap; a row taken pending has had every outcome
// written, and is left as it is. A coalesced message's rows were counted
// when they were claimed (ClaimHeld).
//
// One read of the row's records gives both; for a row taken pending its
// condition is false before any record is read, and the aggregate of no
// records leaves the row as it was.
const takenOverCount = `(attempts, first_attempt_at) = (
		               SELECT greatest(o.attempts, max(d.attempt)), coalesce(o.first_attempt_at, min(d.sent_at))
		               FROM switchboard.delivery_records d WHERE o.state = 'claimed' AND d.outbox_id = o.id)`

// claimedRowColumns are outboxRowColumns without the payload (NULL in its
// place): a claimed row's payload is read when its attempt starts
// (QueueStartAttempts returns it), so the claim does not carry hundreds of
// payloads that are read again moments later.
const claimedRowColumns = outboxRowHead + `NULL::jsonb` + outboxRowTail

// claimedColumns are claimedRowColumns as the claim's "claimed" CTE
// returns them, read by its final SELECT beside what the CTE returns more.
const claimedColumns = `claimed.id, claimed.sink_id, claimed.owner, claimed.event_type, claimed.severity, NULL::jsonb,
		       claimed.include_excerpt, claimed.attempts, claimed.first_attempt_at, claimed.last_class, claimed.due_at,
		       claimed.count, claimed.had_partial, claimed.claim_token, claimed.dedup_key`

// collectClaimedRows collects the rows of claimDueSQL: claimedRowColumns
// and the token each row was taken from (OutboxRow.TakenFrom).
func collectClaimedRows(rows pgx.Rows) ([]OutboxRow, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (OutboxRow, error) {
		var r OutboxRow
		err := row.Scan(&r.ID, &r.SinkID, &r.Owner, &r.EventType, &r.Severity, &r.Payload, &r.IncludeExcerpt,
			&r.Attempts, &r.FirstAttemptAt, &r.LastClass, &r.DueAt, &r.Count, &r.HadPartial, &r.ClaimToken, &r.DedupKey, &r.TakenFrom,
			&r.Abandoned)
		return r, err
	})
}

func (p ClaimParams) args() []any {
	return []any{p.Instance, p.Now, p.TTL, p.Limit, p.PerSink, nonNilIDs(p.SkipSinks), !p.SkipExpired, nonNilIDs(p.Handed)}
}

// AnalyzeOutbox refreshes the planner's statistics of the outbox. A storm
// takes the share of due rows from nothing to most of the table in
// seconds, and autovacuum's analyze comes a minute later at best (never,
// where it is off): meanwhile the planner, believing a handful of rows
// due, reads and sorts every due row on each claim instead of the first
// few in index order. Only the columns the delivery path's conditions
// read are analyzed: the payload's statistics cost most of a full ANALYZE
// and guide no plan.
//
// The sample is a tenth of the server's default (statistics target 10:
// 3,000 rows): what the claim's plans need is the share of due and
// claimed rows, which such a sample gives within a few percent, at a
// tenth of the cost of the default one.
func AnalyzeOutbox(ctx context.Context, db BatchSender) error {
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SET LOCAL default_statistics_target = 10`)
	b.Queue(`ANALYZE switchboard.outbox (id, sink_id, state, due_at, claimed_by, claim_expires_at)`)
	b.Queue(`COMMIT`)
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("error analyzing the outbox: %w", err)
	}
	return nil
}

// FanOutAndClaim fans out at most fanOutLimit committed events (FanOut)
// and then claims (ClaimDue), rows just fanned out included, in one round
// trip and one implicit transaction: the claimers' usual cycle, which
// would otherwise pay a commit for each.
func FanOutAndClaim(ctx context.Context, db BatchSender, fanOutLimit int, p ClaimParams) (FanOutResult, []OutboxRow, error) {
	fr, rows, _, err := fanOutAndClaim(ctx, db, fanOutLimit, p, 0)
	return fr, rows, err
}

// Wake is what a claimer reads once it has claimed: the sinks whose held
// rows have a token again (HeldDueSinks) and when to look next (NextWake;
// HasNext false when nothing is due, held or claimed by another
// instance).
type Wake struct {
	HeldSinks []int64
	Next      time.Time
	HasNext   bool
}

// FanOutClaimAndWake is FanOutAndClaim followed, in the same round trip
// and implicit transaction, by HeldDueSinks (at most heldLimit, due at
// p.Now) and NextWake, read after the claim: a claimer's whole cycle in
// one round trip when one claim takes every row there was room for. A
// fanOutLimit of 0 fans out nothing (no statement is sent for it).
func FanOutClaimAndWake(ctx context.Context, db BatchSender, fanOutLimit int, p ClaimParams, heldLimit int) (FanOutResult, []OutboxRow, Wake, error) {
	return fanOutAndClaim(ctx, db, fanOutLimit, p, heldLimit)
}

// fanOutAndClaim is FanOutAndClaim, and FanOutClaimAndWake when heldLimit
// is above 0.
func fanOutAndClaim(ctx context.Context, db BatchSender, fanOutLimit int, p ClaimParams, heldLimit int) (FanOutResult, []OutboxRow, Wake, error) {
	var (
		fr   FanOutResult
		rows []OutboxRow
		w    Wake
	)
	b := &pgx.Batch{}
	b.Queue(claimPlan)
	if fanOutLimit > 0 {
		queueFanOut(b, fanOutLimit, p.Now, p.Replaces, &fr)
	}
	queueClaimDue(b, p, &rows)
	if heldLimit > 0 {
		queueHeldDueSinks(b, p.Now, heldLimit, &w.HeldSinks)
		queueNextWake(b, p.Instance, &w)
	}
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return FanOutResult{}, nil, Wake{}, fmt.Errorf("error fanning out and claiming outbox rows: %w", err)
	}
	return fr, rows, w, nil
}

// HeldDueSinks lists sinks with held rows whose token has returned.
func HeldDueSinks(ctx context.Context, db BatchSender, now time.Time, limit int) ([]int64, error) {
	var ids []int64
	b := &pgx.Batch{}
	queueHeldDueSinks(b, now, limit, &ids)
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return ids, nil
}

func queueHeldDueSinks(b *pgx.Batch, now time.Time, limit int, ids *[]int64) {
	b.Queue(`
		SELECT DISTINCT sink_id FROM switchboard.outbox WHERE state = 'held' AND due_at <= $1 LIMIT $2`, now, limit).Query(func(rs pgx.Rows) error {
		var err error
		if *ids, err = collectIDs(rs, nil); err != nil {
			return fmt.Errorf("error listing sinks with held rows: %w", err)
		}
		return nil
	})
}

// NextWake returns the earliest time a row becomes due (pending or held) or
// a claim of another instance than instance expires; ok is false when there
// is none.
//
// A pending row's time is read from the notes of due sinks
// (switchboard.due_sinks): the earliest note is never later than the
// earliest pending row, and may be earlier (its rows taken since, or its
// sink deleted), which costs a claim that finds nothing and rewrites the
// note. The outbox then needs no index of its pending rows in due order.
//
// The instance's own claims are left out. Its rows are queued or in flight
// here, and their attempts extend their claims; one whose copy was lost
// (an outcome that could not be written) is found by the search for
// expired claims that the claimer makes at its next poll (PollInterval), a
// second or so after the claim's two minutes. Read from outbox_claimed_by
// as elsewhere is in claimDueSQL, two ranges around the instance, the
// claims cost an instance alone nothing: reading its own, a few hundred
// rows of a drain and their heap pages, cost 7 µs of a delivery's database
// time at 10 sinks (docs/BENCHMARKS.md, session 12).
func NextWake(ctx context.Context, db BatchSender, instance string) (t time.Time, ok bool, err error) {
	var w Wake
	b := &pgx.Batch{}
	queueNextWake(b, instance, &w)
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return time.Time{}, false, err
	}
	return w.Next, w.HasNext, nil
}

func queueNextWake(b *pgx.Batch, instance string, w *Wake) {
	b.Queue(`
		SELECT least(
		    (SELECT min(due_at) FROM switchboard.due_sinks),
		    (SELECT min(due_at) FROM switchboard.outbox WHERE state = 'held'),
		    (SELECT min(claim_expires_at) FROM switchboard.outbox WHERE state = 'claimed' AND claimed_by < $1),
		    (SELECT min(claim_expires_at) FROM switchboard.outbox WHERE state = 'claimed' AND claimed_by > $1))`,
		instance).QueryRow(func(row pgx.Row) error {
		var next *time.Time
		if err := row.Scan(&next); err != nil {
			return fmt.Errorf("error reading next due time: %w", err)
		}
		if next != nil {
			w.Next, w.HasNext = *next, true
		}
		return nil
	})
}

// SinkForDelivery is what delivering needs of a sink and its connection.
type SinkForDelivery struct {
	ID              int64
	Owner           string
	Kind            string
	Enabled         bool
	Options         []byte
	PerHour         int
	Burst           int
	ConnectionID    int64
	ConnectionOwner string
	ConnectionKind  string
	BaseURL         string
	SealedSecret    []byte
}

// LockSinkForDelivery locks the sink's row for the reservation (so that
// instances reserve one at a time per sink) and reads its connection.
// It returns pgx.ErrNoRows, wrapped, for a deleted sink.
func LockSinkForDelivery(ctx context.Context, tx DBTX, sinkID int64) (SinkForDelivery, error) {
	var s SinkForDelivery
	err := tx.QueryRow(ctx, `
		SELECT k.id, k.owner, k.kind, k.enabled, k.options, k.budget_per_hour, k.budget_burst,
		       c.id, c.owner, c.kind, c.account_key, c.secret
		FROM switchboard.sinks k JOIN switchboard.connections c ON c.id = k.connection_id
		WHERE k.id = $1
		FOR UPDATE OF k`, sinkID).Scan(&s.ID, &s.Owner, &s.Kind, &s.Enabled, &s.Options, &s.PerHour, &s.Burst,
		&s.ConnectionID, &s.ConnectionOwner, &s.ConnectionKind, &s.BaseURL, &s.SealedSecret)
	if err != nil {
		return SinkForDelivery{}, fmt.Errorf("error locking sink %d: %w", sinkID, err)
	}
	return s, nil
}

// GetSinkForDelivery reads a sink and its connection without a lock (send
// test, which bypasses the budget).
func GetSinkForDelivery(ctx context.Context, db DBTX, sinkID int64) (SinkForDelivery, error) {
	var s SinkForDelivery
	err := db.QueryRow(ctx, `
		SELECT k.id, k.owner, k.kind, k.enabled, k.options, k.budget_per_hour, k.budget_burst,
		       c.id, c.owner, c.kind, c.account_key, c.secret
		FROM switchboard.sinks k JOIN switchboard.connections c ON c.id = k.connection_id
		WHERE k.id = $1`, sinkID).Scan(&s.ID, &s.Owner, &s.Kind, &s.Enabled, &s.Options, &s.PerHour, &s.Burst,
		&s.ConnectionID, &s.ConnectionOwner, &s.ConnectionKind, &s.BaseURL, &s.SealedSecret)
	if err != nil {
		return SinkForDelivery{}, fmt.Errorf("error reading sink %d: %w", sinkID, err)
	}
	return s, nil
}

// BudgetTAT returns the sink's budget state: the theoretical arrival time
// recorded by its latest counted delivery record (zero when none).
func BudgetTAT(ctx context.Context, db DBTX, sinkID int64) (time.Time, error) {
	var tat *time.Time
	err := db.QueryRow(ctx, `
		SELECT max(budget_tat) FROM switchboard.delivery_records WHERE sink_id = $1 AND counts_budget`, sinkID).Scan(&tat)
	if err != nil {
		return time.Time{}, fmt.Errorf("error reading sink %d budget: %w", sinkID, err)
	}
	if tat == nil {
		return time.Time{}, nil
	}
	return *tat, nil
}

// Rows an instance holds. The statements that change rows an instance
// holds find them by id and "claimed_by = instance", never with
// "state = 'claimed'" beside them: the two mean the same (migration
// 0014's constraint), but the second matches the predicate of the index
// of claimed rows (outbox_claimed_by, migration 0016), and a planner
// believing from stale statistics that almost no row is claimed would read
// every row the instance holds through that index on each statement.
//
// The same belief makes a scan of the whole outbox look cheaper than a few
// hundred lookups by primary key: joined with the list of rows it is
// given, the outbox side, filtered by "claimed_by = instance", is
// estimated at one row, and the planner reads the whole table (a
// sequential scan, or the primary key from end to end) and probes the
// list for each row it holds: hundreds of milliseconds a statement, in a
// drain of a few seconds. So a statement given a list of rows finds each
// by its primary key first, one lookup per entry of the list
// (heldRowsByTID), and updates the row versions it found by their tids,
// with "claimed_by = instance" checked on the version it updates. And it
// runs in a transaction begun by QueueBeginOnHeldRows, whose heldRowsPlan
// rules out the one other way to reach those versions, a sequential scan
// (TestHeldRowStatementsFindTheirRowsByID), and has its statements planned
// generically (genericPlans).
const heldRowsPlan = `SELECT set_config('enable_seqscan', 'off', true), ` + genericPlans

// genericPlans, in a statement of its own or beside another setting, has
// the rest of the transaction (explicit, or a batch's implicit one) run
// its prepared statements on generic plans: planned once a connection,
// and again only after the tables' statistics change, instead of for
// every call. The engine's claims, fan-outs, reservations, starts and
// outcomes run so.
//
// Left to itself (plan_cache_mode auto), PostgreSQL plans each prepared
// statement afresh for the first five calls on each connection, and
// afterwards whenever the average of those custom plans' costs is below
// the generic plan's; a statement first run on a small outbox keeps that
// average for good (an analysis rebuilds the plans but keeps it), and the
// claim was planned at 79 of its 84 calls in a drain of events. Each
// instance pays this on each of its connections: three instances draining
// rows over 10 sinks planned for 2.7 s of their backends' time where one
// planned for 0.6 s, and ran at 0.78–0.89× one instance; with generic
// plans, at 0.87–1.03× (docs/BENCHMARKS.md, session 21). A generic plan
// knows no parameter's value, so the shapes these statements depend on
// are held by their text (lookups by id and tid, heldRowsByTID, the
// claim's picks locked by id) and by enable_seqscan off where a scan
// would read the whole outbox, and the tests read the generic plans
// (TestTheClaimLocksItsPicksByID, TestHeldRowStatementsFindTheirRowsByID).
const genericPlans = `set_config('plan_cache_mode', 'force_generic_plan', true)`

// claimPlan opens a claim's batch: the claim and what follows it in the
// batch (HeldDueSinks, NextWake) run on generic plans (genericPlans).
const claimPlan = `SELECT ` + genericPlans

// heldRowsByTID returns the CTE "u": the rows of list (a FROM item naming
// its columns as u(id, ...)), each with the tid of the outbox row it
// names (NULL for a row that is gone), found by primary key. A statement
// joins it as "outbox.ctid = u.tid AND outbox.claimed_by = $instance": a
// tid scan for each entry, whatever the statistics say.
//
// The tid is the one the row has in the statement's snapshot. A row that
// another transaction changes meanwhile has a new tid, and the statement
// leaves it out, whether or not the row is still this instance's (a tid
// scan checks again, on the latest version, that the tid is the one it
// was asked for). Only an instance that takes a row whose claim expired
// changes a row another instance holds, so this costs nothing today; and
// it never loses an outcome: FinishRows and RecordFinished try the rows
// left out once more (finishRowsAgain), and an attempt that did not start,
// or a row that was not held, stays claimed and is taken up again when
// its claim expires (TestHeldRowStatementsFollowARowChangedMeanwhile).
func heldRowsByTID(list string) string {
	return `u AS MATERIALIZED (
		    SELECT u.*, (SELECT ctid FROM switchboard.outbox WHERE id = u.id) AS tid FROM ` + list + `
		)`
}

// ErrClaimLost reports a row this instance no longer holds (its claim
// expired and another instance took it).
var ErrClaimLost = errors.New("outbox row is no longer claimed by this instance")

// CloseAbandoned closes, as failed with class "abandoned", the records of
// earlier attempts on the rows among rowIDs that this instance holds which
// were never finished (their instance died or their adapter panicked
// mid-send), one coalesced record for several rows included: they may
// have been sent, so they still count against the budget (D25). It
// returns the rows whose abandoned attempts it closed. A claim that takes
// a row over closes them already, and counts them (claimDueSQL): a
// coalesced message's rows, held until then, and the single-row
// StartAttempt's, close them here.
func CloseAbandoned(ctx context.Context, db DBTX, rows []Claimed, instance string, now time.Time) ([]int64, error) {
	ids, tokens := splitClaims(rows)
	return collectClosed(db.Query(ctx, closeAbandonedSQL, ids, now, instance, tokens))
}

var closeAbandonedSQL = `
		WITH ` + heldRowsByTID(`unnest($1::bigint[], $4::bigint[]) AS u(id, token)`) + `,
		mine AS (
		    SELECT o.id, o.attempt_record_id FROM u JOIN switchboard.outbox o ON o.ctid = u.tid
		    WHERE o.claimed_by = $3 AND o.claim_token = u.token
		), targets AS (
		    SELECT id AS row_id, attempt_record_id AS rec FROM mine WHERE attempt_record_id IS NOT NULL
		    UNION
		    SELECT d.outbox_id, d.id FROM switchboard.delivery_records d JOIN mine ON d.outbox_id = mine.id
		    WHERE d.status = 'sending'
		), closed AS (
		    UPDATE switchboard.delivery_records SET status = 'failed', class = 'abandoned', finished_at = $2
		    WHERE status = 'sending' AND id IN (SELECT rec FROM targets)
		    RETURNING id
		)
		SELECT DISTINCT t.row_id FROM targets t JOIN closed c ON c.id = t.rec`

func collectClosed(rows pgx.Rows, err error) ([]int64, error) {
	ids, err := collectIDs(rows, err)
	if err != nil {
		return nil, fmt.Errorf("error closing abandoned attempts: %w", err)
	}
	return ids, nil
}

// StartAttempt counts an attempt on a row this instance holds, unless it
// has had maxAttempts already, extends its claim, and returns the row as
// it is now, with how many abandoned attempts it closed (see
// CloseAbandoned). It returns ErrClaimLost for a row the claim no longer
// holds or that had its last attempt.
//
// Like every statement that starts an attempt, it starts none unless
// instance's heartbeat lets it dispatch (DispatchFence), at now: the
// caller's clock is the database's or a test's.
func StartAttempt(ctx context.Context, tx DBTX, row Claimed, instance string, now time.Time, ttl time.Duration, maxAttempts int) (OutboxRow, int, error) {
	closed, err := CloseAbandoned(ctx, tx, []Claimed{row}, instance, now)
	if err != nil {
		return OutboxRow{}, 0, err
	}
	rows, err := collectOutboxRows(tx.Query(ctx, `
		UPDATE switchboard.outbox o SET attempts = attempts + 1, first_attempt_at = coalesce(first_attempt_at, $3),
		       claim_expires_at = $3 + $4::interval
		WHERE id = $1 AND claimed_by = $2 AND claim_token = $5 AND attempts < $6 AND `+DispatchFence("$2", "$3")+`
		RETURNING `+outboxRowColumns, row.ID, instance, now, ttl, row.Token, maxAttempts))
	if err != nil {
		return OutboxRow{}, 0, fmt.Errorf("error starting attempt on row %d: %w", row.ID, err)
	}
	if len(rows) == 0 {
		return OutboxRow{}, 0, ErrClaimLost
	}
	return rows[0], len(closed), nil
}

// ReleaseRows gives claimed rows back to the pending queue, due as they
// were (their instance is stopping before it attempted them). A row whose
// key has a pending or held row again (a repeat arrived while it was
// claimed) takes that row's count in, and that row goes (absorbRepeats).
//
// A row another transaction changed while the statement ran is left out by
// its tid (heldRowsByTID); a second statement, with a snapshot of its own,
// gives back those still held under their claims, as finishRowsAgain does
// for outcomes: a stop never leaves a queued row claimed because a row
// changed while it was given back.
//
// Two rows of one key (a repeat opened a row while the first was claimed,
// and both were claimed again) cannot both be pending (outbox_open_key):
// a statement refused so, which changed nothing, is done again one row at
// a time, each taking in the one before it. db must not be a transaction.
func ReleaseRows(ctx context.Context, db DBTX, rows []Claimed, instance string, rep Replacements) (int, error) {
	ids, tokens := splitClaims(rows)
	by, of := rep.args()
	tag, err := db.Exec(ctx, releaseRowsSQL, ids, tokens, instance, by, of)
	if len(rows) > 1 && isUniqueViolation(err, "outbox_open_key") {
		return oneAtATime(ctx, db, rows, instance, rep, ReleaseRows)
	}
	if err != nil {
		return 0, fmt.Errorf("error releasing rows %v: %w", ids, err)
	}
	n := int(tag.RowsAffected())
	if n < len(rows) {
		again, err := db.Exec(ctx, releaseRowsSQL, ids, tokens, instance, by, of)
		if err != nil {
			return n, fmt.Errorf("error releasing rows %v: %w", ids, err)
		}
		n += int(again.RowsAffected())
	}
	return n, nil
}

// oneAtATime gives back each of rows by itself with giveBack (ReleaseRows,
// GiveBackUnsent), in order, and returns how many went back.
func oneAtATime[T any](ctx context.Context, db DBTX, rows []T, instance string, rep Replacements,
	giveBack func(context.Context, DBTX, []T, string, Replacements) (int, error)) (int, error) {
	n := 0
	for i := range rows {
		k, err := giveBack(ctx, db, rows[i:i+1], instance, rep)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

var releaseRowsSQL = `
		WITH ` + heldRowsByTID(`unnest($1::bigint[], $2::bigint[]) AS u(id, token)`) + `,
		mine AS (
		    SELECT o.id, o.sink_id, o.dedup_key, 'pending' AS state FROM u JOIN switchboard.outbox o ON o.ctid = u.tid
		    WHERE o.claimed_by = $3 AND o.claim_token = u.token
		), ` + absorbRepeats("mine", "$4") + `
		UPDATE switchboard.outbox SET state = 'pending', claimed_by = NULL, claim_expires_at = NULL, claim_token = NULL,
		       ` + absorbedSet("$4", "$5") + `, payload = ` + absorbedPayload("$4", "$5") + `
		FROM u LEFT JOIN extra ON extra.keep = u.id
		WHERE outbox.ctid = u.tid AND outbox.claimed_by = $3 AND outbox.claim_token = u.token`

// absorbRepeats returns the CTEs "absorbed" and "extra" of a statement
// that makes rows this instance holds pending or held again. A repeat of
// a row's dedup key that arrives while the row is claimed opens a new row
// (the claimed one is no longer open for coalescing, D7), and the two may
// not both be open (outbox_open_key): so the row going back takes the open
// row in as the fan-out would have had it been open (fanOutSQL's ON
// CONFLICT: REQ-11's "and N more" for a windowed key, an event of a type
// that replaces the row's, Replacements, taking it over) and the open row
// goes. The row going back keeps
// its attempts and schedule, so repeats never reset the attempt cap.
// "mine" names a CTE of the rows the statement changes, with their id,
// sink_id, dedup_key and new state; the statement sets absorbedSet and
// absorbedPayload from "extra", joined on extra.keep = the row's id. by
// and of are the statement's parameters for the Replacements
// (Replacements.args); absorbedSet and absorbedPayload take the same.
//
// The statement's update reads "extra", an aggregate of every row
// deleted: the deletes are done before the first row is updated, so the
// update never meets the row it replaces in the unique index. A repeat
// committed between the two (it found no open row) makes the statement
// fail on outbox_open_key; the recorder writes that outcome again on its
// own, and the second try takes the new row in.
func absorbRepeats(mine, by string) string {
	return `absorbed AS (
		    DELETE FROM switchboard.outbox x USING ` + mine + ` r
		    WHERE r.state IN ('pending', 'held') AND r.dedup_key IS NOT NULL
		      AND x.sink_id = r.sink_id AND x.dedup_key = r.dedup_key AND x.state IN ('pending', 'held')
		      AND x.id <> r.id
		    RETURNING r.id AS keep, x.count, x.windowed, x.event_type, x.severity, x.payload, x.include_excerpt
		), extra AS (
		    SELECT keep, sum(count) FILTER (WHERE windowed)::int AS n, bool_or(include_excerpt) AS excerpt,
		           (array_agg(severity) FILTER (WHERE event_type = ANY (` + by + `::text[])))[1] AS replacing_severity,
		           (array_agg(event_type) FILTER (WHERE event_type = ANY (` + by + `::text[])))[1] AS replacing_type,
		           (array_agg(payload) FILTER (WHERE event_type = ANY (` + by + `::text[])))[1] AS replacing_payload
		    FROM absorbed GROUP BY keep
		)`
}

// absorbedSet and absorbedPayload are the assignments that take in the
// rows absorbRepeats deleted (nothing changes for a row without any).
func absorbedSet(by, of string) string {
	return `count = count + coalesce(extra.n, 0),
		       event_type = CASE WHEN ` + replacesSQL("extra.replacing_type", "outbox.event_type", by, of) + `
		                         THEN extra.replacing_type ELSE event_type END,
		       severity = coalesce(extra.replacing_severity, severity),
		       include_excerpt = include_excerpt OR coalesce(extra.excerpt, false)`
}

func absorbedPayload(by, of string) string {
	return `CASE WHEN ` + replacesSQL("extra.replacing_type", "outbox.event_type", by, of) + `
		            THEN extra.replacing_payload ELSE payload END`
}

// FinishHeldAtCap ends a sink's held rows that have had their last attempt
// (cap) as undeliverable, so a coalesced message never attempts a row
// again past the cap; it returns them with their last error class.
func FinishHeldAtCap(ctx context.Context, tx DBTX, sinkID int64, limit int, now time.Time) ([]FinishedRow, error) {
	ids, err := collectFinishedRows(tx.Query(ctx, `
		UPDATE switchboard.outbox SET state = 'undeliverable', payload = `+finishedPayload+`, finished_at = $3
		WHERE sink_id = $1 AND state = 'held' AND attempts >= $2
		RETURNING id, coalesce(last_class, '')`, sinkID, limit, now))
	if err != nil {
		return nil, fmt.Errorf("error finishing held rows at the cap of sink %d: %w", sinkID, err)
	}
	return ids, nil
}

// ClaimHeld claims the held rows of a sink that are due and below the cap
// of maxAttempts (for one coalesced message), starting an attempt on each,
// in the order they fell due. The cap is in the statement, not only in an
// earlier FinishHeldAtCap: a row put back to held at its cap between the
// two is left held (the next flush ends it), never attempted an eighth
// time (and migration 0022's outbox_attempts_cap refuses that anyway).
// A held row whose own retry is not due yet waits for a later message.
//
// A held row waits, too, while a pending row of the sink fell due before
// it (pendingBefore): that row goes first, claimed when the claimer
// reaches it, and is held with the rest if no token is left for it. The
// claimer can be slower than a token's return: a sink whose earlier row
// another instance's claim holds is left to the once-a-second search for
// rows to take over, and a claim stops at a row another claim has locked
// (the state machine: a held row sent at its token's time while two rows
// of the sink, due 50 s before it and never attempted, waited pending;
// TestAFlushWaitsForThePendingRowsDueBeforeIt). The held rows due before
// the sink's first pending row go; the claimer's cycle pokes the sink
// again for the others (HeldDueSinks).
//
// Like every statement that starts an attempt, it takes none unless
// instance's heartbeat lets it dispatch (DispatchFence) at the database's
// clock, or at fenceAt when not zero (a test's fake clock).
//
// Nor does it take any while instance holds a row of the sink under a
// claim whose attempt has not begun (queuedHere): that row is queued for
// the sink's actor, or on its way there, and went out first, in its turn;
// the coalesced message that overtook it would spend the token it was due
// (found by the state machine: an actor that chose the flush while its
// mailbox was empty, and the claimer claimed and queued a row before the
// flush claimed the held ones). The actor attempts its queued rows next,
// and the held ones are flushed when the sink is poked again.
//
// A claim of the same instance in flight is waited for first: its rows
// are not in the statement's snapshot until it commits, and a flush that
// ran meanwhile overtook them (the state machine again: a held retry sent
// while the rows of the claim that had just begun were queued). The wait
// is a statement of its own, so that the claiming statement's snapshot is
// taken after the claim committed; it takes the instance's LockFamilyClaim
// shared, held to the end of tx, which must be a transaction (the
// flush's): a claim that begins after it waits in turn until the flush
// commits, and then sees the flushed rows claimed.
func ClaimHeld(ctx context.Context, tx DBTX, sinkID int64, instance string, now time.Time, ttl time.Duration, maxAttempts int, fenceAt time.Time) ([]OutboxRow, error) {
	if _, err := tx.Exec(ctx, flushLockSQL, LockFamilyClaim, instance); err != nil {
		return nil, fmt.Errorf("error waiting for the claims of instance %s: %w", instance, err)
	}
	rows, err := collectOutboxRows(tx.Query(ctx, `
		WITH held AS (
		    SELECT id FROM switchboard.outbox h
		    WHERE sink_id = $1 AND state = 'held' AND due_at <= $3 AND attempts < $5 AND `+DispatchFence("$2", "$6")+`
		      AND NOT EXISTS (`+queuedHere+`)
		      AND NOT EXISTS (`+pendingBefore+`)
		    ORDER BY id FOR UPDATE SKIP LOCKED
		), claimed AS (
		    UPDATE switchboard.outbox o SET state = 'claimed', claimed_by = $2, claim_expires_at = $3::timestamptz + $4::interval,
		           claim_token = (SELECT nextval('switchboard.outbox_claim_token')),
		           attempts = attempts + 1, first_attempt_at = coalesce(first_attempt_at, $3::timestamptz)
		    FROM held WHERE o.id = held.id AND o.state = 'held' AND o.attempts < $5
		    RETURNING `+outboxRowColumns+`
		)
		SELECT * FROM claimed ORDER BY due_at, id`, sinkID, instance, now, ttl, maxAttempts, nullTime(fenceAt)))
	if err != nil {
		return nil, fmt.Errorf("error claiming held rows of sink %d: %w", sinkID, err)
	}
	return rows, nil
}

// pendingBefore selects the pending rows of sink $1 due before the held
// row h (by due time, then id): a flush leaves h held while one is there
// (ClaimHeld).
const pendingBefore = `SELECT 1 FROM switchboard.outbox p
		      WHERE p.sink_id = $1 AND p.state = 'pending' AND (p.due_at, p.id) < (h.due_at, h.id)`

// queuedHere selects the rows of sink $1 that instance $2 holds at $3
// under a claim whose attempt has not begun: an attempt's start writes its
// record (the row's own, startAttemptsSQL, or a coalesced message's,
// linked from the row), sending until the outcome that also ends the
// row's claim, sent at or after the claim began, and any extension of the
// claim it makes is to its sent_at + the claim's time ($4); a claim alone
// leaves the row's records older than that, or none. A record an earlier
// claim's attempt left open is closed by the claim that took the row over
// (claimDueSQL's "abandoned"): sent at the instant of that claim, it would
// otherwise pass for the new claim's start
// (TestAFlushWaitsForARowTakenOverAtTheInstantItsAbandonedAttemptBegan).
const queuedHere = `SELECT 1 FROM switchboard.outbox q
		      WHERE q.sink_id = $1 AND q.state = 'claimed' AND q.claimed_by = $2 AND q.claim_expires_at > $3
		        AND NOT EXISTS (SELECT 1 FROM switchboard.delivery_records d
		                        WHERE (d.outbox_id = q.id OR d.id = q.attempt_record_id) AND d.status = 'sending'
		                          AND d.sent_at + $4::interval >= q.claim_expires_at)`

// DeliveryRecord is one attempt (or test message) as recorded. It never
// holds a body, header, URL or secret.
type DeliveryRecord struct {
	ID            int64
	SinkID        int64
	Owner         string
	OutboxID      int64 // 0 for a coalesced message or a test
	EventType     string
	Attempt       int
	IsTest        bool
	CountsBudget  bool
	CoalescedRows int
	Status        string
	Class         string
	HTTPStatus    int
	SentAt        time.Time
	FinishedAt    *time.Time
	BudgetTAT     *time.Time
	// Rows are the outbox rows the attempt is for, as this instance's
	// claims hold them: each is linked to the record (attempt_record_id),
	// so that an attempt abandoned mid-send is closed when any of them is
	// attempted again. The record is written only while Instance holds
	// every one of them under its claim.
	Rows     []Claimed
	Instance string
}

// InsertDeliveryRecord writes a record in status "sending". A record for
// rows (DeliveryRecord.Rows) is written, and linked from them, only while
// the instance holds every one of them under the claim named (their rows
// locked meanwhile); otherwise nothing is written and it returns
// ErrClaimLost: an instance that lost a claim writes nothing for a row
// another instance holds.
func InsertDeliveryRecord(ctx context.Context, db DBTX, r DeliveryRecord) (int64, error) {
	ids, tokens := splitClaims(r.Rows)
	var id int64
	err := db.QueryRow(ctx, insertDeliveryRecordSQL,
		r.SinkID, r.Owner, r.OutboxID, r.EventType, max(r.Attempt, 1), r.IsTest, r.CountsBudget,
		max(r.CoalescedRows, 1), r.SentAt, r.BudgetTAT, ids, tokens, r.Instance).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrClaimLost
	}
	if err != nil {
		return 0, fmt.Errorf("error writing delivery record: %w", err)
	}
	return id, nil
}

// insertDeliveryRecordSQL is InsertDeliveryRecord's statement: $11 and $12
// the rows' ids and claim tokens, $13 the instance holding them.
const insertDeliveryRecordSQL = `
		WITH held AS (
		    SELECT o.id FROM unnest($11::bigint[], $12::bigint[]) AS u(id, token)
		    JOIN switchboard.outbox o ON o.id = u.id
		    WHERE o.claimed_by = $13 AND o.claim_token = u.token
		    FOR UPDATE OF o
		), rec AS (
		    INSERT INTO switchboard.delivery_records (sink_id, owner, outbox_id, event_type, attempt, is_test, counts_budget,
		                                  coalesced_rows, status, sent_at, budget_tat)
		    SELECT $1, $2, nullif($3, 0), $4, $5, $6, $7, $8, 'sending', $9, $10
		    WHERE (SELECT count(*) FROM held) = cardinality($11::bigint[])
		    RETURNING id
		), link AS (
		    UPDATE switchboard.outbox o SET attempt_record_id = rec.id
		    FROM held, rec WHERE o.id = held.id AND o.claimed_by = $13
		)
		SELECT id FROM rec`

// FinishDeliveryRecord records how an attempt ended.
func FinishDeliveryRecord(ctx context.Context, db DBTX, id int64, status, class string, httpStatus int, now time.Time) error {
	_, err := db.Exec(ctx, `
		UPDATE switchboard.delivery_records SET status = $2, class = nullif($3, ''), http_status = nullif($4, 0), finished_at = $5
		WHERE id = $1`, id, status, class, httpStatus, now)
	if err != nil {
		return fmt.Errorf("error finishing delivery record %d: %w", id, err)
	}
	return nil
}

// RowOutcome is how an attempt leaves an outbox row.
type RowOutcome struct {
	// State is pending (retry at DueAt), held (wait for a token at DueAt),
	// delivered, partial or undeliverable.
	State string
	Class string
	DueAt time.Time
}

// FinishRows applies an outcome to rows this instance holds. A row that
// ends (delivered, partial, undeliverable) keeps no payload: its delivery
// records are what is kept of it.
func FinishRows(ctx context.Context, db DBTX, rows []Claimed, instance string, o RowOutcome, now time.Time, rep Replacements) error {
	var r rowOutcomes
	r.add(rows, 0, o, now)
	done, err := collectIDs(db.Query(ctx, finishRowsSQL, r.args(instance, rep)...))
	if err == nil {
		err = finishRowsAgain(ctx, db, r, done, instance, rep)
	}
	if err != nil {
		return fmt.Errorf("error recording outcome of rows %v: %w", r.ids, err)
	}
	return nil
}

// finishRowsAgain applies once more the outcomes of r that the statement
// which applied those of done left out. A statement on held rows finds
// each row by the tid it has in the statement's snapshot (heldRowsByTID):
// a row that another transaction changed meanwhile, in any way that left
// it with this instance, is left out, as a row another instance took is.
// The second statement, with a snapshot of its own, finds the row's latest
// version: an outcome is never dropped (to be sent again once its claim
// expires) because a row changed while it was written.
func finishRowsAgain(ctx context.Context, db DBTX, r rowOutcomes, done []int64, instance string, rep Replacements) error {
	rest := r.without(done)
	if len(rest.ids) == 0 {
		return nil
	}
	_, err := db.Exec(ctx, finishRowsSQL, rest.args(instance, rep)...)
	return err
}

// QueueFinishRows queues FinishRows into b, without its second statement:
// a row it leaves stays claimed, and is found again once its claim
// expires.
func QueueFinishRows(b *pgx.Batch, rows []Claimed, instance string, o RowOutcome, now time.Time, rep Replacements) {
	var r rowOutcomes
	r.add(rows, 0, o, now)
	b.Queue(finishRowsSQL, r.args(instance, rep)...)
}

// finishRowsSQL applies an outcome to each row of a list as its claim
// holds it and returns the rows it changed; its arguments are
// rowOutcomes.args. A row going back to pending or held takes in the open
// row a repeat of its key opened meanwhile (absorbRepeats).
//
// An outcome of an attempt counts it: the row's attempts become the
// attempt's number, and its first attempt's time the attempt's, when it
// had none, both read from the attempt's record (written for this row
// alone by its start, startAttemptsSQL, which counted it nowhere else).
// A coalesced message's record (outbox_id NULL) counts nothing: its rows'
// attempts were counted when they were claimed (ClaimHeld).
var finishRowsSQL = finishRowsWith("", `(
		        SELECT l.*, a.attempt, a.sent_at FROM `+rowOutcomesList+`
		        LEFT JOIN LATERAL (SELECT d.attempt, d.sent_at FROM switchboard.delivery_records d
		                           WHERE d.id = l.rec AND d.outbox_id = l.id) a ON true
		    ) AS u`)

// recordFinishedSQL is finishRowsSQL that first writes the ends of the
// attempts' records ($11 to $15: ids, statuses, classes, HTTP statuses,
// times), and counts each row's attempt from its record as the record's
// update returns it: a group's records and rows in one statement.
var recordFinishedSQL = finishRowsWith(`recs AS (
		    UPDATE switchboard.delivery_records d SET status = r.status, class = nullif(r.class, ''),
		           http_status = nullif(r.http, 0), finished_at = r.at
		    FROM unnest($11::bigint[], $12::text[], $13::text[], $14::int[], $15::timestamptz[]) AS r(id, status, class, http, at)
		    WHERE d.id = r.id
		    RETURNING d.id, d.outbox_id, d.attempt, d.sent_at
		), `, `(
		        SELECT l.*, recs.attempt, recs.sent_at FROM `+rowOutcomesList+`
		        LEFT JOIN recs ON recs.id = l.rec AND recs.outbox_id = l.id
		    ) AS u`)

// rowOutcomesList is the list of rows and outcomes of rowOutcomes.args, as
// l.
const rowOutcomesList = `unnest($1::bigint[], $7::bigint[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $10::bigint[])
		             AS l(id, token, state, class, due, finished, rec)`

// finishRowsWith is the statement of finishRowsSQL after the CTEs before
// (each followed by a comma), over list: a FROM item naming, as u, the
// columns of rowOutcomesList and the attempt's number and sent_at (NULL
// for an outcome without an attempt of the row's own).
func finishRowsWith(before, list string) string {
	return `
		WITH ` + before + heldRowsByTID(list) + `,
		mine AS (
		    SELECT o.id, o.sink_id, o.dedup_key, u.state FROM u JOIN switchboard.outbox o ON o.ctid = u.tid
		    WHERE u.state IN ('pending', 'held') AND o.claimed_by = $6 AND o.claim_token = u.token
		), ` + absorbRepeats("mine", "$8") + `
		UPDATE switchboard.outbox SET state = u.state, last_class = coalesce(nullif(u.class, ''), last_class),
		       due_at = coalesce(u.due, due_at),
		       delivered_count = CASE WHEN u.state = 'delivered' THEN count ELSE delivered_count END,
		       had_partial = had_partial OR u.class = 'partial',
		       payload = CASE WHEN u.finished IS NULL THEN ` + absorbedPayload("$8", "$9") + ` ELSE ` + finishedPayload + ` END,
		       ` + absorbedSet("$8", "$9") + `,
		       attempts = greatest(outbox.attempts, u.attempt),
		       first_attempt_at = coalesce(outbox.first_attempt_at, u.sent_at),
		       finished_at = u.finished, claimed_by = NULL, claim_expires_at = NULL, claim_token = NULL
		FROM u LEFT JOIN extra ON extra.keep = u.id
		WHERE outbox.ctid = u.tid AND outbox.claimed_by = $6 AND outbox.claim_token = u.token
		RETURNING outbox.id`
}

// rowOutcomes gathers the rows and outcomes of finishRowsSQL.
type rowOutcomes struct {
	ids, tokens []int64
	// recs are the records of the attempts whose outcomes these are (0
	// for an outcome reached without an attempt).
	recs            []int64
	states, classes []string
	dues, finished  []*time.Time
}

// add gives rows the outcome o, reached at now by the attempt whose record
// is rec (0: none).
func (r *rowOutcomes) add(rows []Claimed, rec int64, o RowOutcome, now time.Time) {
	var finishedAt *time.Time
	if o.State == "delivered" || o.State == "partial" || o.State == "undeliverable" {
		finishedAt = &now
	}
	for _, row := range rows {
		r.ids = append(r.ids, row.ID)
		r.tokens = append(r.tokens, row.Token)
		r.recs = append(r.recs, rec)
		r.states = append(r.states, o.State)
		r.classes = append(r.classes, o.Class)
		r.dues = append(r.dues, nullTime(o.DueAt))
		r.finished = append(r.finished, finishedAt)
	}
}

// without returns the entries of r whose rows are not among ids.
func (r *rowOutcomes) without(ids []int64) rowOutcomes {
	if len(ids) == len(r.ids) {
		return rowOutcomes{} // each row at most once in r
	}
	skip := make(map[int64]bool, len(ids))
	for _, id := range ids {
		skip[id] = true
	}
	var out rowOutcomes
	for i, id := range r.ids {
		if !skip[id] {
			out.ids = append(out.ids, id)
			out.tokens = append(out.tokens, r.tokens[i])
			out.recs = append(out.recs, r.recs[i])
			out.states = append(out.states, r.states[i])
			out.classes = append(out.classes, r.classes[i])
			out.dues = append(out.dues, r.dues[i])
			out.finished = append(out.finished, r.finished[i])
		}
	}
	return out
}

func (r *rowOutcomes) args(instance string, rep Replacements) []any {
	by, of := rep.args()
	return []any{nonNilIDs(r.ids), r.states, r.classes, r.dues, r.finished, instance, nonNilIDs(r.tokens), by, of, nonNilIDs(r.recs)}
}

func nonNilIDs(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// RescheduleHeld moves the due time of a sink's held rows to when its next
// token returns; a row whose own retry falls due later keeps its time.
func RescheduleHeld(ctx context.Context, db DBTX, sinkID int64, due time.Time) (int, error) {
	tag, err := db.Exec(ctx, `UPDATE switchboard.outbox SET due_at = greatest(due_at, $2) WHERE sink_id = $1 AND state = 'held'`, sinkID, due)
	if err != nil {
		return 0, fmt.Errorf("error rescheduling held rows of sink %d: %w", sinkID, err)
	}
	return int(tag.RowsAffected()), nil
}

// FinishHeld ends every held row of a sink with one outcome (its sink can
// no longer be used), clearing their payloads.
func FinishHeld(ctx context.Context, db DBTX, sinkID int64, o RowOutcome, now time.Time) ([]FinishedRow, error) {
	rows, err := collectFinishedRows(db.Query(ctx, `
		UPDATE switchboard.outbox SET state = $2, last_class = nullif($3, ''), payload = `+finishedPayload+`, finished_at = $4
		WHERE sink_id = $1 AND state = 'held'
		RETURNING id, coalesce(last_class, '')`, sinkID, o.State, o.Class, now))
	if err != nil {
		return nil, fmt.Errorf("error finishing held rows of sink %d: %w", sinkID, err)
	}
	return rows, nil
}

// FinishedRow is a row a statement finished, with its last error class.
type FinishedRow struct {
	ID    int64
	Class string
}

func collectFinishedRows(rows pgx.Rows, err error) ([]FinishedRow, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (FinishedRow, error) {
		var f FinishedRow
		return f, r.Scan(&f.ID, &f.Class)
	})
}

// RestoreClaim gives a row this instance claimed again (its claim had
// expired while a copy of it was still queued here) back the token of the
// claim that copy carries, so that the copy's statements find it; the new
// claim's later expiry stays. It reports whether the row was changed.
func RestoreClaim(ctx context.Context, db DBTX, row Claimed, token int64, instance string) (bool, error) {
	tag, err := db.Exec(ctx, `UPDATE switchboard.outbox SET claim_token = $3 WHERE id = $1 AND claimed_by = $4 AND claim_token = $2`,
		row.ID, row.Token, token, instance)
	if err != nil {
		return false, fmt.Errorf("error restoring the claim of row %d: %w", row.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}
