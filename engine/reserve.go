package engine

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard/notify/actors"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// Group reservation. Every sink actor asks the reserver for a token before
// it sends, and the reserver answers the questions of all actors waiting
// at that moment in one transaction: it locks their sinks in id order,
// reads each one's budget from the delivery records, decides in order
// which rows get a token (and which are held, or end without a send), and
// writes the "sending" records, in a handful of statements whatever the
// number of sinks. One group is in flight at a time: while it commits,
// the next one gathers, so a busy engine reserves for hundreds of actors
// in one transaction, and an actor alone pays for one. Budgets stay exact
// across instances: a sink's row is locked while its tokens are counted
// and spent.
//
// A sink whose row another transaction holds (another instance's group, a
// coalesced message, an edit) is skipped, not waited for: its request
// waits for the next group, and no group, and no other sink, waits for
// one sink.

// groupMax bounds the rows of one group reservation: the actors' capacity.
const groupMax = 1024

// groupTimeout bounds one group reservation's transaction.
const groupTimeout = 10 * time.Second

// busyRetry is how soon a request whose sink was locked elsewhere is tried
// again when no other request comes; while every request of a group finds
// its sink locked, the wait doubles, up to busyRetryMax.
const (
	busyRetry    = 5 * time.Millisecond
	busyRetryMax = 500 * time.Millisecond
)

// groupTries is how often a group whose transaction failed on a
// transient error (deadlock, serialization failure) is tried.
const groupTries = 3

// errStopping answers a request the reserver did not take before it
// stopped.
var errStopping = errors.New("the engine is stopping")

// errFenced answers a request whose attempt did not start because this
// instance's heartbeat no longer lets it dispatch (store.DispatchFence):
// the row stays claimed, and is tried again after the next beat.
var errFenced = errors.New("this instance's heartbeat has lapsed: no attempt starts until it beats again")

// reserved is the reserver's answer for one row.
type reserved struct {
	// res is set (res.rows not empty) when the row's attempt began: send it.
	res     reservation
	outcome actors.Outcome
	// final is set when the row ended without a send (at its attempt cap,
	// or its sink can no longer be used); held when it waits for a token.
	final *store.RowOutcome
	held  bool
	// gone is set when there is nothing to do: the sink was deleted, or
	// this instance no longer holds the row.
	gone string
	// busy is set when the sink's row was locked elsewhere: the request
	// waits for the next group.
	busy bool
	err  error
}

type reserveReq struct {
	ctx context.Context
	row store.OutboxRow
	// slot is where the answer goes; answered is told once it is there,
	// shared by the requests of one reserve call: one small channel a
	// step rather than one the size of an answer a row.
	slot     *reserved
	answered chan<- struct{}
}

// answer gives q its answer.
func (q *reserveReq) answer(r reserved) {
	*q.slot = r
	q.answered <- struct{}{}
}

// reserver gathers the actors' requests into groups. It is a service of
// the engine's tree that outlives the actors' stop.
type reserver struct {
	e        *Engine
	reqs     chan []*reserveReq // an actor's rows, asked for together
	done     chan struct{}      // closed when run has returned after the stop
	doneOnce sync.Once
}

func newReserver(e *Engine) *reserver {
	return &reserver{e: e, reqs: make(chan []*reserveReq), done: make(chan struct{})}
}

// reserve asks for the reservations of rows (one sink's, in order) in one
// group, and waits for the group's answer: out[i] answers rows[i]. When
// attempts did not start because this instance's heartbeat had lapsed
// (errFenced), it asks for a beat, waits for one and asks again for those
// rows: they keep their place, and nothing was sent.
func (r *reserver) reserve(ctx context.Context, rows []store.OutboxRow) []reserved {
	out := make([]reserved, len(rows))
	ask := make([]int, len(rows)) // indexes into rows
	for i := range rows {
		ask[i] = i
	}
	stopping := func() []reserved {
		for _, i := range ask {
			out[i] = reserved{err: errStopping}
		}
		return out
	}
	for {
		beaten := r.e.beats.waiter()
		reqs := make([]reserveReq, len(ask))
		qs := make([]*reserveReq, len(ask))
		answered := make(chan struct{}, len(ask))
		for k, i := range ask {
			reqs[k] = reserveReq{ctx: ctx, row: rows[i], slot: &out[i], answered: answered}
			qs[k] = &reqs[k]
		}
		select {
		case r.reqs <- qs:
		case <-r.done:
			return stopping()
		}
		for range ask {
			<-answered // run answers every request it took
		}
		fenced := ask[:0:0]
		for _, i := range ask {
			if errors.Is(out[i].err, errFenced) {
				fenced = append(fenced, i)
			}
		}
		if ask = fenced; len(ask) == 0 {
			return out
		}
		r.e.log.Info("attempts not started: this instance's heartbeat has lapsed; waiting for a beat",
			"sink_id", rows[0].SinkID, "rows", len(ask))
		r.e.beats.ask()
		select {
		case <-beaten:
		case <-ctx.Done():
			return stopping()
		case <-r.done:
			return stopping()
		}
	}
}

func (r *reserver) String() string { return "reserver" }

// Serve answers requests until the engine stops and its actors have
// stopped.
func (r *reserver) Serve(ctx context.Context) error {
	r.run(ctx)
	r.doneOnce.Do(func() { close(r.done) })
	return ctx.Err()
}

// run answers requests, a group at a time, until ctx ends and the actors
// have stopped (Engine.actorsGone), so that every reservation asked for
// before or during the stop is answered.
func (r *reserver) run(ctx context.Context) {
	var (
		carried []*reserveReq // requests whose sinks were locked elsewhere
		wait    = busyRetry
	)
	for {
		var (
			group []*reserveReq
			retry <-chan time.Time
			t     *time.Timer
		)
		if len(carried) > 0 {
			t = time.NewTimer(wait)
			retry = t.C
		}
		select {
		case <-r.e.actorsGone:
			for _, q := range carried {
				q.answer(reserved{err: errStopping})
			}
			return
		case qs := <-r.reqs:
			group = append(group, qs...)
		case <-retry:
		}
		if t != nil {
			t.Stop()
		}
		group = append(group, carried...)
	gather:
		for len(group) < groupMax {
			select {
			case qs := <-r.reqs:
				group = append(group, qs...)
			default:
				break gather
			}
		}
		busy := r.e.reserveGroup(ctx, group)
		if len(busy) > 0 && len(busy) == len(group) {
			wait = min(wait*2, busyRetryMax)
		} else {
			wait = busyRetry
		}
		carried = busy
	}
}

// reserveGroup answers every request of group but those whose sinks were
// locked elsewhere, which it returns.
func (e *Engine) reserveGroup(ctx context.Context, group []*reserveReq) (busy []*reserveReq) {
	live := make([]*reserveReq, 0, len(group))
	for _, q := range group {
		if err := q.ctx.Err(); err != nil {
			q.answer(reserved{err: errStopping}) // its actor is stopping: no attempt
			continue
		}
		live = append(live, q)
	}
	if len(live) == 0 {
		return
	}
	// Sinks in id order, and a sink's rows in the order they were due.
	slices.SortFunc(live, func(a, b *reserveReq) int {
		return cmp.Or(cmp.Compare(a.row.SinkID, b.row.SinkID), a.row.DueAt.Compare(b.row.DueAt), cmp.Compare(a.row.ID, b.row.ID))
	})
	var (
		out []reserved
		err error
	)
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupTimeout)
		out, err = e.reserveOnce(tctx, live)
		cancel()
		if err == nil || try == groupTries || !(transient(err) || repeatRaced(err)) {
			break
		}
	}
	for i, q := range live {
		switch {
		case err != nil:
			q.answer(reserved{err: err})
		case out[i].busy:
			busy = append(busy, q)
		default:
			q.answer(out[i])
		}
	}
	return busy
}

// repeatRaced reports the group's hold meeting, on outbox_open_key, the
// row of the same key that a recorder made open again at the same moment
// (a failed attempt of a repeat of the key going back to pending): each
// statement's snapshot missed the other's row, so neither took the other
// in. Tried again, the hold sees that row and takes it in
// (absorbRepeats); given up, every row of the group stayed claimed until
// its claim expired.
func repeatRaced(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "outbox_open_key"
}

// transient reports a failure that trying the same transaction again can
// cure.
func transient(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// sinkUse is what a group learnt of one sink.
type sinkUse struct {
	sink    store.LockedSink
	adapter sinks.Adapter
	owner   notifytype.OwnerScope
	refusal string
	tat     time.Time
	// holding is the dedup keys of the rows of the sink this group holds.
	holding map[string]bool
}

// reserveOnce is one try of a group's transaction; out[i] answers reqs[i].
// It is pipelined: one round trip begins the transaction, locks the sinks
// and rows and reads the budgets; the decisions are made here; a second
// round trip writes them and commits.
func (e *Engine) reserveOnce(ctx context.Context, reqs []*reserveReq) (out []reserved, err error) {
	sinkIDs := make([]int64, 0, len(reqs))
	for i, q := range reqs {
		if i == 0 || q.row.SinkID != reqs[i-1].row.SinkID {
			sinkIDs = append(sinkIDs, q.row.SinkID)
		}
	}
	conn, err := e.cfg.Pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	committed := false
	defer func() {
		if !committed {
			// Released inside a transaction, the pool would close the
			// connection: roll back so that it is used again.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_, _ = conn.Exec(rctx, "ROLLBACK")
			cancel()
		}
	}()

	var locked store.Locked
	b := &pgx.Batch{}
	store.QueueBeginOnHeldRows(b)
	store.QueueLockForDelivery(b, sinkIDs, &locked)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	// The time is read once the sinks are locked: read before, it could
	// predate a reservation another instance made while this one waited
	// for a lock, and refuse a token the bucket holds. A reading, when
	// one is due, goes through conn: this transaction holds a connection,
	// and waiting for another could wait for ever on a full pool.
	now, err := e.nowIn(ctx, conn)
	if err != nil {
		return nil, err
	}

	out = make([]reserved, len(reqs))
	uses := make(map[int64]*sinkUse, len(locked.Sinks))
	var (
		starts  []store.Start
		started []int // indexes into out of starts
		holds   []store.Hold
		held    []int
		capped  []store.Claimed
	)
	for i, q := range reqs {
		row, o := q.row, &out[i]
		if locked.Busy[row.SinkID] {
			o.busy = true
			continue
		}
		s, ok := locked.Sinks[row.SinkID]
		if !ok {
			o.gone = "deleted" // its rows went with it (REQ-5)
			continue
		}
		u := uses[s.ID]
		if u == nil {
			u = &sinkUse{sink: s, tat: s.TAT}
			u.adapter, u.owner, u.refusal = e.adapterFor(s.SinkForDelivery)
			uses[s.ID] = u
		}
		budget := tokenBucket{PerHour: s.PerHour, Burst: s.Burst}
		o.outcome.Budget = actors.Budget(budget)
		switch {
		case row.Attempts >= MaxAttempts:
			// Its last attempt was abandoned mid-send (D25), and the
			// claim that took the row over closed that attempt's record
			// and counted it (claimDueSQL): finish it before it could be
			// sent an eighth time.
			capped = append(capped, row.Claim())
			o.final = &store.RowOutcome{State: rowUndeliverable, Class: string(notifytype.ClassAbandoned)}
			e.log.Error("outbox row undeliverable: its last attempt was abandoned", "sink_id", s.ID,
				"event_type", row.EventType, "owner_scope", s.Owner, "class", notifytype.ClassAbandoned,
				"attempt", row.Attempts)
		case u.refusal != "":
			// The sink was disabled, or its connection no longer fits it:
			// checked on every use (REQ-2). No send, no token; the event
			// still ends in a delivery record. Rare: written at once.
			o.final = &store.RowOutcome{State: rowUndeliverable, Class: string(notifytype.ClassConfig)}
			e.log.Warn("outbox row not delivered", "sink_id", s.ID, "event_type", row.EventType,
				"owner_scope", s.Owner, "class", notifytype.ClassConfig, "reason", u.refusal)
			if err := recordRefusal(ctx, conn, s.SinkForDelivery, row, e.instance, now); errors.Is(err, store.ErrClaimLost) {
				// Its claim expired and another instance took it: nothing
				// is written for a row another instance holds.
				o.final, o.gone = nil, "lost"
				continue
			} else if err != nil {
				return nil, err
			}
			if err := store.FinishRows(ctx, conn, []store.Claimed{row.Claim()}, e.instance, *o.final, now, e.kinds.replaces); err != nil {
				return nil, err
			}
		default:
			ok, tat, next := budget.Reserve(u.tat, now)
			if !ok && row.DedupKey != nil && u.holding[*row.DedupKey] {
				// A row of the same key is held by this group: held in
				// the same statement, both would be open at once
				// (outbox_open_key) and the statement would fail for the
				// whole group. The next group holds this one, which
				// takes the first in (absorbRepeats).
				o.busy = true
				continue
			}
			if !ok {
				if row.DedupKey != nil {
					if u.holding == nil {
						u.holding = map[string]bool{}
					}
					u.holding[*row.DedupKey] = true
				}
				o.held, o.outcome.HeldUntil, o.outcome.TAT = true, next, u.tat
				holds, held = append(holds, store.Hold{Row: row.Claim(), SinkID: s.ID, Until: next}), append(held, i)
				continue
			}
			u.tat, o.outcome.TAT = tat, tat
			starts, started = append(starts, store.Start{Row: row.Claim(), TAT: tat}), append(started, i)
		}
	}

	var (
		heldBy      = map[int64]int{}
		startedAs   []store.StartedRow
		mayDispatch bool
	)
	b = &pgx.Batch{}
	if len(capped) > 0 {
		store.QueueFinishRows(b, capped, e.instance, store.RowOutcome{State: rowUndeliverable, Class: string(notifytype.ClassAbandoned)}, now, e.kinds.replaces)
	}
	if len(holds) > 0 {
		store.QueueHoldRows(b, holds, e.instance, heldBy, e.kinds.replaces)
	}
	if len(starts) > 0 {
		// Read first so that a start refused by the fence is told from a
		// claim lost; the start statement checks the fence itself.
		store.QueueMayDispatch(b, e.instance, e.statementNow(), &mayDispatch)
		store.QueueStartAttempts(b, starts, e.instance, now, e.cfg.ClaimTTL, MaxAttempts, &startedAs, e.statementNow())
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	committed = true

	for _, i := range held {
		out[i].outcome.Held = heldBy[reqs[i].row.SinkID]
	}
	byID := make(map[int64]store.StartedRow, len(startedAs))
	for _, r := range startedAs {
		byID[r.ID] = r
	}
	for _, i := range started {
		r, ok := byID[reqs[i].row.ID]
		switch {
		case !ok && !mayDispatch: // the heartbeat lapsed: nothing started
			out[i] = reserved{err: errFenced}
			continue
		case !ok: // its claim expired and another instance took it
			out[i] = reserved{gone: "lost"}
			continue
		}
		row := reqs[i].row
		if row.Abandoned {
			e.log.Warn("redelivering an abandoned attempt", "sink_id", row.SinkID, "event_type", row.EventType,
				"owner_scope", row.Owner, "class", notifytype.ClassAbandoned, "attempt", row.Attempts)
		}
		row.Payload, row.Attempts, row.FirstAttemptAt = r.Payload, r.Attempts, r.FirstAttemptAt
		u := uses[row.SinkID]
		out[i].res = reservation{
			sink: u.sink.SinkForDelivery, owner: u.owner, adapter: u.adapter, rows: []store.OutboxRow{row},
			recordID: r.RecordID, budget: tokenBucket{PerHour: u.sink.PerHour, Burst: u.sink.Burst}, tat: out[i].outcome.TAT,
		}
	}
	return out, nil
}
