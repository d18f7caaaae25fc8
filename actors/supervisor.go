package actors

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/thejerf/suture/v4"

	"github.com/switchboard/notify/store"
)

// Defaults of Config.
const (
	MailboxSizeDefault = 64
	CapacityDefault    = 1024
	IdleAfterDefault   = time.Minute
	StopTimeoutDefault = 15 * time.Second
)

// Config configures a Supervisor.
type Config struct {
	// MailboxSize is how many claimed rows one actor may queue, and so
	// how many one of its steps attempts at most. Defaults to
	// MailboxSizeDefault (64): a step's statements (its reservation, its
	// attempts' start, its outcomes) serve up to that many rows, and at
	// 10 sinks a drain with 64 ran 19 % faster than with 32, at 16 % less
	// of the machine's CPU a delivery (docs/BENCHMARKS.md, session 14).
	// The price is each sink's share of Capacity: 16 sinks with full
	// mailboxes leave no room to claim another sink's row until one of
	// their actors takes its mailbox. The rows a step takes are reserved
	// together, which extends their claims, and the step sends them only
	// while one more send ends within half a claim's lifetime (the rest
	// are given back): a full mailbox waits at most one step, whatever
	// the size. The mailbox grows as rows come: an idle actor's costs
	// nothing.
	MailboxSize int
	// Capacity is how many claimed rows all actors together may queue.
	// Defaults to CapacityDefault (1024).
	Capacity int
	// IdleAfter is how long an actor with nothing to do lives on (wall
	// time). Defaults to IdleAfterDefault (1 minute).
	IdleAfter time.Duration
	// Clock drives held-row timers. Defaults to the real clock.
	Clock clockwork.Clock
	// Now tells the time that due times and budgets are kept in (the
	// database's), to size timers and mirror budgets against. Defaults to
	// Clock.Now.
	Now func() time.Time
	// Logger receives supervisor events. Defaults to slog.Default().
	Logger *slog.Logger
	// StopTimeout is how long a stopping supervisor waits for its actors
	// to finish the attempts they began (the suture tree's timeout);
	// releasing the rows still queued takes ReleaseTimeout more. Defaults
	// to StopTimeoutDefault (15 s).
	StopTimeout time.Duration
}

func (c Config) withDefaults() Config {
	c.MailboxSize = cmp.Or(c.MailboxSize, MailboxSizeDefault)
	c.Capacity = cmp.Or(c.Capacity, CapacityDefault)
	c.IdleAfter = cmp.Or(c.IdleAfter, IdleAfterDefault)
	c.StopTimeout = cmp.Or(c.StopTimeout, StopTimeoutDefault)
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Now == nil {
		c.Now = c.Clock.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Supervisor starts, feeds and stops the sink actors of one instance.
type Supervisor struct {
	cfg    Config
	worker Worker
	sup    *suture.Supervisor

	mu      sync.Mutex
	actors  map[int64]*SinkActor
	room    chan struct{}
	stopped bool // Serve ended: Dispatch takes no more rows
	// unstopped names the actors that had not stopped at StopTimeout.
	unstopped []string
	runners   runners
}

// Unstopped names the actors still in an attempt when Serve stopped
// waiting for them (Config.StopTimeout): their outcomes may be recorded
// late or not at all.
func (s *Supervisor) Unstopped() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.unstopped...)
}

// NewSupervisor returns a supervisor delivering through worker.
func NewSupervisor(cfg Config, worker Worker) *Supervisor {
	cfg = cfg.withDefaults()
	s := &Supervisor{cfg: cfg, worker: worker, actors: map[int64]*SinkActor{}, room: make(chan struct{}, 1)}
	s.sup = suture.New("sink-actors", suture.Spec{
		EventHook: func(e suture.Event) {
			cfg.Logger.Warn("sink actor event", "event", e.String())
		},
		// An actor that keeps panicking backs off rather than spinning.
		FailureThreshold: 5,
		FailureBackoff:   5 * time.Second,
		// An actor stopping finishes the attempt it began (10 s of HTTP
		// at most) and hands its outcome to be recorded.
		Timeout: cfg.StopTimeout,
	})
	return s
}

// ReleaseTimeout bounds giving back the queued rows on stop.
const ReleaseTimeout = 5 * time.Second

// Serve runs the actors until ctx ends. Once they have stopped (each
// finishing the attempt it began, within Config.StopTimeout), the rows
// still queued in their mailboxes are released (Worker.Release, within
// ReleaseTimeout), so a deploy does not delay them by a claim's lifetime.
// Actors still in an attempt at Config.StopTimeout are named by Unstopped.
func (s *Supervisor) Serve(ctx context.Context) error {
	s.runners.open()
	defer s.runners.close()
	err := s.sup.Serve(ctx)
	if ctx.Err() == nil {
		return err
	}
	if report, rerr := s.sup.UnstoppedServiceReport(); rerr == nil {
		s.mu.Lock()
		for _, u := range report {
			s.unstopped = append(s.unstopped, u.Name)
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.stopped = true
	var queued []store.OutboxRow
	for _, a := range s.actors {
		queued = append(queued, a.mailbox.take()...)
	}
	s.mu.Unlock()
	if len(queued) > 0 {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
		defer cancel()
		s.worker.Release(rctx, queued)
	}
	return err
}

// String names the supervisor in its parent's logs.
func (s *Supervisor) String() string { return "sink-actors" }

// Room is how much more the actors can take (Supervisor.Room).
type Room struct {
	// Free is how many more rows all actors together can queue.
	Free int
	// Full are the sinks whose mailbox is more than half full.
	Full []int64
	// Open counts the actors whose mailbox is not: each can take half a
	// mailbox more.
	Open int
}

// Room returns how many more rows the actors can take, the sinks whose
// mailbox is full, and how many actors have room.
func (s *Supervisor) Room() Room {
	s.mu.Lock()
	defer s.mu.Unlock()
	var r Room
	queued := 0
	for id, a := range s.actors {
		n := a.mailbox.len()
		queued += n
		if n > s.cfg.MailboxSize/2 {
			r.Full = append(r.Full, id)
		} else {
			r.Open++
		}
	}
	r.Free = max(s.cfg.Capacity-queued, 0)
	return r
}

// RoomFreed is signalled when an actor takes a row from its mailbox.
func (s *Supervisor) RoomFreed() <-chan struct{} { return s.room }

// Dispatch hands a claimed row to its sink's actor, starting the actor if
// needed. It reports false when the actor's mailbox is full, or the
// supervisor has stopped.
func (s *Supervisor) Dispatch(row store.OutboxRow) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	a := s.actorLocked(row.SinkID)
	return a.mailbox.put(row)
}

// Poke asks a sink's actor to flush its held rows, starting it if needed.
func (s *Supervisor) Poke(sinkID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.actorLocked(sinkID)
	select {
	case a.poke <- struct{}{}:
	default:
	}
}

func (s *Supervisor) actorLocked(sinkID int64) *SinkActor {
	a, ok := s.actors[sinkID]
	if !ok {
		a = newSinkActor(s, sinkID)
		s.actors[sinkID] = a
		s.sup.Add(a)
	}
	return a
}

// retire removes an idle actor unless a row or a poke reached it meanwhile.
func (s *Supervisor) retire(a *SinkActor) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.mailbox.len() > 0 || len(a.poke) > 0 || s.actors[a.sinkID] != a {
		return false
	}
	delete(s.actors, a.sinkID)
	return true
}

// signalRoom tells the claimer that an actor took a row.
func (s *Supervisor) signalRoom() {
	select {
	case s.room <- struct{}{}:
	default:
	}
}

// Status returns a snapshot of every active actor, by sink id.
func (s *Supervisor) Status() []Status {
	s.mu.Lock()
	actors := slices.Collect(maps.Values(s.actors))
	s.mu.Unlock()
	out := make([]Status, 0, len(actors))
	for _, a := range actors {
		out = append(out, a.Status())
	}
	slices.SortFunc(out, func(x, y Status) int { return cmp.Compare(x.SinkID, y.SinkID) })
	return out
}

// StatusOf returns a snapshot of the active actors of sinkIDs only, by
// sink id, each once; an id with no active actor is left out. It looks
// each id up, so it costs O(len(sinkIDs)) whatever the number of actors,
// and, like Status, never blocks an actor.
func (s *Supervisor) StatusOf(sinkIDs ...int64) []Status {
	found := make([]*SinkActor, 0, len(sinkIDs))
	s.mu.Lock()
	for _, id := range sinkIDs {
		if a, ok := s.actors[id]; ok {
			found = append(found, a)
		}
	}
	s.mu.Unlock()
	out := make([]Status, 0, len(found))
	for _, a := range found {
		out = append(out, a.Status())
	}
	slices.SortFunc(out, func(x, y Status) int { return cmp.Compare(x.SinkID, y.SinkID) })
	return slices.CompactFunc(out, func(x, y Status) bool { return x.SinkID == y.SinkID })
}
