package digests

import (
	"context"
	"errors"
	"time"

	"github.com/switchboard/notify/engine/digest"
	"github.com/switchboard/notify/notifytype"
)

// ErrNotMeasured is what a Sources method returns for a section this
// instance cannot measure (D21): the digest shows it as "unavailable: not
// measured on this instance", never as zero.
var ErrNotMeasured = errors.New(digest.NotMeasured)

// Query says what one digest section covers: the digest's owner
// scope, its queues (already checked to be the scope's own) and the time
// since which events count.
type Query struct {
	Owner    notifytype.OwnerScope
	QueueIDs []int64
	Since    time.Time
}

// Sources is where a digest's figures come from (REQ-13): the host
// implements it over its own tables (the reference host in package host).
// Every method answers only for q.Owner and, where it takes them, for
// q.QueueIDs; figures of any other scope must never be returned. A method
// returns ErrNotMeasured for a section the host does not measure; any
// other error, or running past the engine's section timeout, makes that
// section read "unavailable" too, and never zero.
type Sources interface {
	// Queues lists the queues the owner scope owns, by name.
	Queues(ctx context.Context, owner notifytype.OwnerScope) ([]digest.Queue, error)
	// Pending counts pending todos per queue, with the oldest one's age.
	Pending(ctx context.Context, q Query) (map[int64]digest.Pending, error)
	// Claimed counts claimed todos per queue.
	Claimed(ctx context.Context, q Query) (map[int64]int, error)
	// StalledLeases counts claimed todos per queue whose lease has expired
	// (not yet reaped) or whose last heartbeat is older than twice their
	// lease TTL.
	StalledLeases(ctx context.Context, q Query) (map[int64]int, error)
	// DeadLetters counts the todos dead-lettered since q.Since per queue,
	// with up to digest.MaxDeadLetterTitles of them, newest first.
	DeadLetters(ctx context.Context, q Query) (map[int64]digest.DeadLetters, error)
	// Quarantined counts deliveries quarantined since q.Since per webhook
	// of the scope.
	Quarantined(ctx context.Context, q Query) ([]digest.NamedCount, error)
	// UnheardDoorbells counts unheard doorbells since q.Since per endpoint
	// of the scope.
	UnheardDoorbells(ctx context.Context, q Query) ([]digest.NamedCount, error)
	// ClockedOut names the scope's endpoints clocked out.
	ClockedOut(ctx context.Context, q Query) ([]string, error)
	// AdmissionDeferred counts work deferred since q.Since by each queue's
	// admission budget.
	AdmissionDeferred(ctx context.Context, q Query) (map[int64]int, error)
}
