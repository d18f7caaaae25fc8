package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jonboulle/clockwork"

	"github.com/switchboard/notify/actors"
	"github.com/switchboard/notify/store"
)

// notifyChannel is the LISTEN/NOTIFY channel Emit wakes claimers on.
const notifyChannel = "switchboard_outbox"

// claimBatch is the most rows one claim statement takes.
const claimBatch = 256

// claimPerSink caps the rows of one sink in one claim: half a mailbox.
const claimPerSink = actors.MailboxSizeDefault / 2

// newSinksPerClaim is how many sinks without an actor with room one claim
// is sized for (claimLimit): sinks with no actor yet, or whose actor has
// gone idle.
const newSinksPerClaim = 2

// claimLimit is how many rows one claim takes at most: what the actors
// can queue, at most claimBatch, and at most half a mailbox for each
// actor with room and for newSinksPerClaim sinks more.
//
// A claim reads four candidates a row it may take, in due order, past the
// rows of the sinks it skips (full mailboxes, sinks other instances hold),
// to find the sinks whose rows fell due first; it takes up to half a
// mailbox of each, sink by sink (store.ClaimDue). Sized by the actors'
// room alone, a claim with most sinks' mailboxes full read thousands of
// their rows to take a few dozen. Sized by the sinks that can take rows,
// it reads a few times what it takes. A claim that takes all it was sized
// for is followed by another in the same cycle, so a cycle still takes
// every row there is room for.
func claimLimit(r actors.Room) int {
	return min(r.Free, claimBatch, claimPerSink*(r.Open+newSinksPerClaim))
}

// claimer is the one goroutine per instance that claims due rows (FOR
// UPDATE SKIP LOCKED, never more than the actors can take) and hands them
// to the sink actors. It wakes on a notification from Emit, when an actor
// frees room, when the next known row falls due, and on a poll.
type claimer struct {
	e    *Engine
	wake chan struct{}
	// passing serialises passes: Serve's, and claimOnce's.
	passing sync.Mutex
	// expiredAt is when the claimer last looked for rows whose claim
	// expired (wall time).
	expiredAt time.Time
	// expiredSearches counts the claims that looked for them (tests).
	expiredSearches atomic.Int64
	// armed is the sweep Serve waits for: sweepNone, sweepFirst or
	// sweepLate (tests).
	armed atomic.Int32
	// notified counts the notifications the listener passed on (tests).
	notified atomic.Int64
	// events says that committed events may be waiting to be fanned out:
	// set at the start, by a notification (pokeEvents), by the poll and
	// by the sweep after a burst of notifications. A pass fans out events
	// only then; woken because rows fell due, an actor took a row or the
	// fan-out service committed rows, it claims without the fan-out's
	// statement, which costs about a millisecond to plan and run when it
	// finds nothing (docs/BENCHMARKS.md, session 19).
	events atomic.Bool
}

// lateSweep is how many debounce windows after the first sweep the
// claimer looks again for events whose emits skipped their notification:
// an emit decides inside the window, but its caller's transaction commits
// when the caller commits, which can be after the first sweep (a busy
// machine, a caller with more to do). Past the late sweep, the poll finds
// them.
const lateSweep = 4

// The sweeps Serve can wait for (claimer.armed).
const (
	sweepNone int32 = iota
	sweepFirst
	sweepLate
)

// expiredEvery is how often the claimer looks for rows whose claim expired
// (their instance died): far below any claim's lifetime (15 s at least).
const expiredEvery = time.Second

func newClaimer(e *Engine) *claimer {
	c := &claimer{e: e, wake: make(chan struct{}, 1)}
	c.events.Store(true)
	return c
}

func (c *claimer) String() string { return "claimer" }

// wakeUp sends on ch, which has room for one wake, without blocking: a
// wake already pending covers this one.
func wakeUp(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// poke wakes the claimer without blocking.
func (c *claimer) poke() { wakeUp(c.wake) }

// pokeEvents wakes the claimer to fan out committed events, and claim.
func (c *claimer) pokeEvents() {
	c.events.Store(true)
	c.poke()
}

// Serve claims until ctx ends.
func (c *claimer) Serve(ctx context.Context) error {
	poll := time.NewTicker(c.e.cfg.PollInterval)
	defer poll.Stop()
	var (
		sweep <-chan time.Time
		// late: the sweep armed is the first after a notification, and a
		// late one follows it (lateSweeps).
		late bool
	)
	for {
		c.passing.Lock()
		next, full, err := c.cycle(ctx, nil)
		c.passing.Unlock()
		if err != nil && ctx.Err() == nil {
			c.e.log.Error("error claiming outbox rows", "error", err)
		}
		var (
			due   <-chan time.Time
			timer clockwork.Timer
		)
		if !full && !next.IsZero() {
			if wait := next.Sub(c.e.nowOrLocal(ctx)); wait > 0 {
				timer = c.e.cfg.Clock.NewTimer(wait)
				due = timer.Chan()
			}
		}
		var room <-chan struct{}
		if full {
			room = c.e.actors.RoomFreed()
		}
		select {
		case <-ctx.Done():
		case <-c.wake:
			if d := c.e.cfg.NotifyDebounce; d > 0 && c.events.Load() {
				// A notification: look again once the emits it did not
				// hear of (debounced) have had their window.
				sweep, late = time.After(d+5*time.Millisecond), true
				c.armed.Store(sweepFirst)
			}
		case <-sweep:
			sweep = nil
			c.events.Store(true)
			c.armed.Store(sweepNone)
			if late {
				// An emit that skipped its notification inside the window
				// may commit after the sweep looked (its transaction is
				// the caller's): look once more, later, before leaving it
				// to the poll.
				sweep, late = time.After(lateSweep*(c.e.cfg.NotifyDebounce+5*time.Millisecond)), false
				c.armed.Store(sweepLate)
			}
		case <-poll.C:
			c.events.Store(true)
		case <-due:
		case <-room:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// claimContext is ctx for a statement that claims rows, or that must
// follow a claim through (a claim's copy put back): a stop does not cancel
// it. A claim the database committed whose answer the stop had cut off
// would leave its rows claimed, handed to no actor and given back by
// nobody, until the claim expired (two minutes); run to its end, the claim
// hands its rows to the actors, or gives them back when the actors are
// stopping (Dispatch refuses them). recordTimeout bounds it.
func claimContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
}

// cycle fans out committed events (at most fanOutInline, leaving the rest
// to the fan-out service), claims what is due and there is room for,
// wakes the actors of sinks whose held rows have a token again, and says
// when to look next. claimed, when not nil, is told of each row claimed.
// A cycle whose first claim takes all there was room for, as most do, is
// one round trip: the held sinks and the next wake are read in the
// claim's batch, after it.
func (c *claimer) cycle(ctx context.Context, claimed func(store.OutboxRow)) (next time.Time, full bool, err error) {
	e := c.e
	now, err := e.now(ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	first := true
	// events: committed events may be waiting (claimer.events), for the
	// cycle's first claim to fan out.
	events := c.events.Swap(false)
	// wake is what the cycle's first claim read after it, in its round
	// trip (held sinks due, next wake); valid while nothing was written
	// since: a further claim, a fan-out or a row given back reads it again.
	var (
		wake      store.Wake
		wakeValid bool
	)
	for {
		if ctx.Err() != nil {
			// Stopping: claim nothing more.
			return time.Time{}, false, ctx.Err()
		}
		room := e.actors.Room()
		if room.Free == 0 {
			full = true
			break
		}
		full = len(room.Full) > 0 // due rows may be left behind: wait for room
		limit := claimLimit(room)
		p := store.ClaimParams{
			Instance: e.instance, Now: now, TTL: e.cfg.ClaimTTL,
			Limit: limit, PerSink: claimPerSink, SkipSinks: room.Full,
			SkipExpired: time.Since(c.expiredAt) < expiredEvery, Replaces: e.kinds.replaces,
		}
		if !p.SkipExpired {
			c.expiredAt = time.Now()
			p.Handed = e.handed.ids()
			defer c.expiredSearches.Add(1)
		}
		var (
			rows       []store.OutboxRow
			moreEvents bool
		)
		if first {
			// The first claim of a cycle fans out committed events, when
			// some may be waiting, in the same round trip and commit: at
			// most fanOutInline, so that a backlog of events does not
			// hold up the claim.
			inline := 0
			if events {
				inline = fanOutInline
			}
			var fr store.FanOutResult
			cctx, cancel := claimContext(ctx)
			fr, rows, wake, err = store.FanOutClaimAndWake(cctx, e.cfg.Pool, inline, p, claimBatch)
			cancel()
			if err != nil && events {
				// Nothing was fanned out: the next pass tries again.
				c.events.Store(true)
			}
			e.fannedOut(fr)
			first, moreEvents, wakeValid = false, events && fr.Events == fanOutInline, true
			events = false
		} else {
			cctx, cancel := claimContext(ctx)
			rows, err = store.ClaimDue(cctx, e.cfg.Pool, p)
			cancel()
			wakeValid = false
		}
		if err != nil {
			return time.Time{}, false, err
		}
		perSink := map[int64]int{}
		for _, r := range rows {
			if claimed != nil {
				claimed(r)
			}
			if perSink[r.SinkID]++; perSink[r.SinkID] == claimPerSink {
				full = true // this sink may have more due rows
			}
			if e.cfg.OnClaim != nil {
				e.cfg.OnClaim(r.SinkID, now.Sub(r.DueAt))
			}
			if prev, ok := e.handed.hand(r); !ok {
				if r.TakenFrom != 0 {
					// Taken from an expired claim while a copy is still
					// queued or in flight here (ClaimParams.Handed keeps
					// the claim from taking such a row: a safety net): the
					// copy goes on, under its claim.
					wakeValid = false
					rctx, cancel := claimContext(ctx)
					_, err := store.RestoreClaim(rctx, e.cfg.Pool, r.Claim(), prev, e.instance)
					cancel()
					if err != nil {
						return time.Time{}, false, err
					}
					continue
				}
				// Taken pending: the copy handed before has ended (its
				// outcome was written, or it was given back) and has not
				// been forgotten yet, or another instance retried the row
				// since and this copy's statements no longer find it. The
				// claim's copy goes to the actor in its place, in its turn:
				// given back the old token, it would stay claimed with no
				// copy to send it until its claim expired, while the
				// sink's later rows went out ahead of it.
				e.handed.set(r)
			}
			if !e.actors.Dispatch(r) {
				e.handed.done(r.Claim())
				wakeValid = false
				// Its mailbox filled meanwhile, or the actors are stopping:
				// give the row back as it was.
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
				_, err := store.ReleaseRows(rctx, e.cfg.Pool, []store.Claimed{r.Claim()}, e.instance, e.kinds.replaces)
				cancel()
				if err != nil {
					return time.Time{}, false, err
				}
			}
		}
		if moreEvents {
			// More events wait than the cycle's batch took: the fan-out
			// service fans them out beside the claims, and wakes this
			// claimer as each of its batches commits.
			e.fanOuter.poke()
		}
		if len(rows) < limit {
			break
		}
	}
	if events {
		// No room to claim: the events wait no longer for it.
		e.fanOuter.poke()
	}
	if !wakeValid {
		if wake.HeldSinks, err = store.HeldDueSinks(ctx, e.cfg.Pool, now, claimBatch); err != nil {
			return time.Time{}, full, err
		}
		if wake.Next, wake.HasNext, err = store.NextWake(ctx, e.cfg.Pool, e.instance); err != nil {
			return time.Time{}, full, err
		}
	}
	for _, id := range wake.HeldSinks {
		e.actors.Poke(id)
	}
	if wake.HasNext && !wake.Next.After(now) {
		// Rows are due that this cycle did not take: rows another
		// instance's claim locked while this one's ran (both read the same
		// sinks first, and SKIP LOCKED took nothing of them), rows of sinks
		// another instance holds, or held rows whose actor was poked. Wait
		// for room as for a full mailbox, not for the poll: when this
		// instance's actors take their last rows and nobody here claims
		// again, every instance can be left waiting for its poll with rows
		// due (half a second with no message in three-instance drains,
		// TestAClaimerThatTookLessThanWasDueClaimsAgainWhenRoomFrees).
		full = true
	}
	if !wake.HasNext {
		return time.Time{}, full, nil
	}
	return wake.Next, full, nil
}

// claimOnce runs one pass of the claimer, as Serve's claimer does when a
// notification or its poll wakes it (fan out, claim what is due on the
// database's clock and there is room for, hand it to the actors), at once
// and on the caller's goroutine, and returns the ids of the rows it
// claimed, whether it also looked for rows whose claim expired, and
// whether Serve would wait for room after it (the cycle's full): a test
// asserts that a row is not claimed at a given instant by a condition
// that can fail, instead of waiting some wall time for an attempt that
// should never come (testhooks.ClaimOnce).
// The engine need not be serving; if it is, the pass takes turns with the
// serving claimer's. Production never calls it.
func (e *Engine) claimOnce(ctx context.Context) (rows []int64, searchedExpired, waitsForRoom bool, err error) {
	return e.claimer.pass(ctx, true)
}

// pass is claimOnce, told that events may be waiting when events is set
// (as a notification or the poll tells Serve's claimer), and not told
// otherwise (as after an actor's take).
func (c *claimer) pass(ctx context.Context, events bool) (rows []int64, searchedExpired, waitsForRoom bool, err error) {
	c.passing.Lock()
	defer c.passing.Unlock()
	before := c.expiredSearches.Load()
	if events {
		c.events.Store(true)
	}
	_, waitsForRoom, err = c.cycle(ctx, func(r store.OutboxRow) { rows = append(rows, r.ID) })
	return rows, c.expiredSearches.Load() > before, waitsForRoom, err
}

// listener holds one connection that LISTENs for Emit's notifications and
// wakes the claimer.
type listener struct{ e *Engine }

func (l *listener) String() string { return "listener" }

// Serve listens until ctx ends; a lost connection returns an error, and
// suture starts the listener again after its backoff (the claimer polls
// meanwhile).
func (l *listener) Serve(ctx context.Context) error {
	conn, err := l.e.cfg.Pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("error acquiring listen connection: %w", err)
	}
	pc := conn.Hijack()
	defer pc.Close(context.WithoutCancel(ctx))
	if _, err := pc.Exec(ctx, "LISTEN "+pgx.Identifier{notifyChannel}.Sanitize()); err != nil {
		return fmt.Errorf("error listening: %w", err)
	}
	l.e.claimer.pokeEvents() // events may have arrived before we listened
	for {
		if _, err := pc.WaitForNotification(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("error waiting for notifications: %w", err)
		}
		l.e.claimer.notified.Add(1)
		l.e.claimer.pokeEvents()
	}
}
