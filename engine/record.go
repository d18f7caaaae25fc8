package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard/notify/store"
)

// Group records. An actor hands the outcome of an attempt it made to the
// recorder and goes on with its next row; the recorder writes the outcomes
// of every attempt finished meanwhile in one implicit transaction (the
// records and their rows, store.RecordFinished). The rows stay claimed by
// this instance until their outcome is written, so no other instance sends
// them again meanwhile; a write that fails is tried again until it lands
// (or, once the engine is stopping, until Config.RecordGrace has passed):
// an outcome given up is sent again when the row's claim expires (at
// least once), and never because a write was merely slow.

// recordMax bounds the attempts of one group record.
const recordMax = 1024

// recordQueue is how many finished attempts may wait for the recorder;
// an actor finding it full waits, which slows sending to the pace of
// recording.
const recordQueue = 2048

// recordTimeout bounds one try of a write.
const recordTimeout = 10 * time.Second

// finishedAttempt is an attempt's outcome waiting to be written, and what
// to report once it is.
type finishedAttempt struct {
	f       store.Finished
	attempt Attempt
	// reportOnly is set for a step whose writes are already committed (a
	// row held or ended without a send): it is reported in its turn, after
	// the attempts made before it.
	reportOnly bool
	// more are attempt reports of the same send for rows that ended
	// otherwise (a coalesced message whose rows each keep their own
	// outcome), reported after attempt.
	more []Attempt
}

// recorder writes the outcomes. It is a service of the engine's tree that
// outlives the actors' stop.
type recorder struct {
	e        *Engine
	in       chan finishedAttempt
	done     chan struct{} // closed when run has returned after the stop
	doneOnce sync.Once
	// grace is Config.RecordGrace.
	grace time.Duration
	// tryTimeout bounds one try of a write: recordTimeout, shorter in tests.
	tryTimeout time.Duration
	// stopped ends every write, and every try of one, once the stop's one
	// deadline has passed: the grace after the actors stopped (armGrace).
	// A write begun before the stop, a write loop begun during it and the
	// final drain all end by that one deadline, never a grace of their own.
	stopped    context.Context
	stopWrites context.CancelFunc
	graceOnce  sync.Once
	unrecorded atomic.Int64 // outcomes given up at the stop's deadline
}

func newRecorder(e *Engine) *recorder {
	stopped, stopWrites := context.WithCancel(context.Background())
	return &recorder{e: e, in: make(chan finishedAttempt, recordQueue), done: make(chan struct{}), tryTimeout: recordTimeout,
		grace: e.cfg.RecordGrace, stopped: stopped, stopWrites: stopWrites}
}

// armGrace starts the stop's one deadline, once: the recorder's writes
// end RecordGrace from now. The engine calls it when its actors have
// stopped (Engine.markActorsGone).
func (r *recorder) armGrace() {
	r.graceOnce.Do(func() { time.AfterFunc(r.grace, r.stopWrites) })
}

// record queues fa for writing. Once the recorder has stopped (an attempt
// finished after the engine's stop), it writes fa itself, within what is
// left of the stop's deadline.
func (r *recorder) record(fa finishedAttempt) {
	select {
	case r.in <- fa:
	case <-r.done:
		r.write([]finishedAttempt{fa})
	}
}

// report queues a step whose writes are committed already, to be reported
// (Config.OnAttempt) after the attempts queued before it.
func (r *recorder) report(a Attempt) {
	if r.e.cfg.OnAttempt != nil {
		r.record(finishedAttempt{attempt: a, reportOnly: true})
	}
}

func (r *recorder) String() string { return "recorder" }

// Serve writes outcomes until the engine stops and its actors have
// stopped, then what is still queued.
func (r *recorder) Serve(ctx context.Context) error {
	r.run(ctx)
	r.doneOnce.Do(func() { close(r.done) })
	return ctx.Err()
}

// run writes groups until ctx ends and the actors have stopped
// (Engine.actorsGone), then what is still queued, within the grace: what
// the actors sent is in the queue by then. One loop writes, so that
// attempts are reported (Config.OnAttempt) in the order they were made;
// while it writes, the next group gathers.
func (r *recorder) run(ctx context.Context) {
	// group's array serves every write: a drain of thousands of attempts
	// a second otherwise grows a new one for each.
	var group []finishedAttempt
	for {
		clear(group)
		group = group[:0]
		select {
		case <-r.e.actorsGone:
			r.drain()
			return
		case fa := <-r.in:
			group = append(group, fa)
		}
		group = r.gather(group)
		r.write(group)
	}
}

func (r *recorder) gather(group []finishedAttempt) []finishedAttempt {
	for len(group) < recordMax {
		select {
		case fa := <-r.in:
			group = append(group, fa)
		default:
			return group
		}
	}
	return group
}

func (r *recorder) drain() {
	for {
		group := r.gather(nil)
		if len(group) == 0 {
			return
		}
		r.write(group)
	}
}

// write writes a group, then reports each attempt.
func (r *recorder) write(group []finishedAttempt) {
	fs := make([]store.Finished, 0, len(group))
	for _, fa := range group {
		if !fa.reportOnly {
			fs = append(fs, fa.f)
		}
	}
	if len(fs) > 0 {
		r.writeAll(fs)
		for _, f := range fs {
			r.e.handed.done(f.Rows...)
		}
	}
	for _, fa := range group {
		r.tell(fa, fa.attempt)
		for _, a := range fa.more {
			r.tell(fa, a)
		}
	}
}

// tell tells the engine's observers of one attempt of fa.
func (r *recorder) tell(fa finishedAttempt, a Attempt) {
	if !fa.reportOnly && a.State == rowUndeliverable {
		r.e.warnUndeliverable(a.SinkID, a.Rows, a.Class)
	}
	r.e.observe(a)
}

// isolatedTries is how often the outcome of one attempt is written, alone,
// before it is given up.
const isolatedTries = 3

// writeAll writes the outcomes fs, trying again after a failure until
// they land or the stop's deadline has passed (r.stopped: every try is
// cut there too, a try begun before the stop included). A group the database
// refuses (a statement error, not a lost connection) is written again one
// attempt at a time: an outcome that cannot be written is isolated, tried
// isolatedTries times, then logged, counted (Engine.OutcomesDropped) and
// given up, and never holds back the outcomes of the others. An outcome
// given up leaves its rows claimed: they are sent again when their claims
// expire (at least once).
func (r *recorder) writeAll(fs []store.Finished) {
	e := r.e
	backoff := 50 * time.Millisecond
	for try := 1; ; try++ {
		// A try never runs past the stop's deadline.
		ctx, cancel := context.WithTimeout(r.stopped, r.tryTimeout)
		err := store.RecordFinished(ctx, e.cfg.Pool, fs, e.instance, e.kinds.replaces)
		cancel()
		if err == nil {
			if try > 1 {
				e.log.Info("recorded delivery outcomes after a failure", "attempts", len(fs), "tries", try)
			}
			return
		}
		if repeatRaced(err) && try < raceTries {
			// The race absorbRepeats documents: a repeat of a row's key
			// opened a row after this statement's snapshot. Written again,
			// the outcome takes the repeat in. Not an error, and no wait.
			e.log.Info("a repeat of a row's key arrived while its outcome was written; writing it again",
				"attempts", len(fs), "tries", try)
			continue
		}
		if refused(err) {
			if len(fs) > 1 {
				for _, f := range fs {
					r.writeAll([]store.Finished{f})
				}
				return
			}
			if try >= isolatedTries {
				e.outcomesDropped.Add(1)
				e.log.Error("error recording a delivery outcome; given up, its rows are sent again when their claims expire",
					"rows", len(fs[0].Rows), "tries", try, "error", err)
				return
			}
		}
		if r.stopped.Err() != nil {
			// The stop's deadline passed: the rows stay claimed and are
			// attempted again when the claim expires (at least once), and
			// the stop reports them (Engine.Stop).
			r.unrecorded.Add(int64(len(fs)))
			e.log.Error("error recording delivery outcomes by the stop's deadline; their rows are sent again when their claims expire",
				"attempts", len(fs), "tries", try, "record_grace", r.grace, "error", err)
			return
		}
		if try == 1 || try%20 == 0 {
			e.log.Error("error recording delivery outcomes; trying again", "attempts", len(fs), "tries", try, "error", err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-r.stopped.Done(): // one more try, cut at once: the loop ends above
		}
		t.Stop()
		backoff = min(backoff*2, 2*time.Second)
	}
}

// refused reports an error the database answered a statement with (a
// constraint, a bad value): what a retry of the same group would meet
// again. A lost connection, a server shutting down, a deadlock or a
// serialization failure is not: the same write may land next time.
// raceTries is how many times in a row an outcome meeting a repeat's new
// row (repeatRaced) is written again at once before it is treated as any
// refusal: each try has a snapshot of its own, so the next one takes in
// the row the last one missed.
const raceTries = 3

func refused(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || transient(err) {
		return false
	}
	class := pe.Code[:2]
	return class != "08" && class != "57" && class != "53" && class != "58"
}
