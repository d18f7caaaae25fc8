package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/actors"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/apprise"
	"github.com/switchboard/notify/sinks/gotify"
	"github.com/switchboard/notify/store"
)

// Retry schedule (D10).
const (
	// MaxAttempts is how often one row is attempted before it is recorded
	// undeliverable.
	MaxAttempts = 7
	// RetryBase is the first retry's delay; each later one doubles.
	RetryBase = 30 * time.Second
)

// RetryDelay is when attempt k (1..MaxAttempts) is due after the first:
// 30 s × (2^(k−1) − 1), so 0, 30, 90, 210, 450, 930 and 1890 s (D10).
func RetryDelay(attempt int) time.Duration {
	if attempt <= 1 {
		return 0
	}
	return RetryBase * time.Duration(1<<(attempt-1)-1)
}

// Attempt describes one finished delivery attempt, for Config.OnAttempt.
// It carries no message text, URL or secret.
type Attempt struct {
	SinkID    int64
	Owner     notifytype.OwnerScope
	EventType notifytype.EventType
	// Rows are the outbox rows the attempt was for: one, or every held
	// row of a coalesced message.
	Rows    []int64
	Attempt int
	// State is what the rows became: delivered, pending (a retry is
	// scheduled), held, partial or undeliverable.
	State  string
	Class  notifytype.ErrorClass
	Status int
}

// Row states an attempt can leave.
const (
	rowPending       = "pending"
	rowHeld          = "held"
	rowDelivered     = "delivered"
	rowPartial       = "partial"
	rowUndeliverable = "undeliverable"
)

// releaseTimeout bounds giving back a row the engine stops before
// attempting.
const releaseTimeout = 5 * time.Second

// eventCoalesced is the event type recorded for a coalesced message.
const eventCoalesced = "coalesced"

// worker does the sink actors' work (actors.Worker): the budget
// reservation, the send and the record, each reservation one transaction
// that locks the sink's row.
type worker struct{ e *Engine }

var _ actors.Worker = worker{}

// reservation is what a successful reservation transaction hands to the
// send.
type reservation struct {
	sink     store.SinkForDelivery
	owner    notifytype.OwnerScope
	adapter  sinks.Adapter
	rows     []store.OutboxRow
	recordID int64
	budget   tokenBucket
	tat      time.Time
}

// Deliver attempts claimed rows of one sink, in order: the reserver
// answers for all of them at once whether each may be sent now (in a group
// with every other actor's rows, see reserve.go), the adapter sends those
// that may, one after another, and the recorder writes how each ended
// (record.go). A row whose attempt began but whose turn comes after ctx
// ended, or so long after the reservation that its claim could expire
// before its send did (mayWait), is given back unsent: as if it had never
// been attempted, its token back in the budget.
//
// Where half a claim is shorter than one send's timeout (a ClaimTTL under
// 20 s), no row after the first could ever be sent, and every group would
// send one row and give the rest back: the rows go one group each.
func (w worker) Deliver(ctx context.Context, rows []store.OutboxRow) actors.Outcome {
	if len(rows) == 1 || w.e.cfg.ClaimTTL/2 >= sinks.DefaultTimeout {
		return w.deliverGroup(ctx, rows)
	}
	next := 0 // rows[next:] have not reached deliverGroup
	defer func() {
		// A panic out of a row's step (deliverGroup hands its own rows
		// back): the rows after it are forgotten too, and taken again
		// when their claims expire.
		w.e.handed.done(store.Claims(rows[next:])...)
	}()
	var out actors.Outcome
	for next < len(rows) {
		next++
		out = then(out, w.deliverGroup(ctx, rows[next-1:next]))
	}
	return out
}

// deliverGroup attempts rows with one reservation (Deliver).
func (w worker) deliverGroup(ctx context.Context, rows []store.OutboxRow) actors.Outcome {
	e := w.e
	var (
		out     actors.Outcome
		sent    bool
		next    int               // rows[next:] have not reached a case below
		release []store.OutboxRow // not attempted: the engine stops
		unsent  []store.Unsent    // attempt begun, not sent
		ended   bool
	)
	defer func() {
		if ended {
			return
		}
		// A panic out of a row's step (deliverOne hands its own row back):
		// the rows not handled stay claimed, and are taken again when
		// their claims expire, at least once.
		left := store.Claims(append(rows[next:len(rows):len(rows)], release...))
		for _, u := range unsent {
			left = append(left, u.Row)
		}
		e.handed.done(left...)
	}()
	reservedAt := time.Now() // before the reservation: the claims are extended after it
	gs := e.reserver.reserve(ctx, rows)
	for i, row := range rows {
		next = i + 1
		g := gs[i]
		switch {
		case len(g.res.rows) > 0 && sent && !e.mayWait(ctx, reservedAt):
			// Once false, mayWait stays false: the rows after this one
			// are given back too, and the order holds.
			unsent = append(unsent, store.Unsent{Row: row.Claim(), RecordID: g.res.recordID})
			continue
		case errors.Is(g.err, errStopping):
			release = append(release, row)
			continue
		}
		o := w.deliverOne(ctx, row, g)
		sent = sent || len(g.res.rows) > 0
		out = then(out, o)
	}
	ended = true
	if len(release) > 0 {
		// The engine stops before these rows were attempted: give them
		// back at once rather than after their claims expire.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		w.Release(rctx, release)
		cancel()
	}
	if len(unsent) > 0 && w.giveBack(ctx, unsent) > 0 {
		// The rows queued behind them were claimed later, and would go
		// out ahead of them: the actor gives those back too.
		out.GaveBack = true
	}
	return out
}

// then is the sink's outcome after out's rows and then o's: the earliest
// hold, the most rows held, the last class and the last budget read.
func then(out, o actors.Outcome) actors.Outcome {
	if !o.HeldUntil.IsZero() && (out.HeldUntil.IsZero() || o.HeldUntil.Before(out.HeldUntil)) {
		out.HeldUntil = o.HeldUntil
	}
	out.Held = max(out.Held, o.Held)
	out.Class = o.Class
	if !o.TAT.IsZero() {
		out.TAT, out.Budget = o.TAT, o.Budget
	}
	return out
}

// mayWait reports whether a row reserved at reservedAt may still be sent
// after the sends before it: while the engine is not stopping, and while
// one more attempt's HTTP timeout ends within half the claim's time, so
// that no other instance can take the row (its claim expired) while this
// one sends it.
func (e *Engine) mayWait(ctx context.Context, reservedAt time.Time) bool {
	return ctx.Err() == nil && time.Since(reservedAt)+sinks.DefaultTimeout <= e.cfg.ClaimTTL/2
}

// giveBack gives back rows reserved and not sent (store.GiveBackUnsent),
// and returns how many it gave back. A row it cannot give back keeps its
// "sending" record and its claim: it is taken again when the claim
// expires, its attempt closed as abandoned (D25), counted but never sent
// twice.
func (w worker) giveBack(ctx context.Context, unsent []store.Unsent) int {
	e := w.e
	claims := make([]store.Claimed, len(unsent))
	for i, u := range unsent {
		claims[i] = u.Row
	}
	defer e.handed.done(claims...)
	// Within the actors' own stop bound: the statement deletes the rows'
	// "sending" records, and may wait as long as the recorder's writes of
	// the sends before them do (faults row 9b: the records locked across
	// the stop for 6 s).
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.ActorStopTimeout)
	defer cancel()
	n, err := store.GiveBackUnsent(rctx, e.cfg.Pool, unsent, e.instance, e.kinds.replaces)
	if err != nil {
		if ctx.Err() != nil {
			// The stop gave them back: it reports them, as rows it could
			// not release. (Given back mid-run, on a database that fails,
			// they are like any row whose attempt began and whose outcome
			// could not be written.)
			e.releaseFailed.Add(int64(len(unsent)))
		}
		e.log.Error("error giving back reserved rows not sent; they are attempted again when their claims expire",
			"rows", len(unsent), "error", err)
		return 0
	}
	e.log.Info("gave back reserved rows not sent", "rows", n)
	return n
}

// deliverOne ends one row's step given its reservation g: it sends a row
// whose attempt began, and reports or writes what became of any other.
func (w worker) deliverOne(ctx context.Context, row store.OutboxRow, g reserved) actors.Outcome {
	e := w.e
	recording := false // the recorder forgets the row once its outcome is written
	defer func() {
		if !recording {
			e.handed.done(row.Claim())
		}
	}()
	outcome := g.outcome
	switch {
	case g.err != nil:
		// The database failed us: leave the row claimed; it is attempted
		// again when its claim expires.
		e.log.Error("error reserving delivery", "sink_id", row.SinkID, "event_type", row.EventType,
			"owner_scope", row.Owner, "error", g.err)
		return outcome
	case g.gone == "lost":
		e.log.Warn("outbox row claim lost before its attempt", "sink_id", row.SinkID, "row_id", row.ID)
		return outcome
	case g.gone != "":
		return outcome
	case g.final != nil:
		class := notifytype.ErrorClass(g.final.Class)
		if g.final.State == rowUndeliverable {
			e.warnUndeliverable(row.SinkID, []int64{row.ID}, class)
		}
		owner, _ := notifytype.ParseOwnerScope(row.Owner)
		e.recorder.report(Attempt{SinkID: row.SinkID, Owner: owner, EventType: notifytype.EventType(row.EventType), Rows: []int64{row.ID},
			Attempt: row.Attempts, State: g.final.State, Class: class})
		outcome.Class = class
		return outcome
	case g.held:
		e.recorder.report(Attempt{SinkID: row.SinkID, EventType: notifytype.EventType(row.EventType), Rows: []int64{row.ID},
			Attempt: row.Attempts, State: rowHeld})
		return outcome
	}

	res := g.res
	r := res.rows[0]
	msg := e.render(r)
	result := e.send(ctx, res.adapter, msg)
	next := nextStep(r, result, e.nowOrLocal(ctx))
	outcome.Class = result.Class
	recording = true
	e.finish(ctx, res, []store.RowOutcome{next}, result, notifytype.EventType(r.EventType))
	return outcome
}

// Flush sends every held row of a sink as one coalesced message, when a
// token is there (D9).
func (w worker) Flush(ctx context.Context, sinkID int64) actors.Outcome {
	e := w.e
	var (
		res           reservation
		outcome       actors.Outcome
		undeliverable []store.FinishedRow // written undeliverable, once committed
	)
	now, err := e.now(ctx)
	if err != nil {
		e.log.Error("error reserving coalesced delivery", "sink_id", sinkID, "error", err)
		return outcome
	}
	err = pgx.BeginFunc(ctx, e.cfg.Pool, func(tx pgx.Tx) error {
		s, err := store.LockSinkForDelivery(ctx, tx, sinkID)
		if err != nil {
			return err
		}
		if now, err = e.nowIn(ctx, tx); err != nil { // after the lock, as above; through tx, which holds a connection
			return err
		}
		budget := tokenBucket{PerHour: s.PerHour, Burst: s.Burst}
		outcome.Budget = actors.Budget(budget)
		adapter, owner, refusal := e.adapterFor(s)
		if refusal != "" {
			finished, err := store.FinishHeld(ctx, tx, s.ID, store.RowOutcome{State: rowUndeliverable, Class: string(notifytype.ClassConfig)}, now)
			undeliverable = append(undeliverable, finished...)
			return err
		}
		tat, err := store.BudgetTAT(ctx, tx, s.ID)
		if err != nil {
			return err
		}
		ok, newTAT, next := budget.Reserve(tat, now)
		if !ok {
			outcome.TAT = tat
			n, err := store.RescheduleHeld(ctx, tx, s.ID, next)
			if n > 0 {
				outcome.HeldUntil, outcome.Held = next, n
			}
			return err
		}
		capped, err := store.FinishHeldAtCap(ctx, tx, s.ID, MaxAttempts, now)
		if err != nil {
			return err
		}
		if len(capped) > 0 {
			e.log.Error("held outbox rows undeliverable: they had their last attempt", "sink_id", s.ID,
				"owner_scope", s.Owner, "rows", len(capped))
			undeliverable = append(undeliverable, capped...)
		}
		rows, err := store.ClaimHeld(ctx, tx, s.ID, e.instance, now, e.cfg.ClaimTTL, MaxAttempts, e.statementNow())
		if err != nil || len(rows) == 0 {
			return err // nothing to flush now (none held, or all behind queued or pending rows): spend no token
		}
		if closed, err := store.CloseAbandoned(ctx, tx, store.Claims(rows), e.instance, now); err != nil {
			return err
		} else if len(closed) > 0 {
			e.log.Warn("redelivering an abandoned attempt", "sink_id", s.ID, "event_type", eventCoalesced,
				"owner_scope", s.Owner, "class", notifytype.ClassAbandoned, "rows", len(rows))
		}
		outcome.TAT = newTAT
		rec := store.DeliveryRecord{OutboxID: rows[0].ID, EventType: rows[0].EventType}
		if len(rows) > 1 {
			rec = store.DeliveryRecord{EventType: eventCoalesced}
		}
		recID, err := store.InsertDeliveryRecord(ctx, tx, store.DeliveryRecord{
			SinkID: s.ID, Owner: s.Owner, OutboxID: rec.OutboxID,
			EventType: rec.EventType, Attempt: maxAttempts(rows), CountsBudget: true, CoalescedRows: len(rows),
			SentAt: now, BudgetTAT: &newTAT, Rows: store.Claims(rows), Instance: e.instance,
		})
		if err != nil {
			return err
		}
		res = reservation{sink: s, owner: owner, adapter: adapter, rows: rows, recordID: recID, budget: budget, tat: newTAT}
		return nil
	})
	if err == nil {
		e.warnFinished(sinkID, undeliverable)
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return outcome
	case err != nil:
		e.log.Error("error reserving coalesced delivery", "sink_id", sinkID, "error", err)
		return outcome
	case len(res.rows) == 0:
		return outcome
	}
	for _, r := range res.rows {
		e.handed.set(r) // until the recorder has written the outcome
	}

	var msg sinks.Message
	if len(res.rows) == 1 {
		msg = e.render(res.rows[0])
	} else {
		msg = e.renderCoalesced(res.owner, res.rows)
	}
	result := e.send(ctx, res.adapter, msg)
	// Each row's outcome is its own (its attempts, its schedule): a row at
	// its last attempt ends undeliverable alone, and the others retry when
	// their own retries fall due.
	at := e.nowOrLocal(ctx)
	nexts := make([]store.RowOutcome, len(res.rows))
	for i, r := range res.rows {
		next := nextStep(r, result, at)
		if next.State == rowPending {
			// A failed coalesced message stays coalesced: its rows wait,
			// held, for their retries and go out together again.
			next.State = rowHeld
		}
		if next.State == rowHeld {
			if outcome.Held == 0 || next.DueAt.Before(outcome.HeldUntil) {
				outcome.HeldUntil = next.DueAt
			}
			outcome.Held++
		}
		nexts[i] = next
	}
	outcome.Class = result.Class
	e.finish(ctx, res, nexts, result, eventCoalesced)
	return outcome
}

// Release gives back rows queued in a stopping actor's mailbox: pending
// again, due as they were, unclaimed.
func (w worker) Release(ctx context.Context, rows []store.OutboxRow) {
	defer w.e.handed.done(store.Claims(rows)...)
	n, err := store.ReleaseRows(ctx, w.e.cfg.Pool, store.Claims(rows), w.e.instance, w.e.kinds.replaces)
	if err != nil {
		w.e.releaseFailed.Add(int64(len(rows))) // the stop reports them
		w.e.log.Error("error releasing queued rows; they wait for their claim to expire",
			"rows", len(rows), "error", err)
		return
	}
	w.e.log.Info("released queued rows", "rows", n)
}

func rowIDs(rows []store.OutboxRow) []int64 {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

// recordRefusal writes the delivery record of a row its sink can no longer
// take (disabled, or its connection no longer fits): undeliverable, class
// config, not counted against the budget (nothing was sent). It writes
// nothing, and returns store.ErrClaimLost, for a row instance no longer
// holds under the row's claim.
func recordRefusal(ctx context.Context, tx store.DBTX, s store.SinkForDelivery, row store.OutboxRow, instance string, now time.Time) error {
	id, err := store.InsertDeliveryRecord(ctx, tx, store.DeliveryRecord{
		SinkID: s.ID, Owner: s.Owner, OutboxID: row.ID, EventType: row.EventType, Attempt: row.Attempts + 1,
		SentAt: now, Rows: []store.Claimed{row.Claim()}, Instance: instance,
	})
	if err != nil {
		return err
	}
	return store.FinishDeliveryRecord(ctx, tx, id, rowUndeliverable, string(notifytype.ClassConfig), 0, now)
}

func maxAttempts(rows []store.OutboxRow) int {
	n := 0
	for _, r := range rows {
		n = max(n, r.Attempts)
	}
	return n
}

// adapterFor builds the sink's adapter (see buildAdapter), wrapped by the
// test hook when one is set.
func (e *Engine) adapterFor(s store.SinkForDelivery) (sinks.Adapter, notifytype.OwnerScope, string) {
	a, owner, refusal := e.buildAdapter(s)
	if a != nil && e.wrapAdapter != nil {
		a = e.wrapAdapter(s.ID, a)
	}
	return a, owner, refusal
}

// buildAdapter builds the sink's adapter, or says why the sink may not be
// used now: disabled, or its connection of another scope or kind (checked
// on every use, REQ-2), or a secret that does not open.
func (e *Engine) buildAdapter(s store.SinkForDelivery) (sinks.Adapter, notifytype.OwnerScope, string) {
	owner, err := notifytype.ParseOwnerScope(s.Owner)
	switch {
	case err != nil:
		return nil, owner, "the sink's owner scope is unreadable"
	case !s.Enabled:
		return nil, owner, "the sink is disabled"
	case s.ConnectionOwner != s.Owner || s.ConnectionKind != s.Kind:
		return nil, owner, "the sink's connection is of another owner scope or kind"
	}
	var secret notifytype.Secret
	if s.SealedSecret != nil {
		if secret, err = e.vlt.Open(s.ConnectionID, owner, s.SealedSecret); err != nil {
			return nil, owner, "the connection's secret does not open"
		}
	}
	a, refusal := e.newAdapter(s.Kind, s.BaseURL, secret, s.Options)
	if a != nil {
		a = withRedaction(a, secret)
	}
	return a, owner, refusal
}

// newAdapter builds the adapter of a sink of kind on a connection with
// baseURL and secret, with the sink's options, or says why it may not be
// used: options or secret invalid, an Apprise URL's scheme not allowed,
// the kind unknown. Every adapter sends through the guarded client.
func (e *Engine) newAdapter(kind, baseURL string, secret notifytype.Secret, options []byte) (sinks.Adapter, string) {
	switch kind {
	case KindGotify:
		opts, err := gotify.ParseOptions(options)
		if err != nil {
			return nil, "the sink's options are invalid"
		}
		return gotify.New(gotify.Config{BaseURL: baseURL, Token: secret, Options: opts}, e.client), ""
	case KindApprise:
		opts, err := apprise.ParseOptions(options)
		if err != nil {
			return nil, "the sink's options are invalid"
		}
		var sec apprise.Secret
		if !secret.IsZero() {
			if sec, err = apprise.ParseSecret(secret.Reveal()); err != nil {
				return nil, "the connection's secret is invalid"
			}
		}
		// Checked on every use too: URLs stored before the allowlist (or
		// under a wider one) never reach the Apprise server.
		if !opts.Stateful() && apprise.CheckSchemes(sec.URLs, e.cfg.AppriseSchemesAllowed) != nil {
			return nil, "an Apprise URL's scheme is not allowed on this instance"
		}
		return apprise.New(apprise.Config{BaseURL: baseURL, Secret: sec, Options: opts, PrivateHosts: e.cfg.PrivateHosts}, e.client), ""
	}
	return nil, "the sink's kind is unknown"
}

// send runs the adapter. A send that has begun is not cut short by the
// engine stopping: the guarded client bounds it (10 s), and its outcome is
// recorded, so a graceful stop does not deliver a message twice. A panic
// is recovered into a failure of class abandoned (D25): its outcome is
// unknown, it counts against the budget and the attempts, and the row is
// retried on schedule like any other failure. The panic's value is not
// logged: it may quote what the adapter held.
func (e *Engine) send(ctx context.Context, a sinks.Adapter, msg sinks.Message) (res sinks.Result) {
	defer func() {
		if v := recover(); v != nil {
			res = sinks.Result{Class: notifytype.ClassAbandoned, Err: fmt.Errorf("the sink adapter panicked (%T)", v)}
		}
	}()
	return a.Deliver(context.WithoutCancel(ctx), msg)
}

// nextStep decides what a row becomes after an attempt (D10).
func nextStep(r store.OutboxRow, res sinks.Result, now time.Time) store.RowOutcome {
	class := res.Class
	switch {
	case res.OK():
		return store.RowOutcome{State: rowDelivered}
	case class.Final():
		return store.RowOutcome{State: rowUndeliverable, Class: string(class)}
	case class == notifytype.ClassPartial && (r.HadPartial || r.Attempts >= MaxAttempts):
		// Apprise 424 is retried once (whatever came between), then recorded
		// as a partial failure.
		return store.RowOutcome{State: rowPartial, Class: string(class)}
	case r.Attempts >= MaxAttempts:
		return store.RowOutcome{State: rowUndeliverable, Class: string(class)}
	}
	first := now
	if r.FirstAttemptAt != nil {
		first = *r.FirstAttemptAt
	}
	due := first.Add(RetryDelay(r.Attempts + 1))
	if asked := now.Add(res.RetryAfter); res.RetryAfter > 0 && asked.After(due) {
		// Retry-After is honoured only inside the schedule (D24): up to the
		// slot after this one, and the last attempt not at all.
		limit := due
		if r.Attempts+1 < MaxAttempts {
			limit = first.Add(RetryDelay(r.Attempts + 2))
		}
		due = minTime(asked, limit)
	}
	return store.RowOutcome{State: rowPending, Class: string(class), DueAt: due}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// finish hands an attempt's end to the recorder, which writes its delivery
// record and its rows and then reports it (Config.OnAttempt). nexts holds
// each row's outcome, in the order of res.rows; rows of a coalesced
// message that end differently are reported as one attempt per outcome.
func (e *Engine) finish(ctx context.Context, res reservation, nexts []store.RowOutcome, result sinks.Result, eventType notifytype.EventType) {
	status := recordStatus(nexts)
	var attempts []Attempt
	for i, r := range res.rows {
		next := nexts[i]
		k := slices.IndexFunc(attempts, func(a Attempt) bool { return a.State == next.State })
		if k < 0 {
			attempts = append(attempts, Attempt{
				SinkID: res.sink.ID, Owner: res.owner, EventType: eventType, State: next.State, Class: result.Class, Status: result.Status,
			})
			k = len(attempts) - 1
		}
		attempts[k].Rows = append(attempts[k].Rows, r.ID)
		attempts[k].Attempt = max(attempts[k].Attempt, r.Attempts)
	}
	if !result.OK() {
		for _, a := range attempts {
			level := slog.LevelWarn
			if a.State != rowPending && a.State != rowHeld {
				level = slog.LevelError
			}
			e.log.Log(ctx, level, "delivery failed", "sink_id", res.sink.ID, "event_type", eventType,
				"owner_scope", res.sink.Owner, "class", result.Class, "http_status", result.Status,
				"attempt", a.Attempt, "rows", len(a.Rows), "next", a.State, "error", result.Err)
		}
	}
	f := store.Finished{
		RecordID: res.recordID, Rows: store.Claims(res.rows), Status: status, Class: string(result.Class), HTTPStatus: result.Status,
		Outcome: nexts[0], At: e.nowOrLocal(ctx),
	}
	if len(attempts) > 1 {
		f.Outcomes = nexts
	}
	e.recorder.record(finishedAttempt{f: f, attempt: attempts[0], more: attempts[1:]})
}

// recordStatus is the status of an attempt's delivery record, given what
// its rows became: delivered, partial or undeliverable when every row
// became that, and failed when any row is tried again.
func recordStatus(nexts []store.RowOutcome) string {
	status := ""
	for _, n := range nexts {
		s := n.State
		if s == rowPending || s == rowHeld {
			return "failed"
		}
		if status != "" && status != s {
			s = rowUndeliverable
		}
		status = s
	}
	return status
}

// warnUndeliverable logs each row recorded undeliverable, once written:
// the row and its sink by id and the error class, never what the row or
// the sink holds.
func (e *Engine) warnUndeliverable(sinkID int64, rows []int64, class notifytype.ErrorClass) {
	for _, id := range rows {
		e.log.Warn("outbox row undeliverable", "sink_id", sinkID, "row_id", id, "class", class)
	}
}

// warnFinished is warnUndeliverable for rows with their own classes.
func (e *Engine) warnFinished(sinkID int64, rows []store.FinishedRow) {
	for _, r := range rows {
		e.warnUndeliverable(sinkID, []int64{r.ID}, notifytype.ErrorClass(r.Class))
	}
}

func (e *Engine) observe(a Attempt) {
	if e.cfg.OnAttempt != nil {
		e.cfg.OnAttempt(a)
	}
}
