package host

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"
)

// admission lets each owner run at most per dry runs at once, in the order
// they came (golang.org/x/sync/semaphore is FIFO and leaves a waiter whose
// context ends without a trace). A dry run reads the webhook's stored
// deliveries (up to 256 KiB each), decodes them and hands each to a rule
// worker: the pool serves one owner with at most PerOwner workers, so a
// dry run past that many only waits for one, and meanwhile its reads and
// decoding contend with every other owner's requests for the server's
// cores and the database's. Admitted first, it costs nothing until it can
// run (faults row 6d: eight at once by one owner doubled another owner's
// p99 delivery time).
//
// An owner's entry lives while one of its dry runs holds or waits for it,
// so the map holds only owners with work in flight.
type admission struct {
	per int64

	mu     sync.Mutex
	owners map[string]*admitted
}

type admitted struct {
	sem  *semaphore.Weighted
	refs int // dry runs holding or waiting for sem
	held int // dry runs holding it
}

func newAdmission(per int) *admission {
	return &admission{per: int64(max(per, 1)), owners: map[string]*admitted{}}
}

// enter waits until owner may run one more dry run, or ctx ends (its
// error). The caller calls leave once done, only when enter returned nil.
func (a *admission) enter(ctx context.Context, owner string) (leave func(), err error) {
	a.mu.Lock()
	e := a.owners[owner]
	if e == nil {
		e = &admitted{sem: semaphore.NewWeighted(a.per)}
		a.owners[owner] = e
	}
	e.refs++
	a.mu.Unlock()
	drop := func() {
		a.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(a.owners, owner)
		}
		a.mu.Unlock()
	}
	if err := e.sem.Acquire(ctx, 1); err != nil {
		drop()
		return nil, err
	}
	a.mu.Lock()
	e.held++
	a.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			e.held--
			a.mu.Unlock()
			e.sem.Release(1)
			drop()
		})
	}, nil
}

// inFlight is how many of owner's dry runs are admitted and how many wait
// (tests).
func (a *admission) inFlight(owner string) (held, queued int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.owners[owner]; e != nil {
		return e.held, e.refs - e.held
	}
	return 0, 0
}

// waiting is how many of owner's dry runs hold or wait for admission
// (tests).
func (a *admission) waiting(owner string) int {
	held, queued := a.inFlight(owner)
	return held + queued
}
