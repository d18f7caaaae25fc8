package host

import (
	"context"

	"github.com/switchboard/notify/engine/digest"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/notifytype"
)

// DigestSources gives the engine the figures of digest sections over the
// reference host's tables (REQ-13). It implements digests.Sources.
//
// The reference host has queues, todos and leases, so pending, claimed,
// stalled leases and dead letters are measured. It does not record
// unheard doorbells (SPEC-0025), endpoints clocked out (SPEC-0022) or
// admission-budget deferrals (SPEC-0030): those read "unavailable: not
// measured on this instance" (D21). Quarantined deliveries are counted from
// the webhooks' quarantine (webhook_deliveries).
type DigestSources struct {
	db hoststore.DBTX
}

var _ digests.Sources = (*DigestSources)(nil)

// NewDigestSources returns the sources reading db.
func NewDigestSources(db hoststore.DBTX) *DigestSources {
	if db == nil {
		panic("host: NewDigestSources needs a database")
	}
	return &DigestSources{db: db}
}

// Queues lists the scope's queues.
func (s *DigestSources) Queues(ctx context.Context, owner notifytype.OwnerScope) ([]digest.Queue, error) {
	qs, err := hoststore.QueuesOf(ctx, s.db, owner)
	if err != nil {
		return nil, err
	}
	out := make([]digest.Queue, len(qs))
	for i, q := range qs {
		out[i] = digest.Queue{ID: q.ID, Name: q.Name}
	}
	return out, nil
}

// Pending counts pending todos per queue with the oldest one's age.
func (s *DigestSources) Pending(ctx context.Context, q digests.Query) (map[int64]digest.Pending, error) {
	rows, err := hoststore.PendingByQueue(ctx, s.db, q.Owner, q.QueueIDs)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]digest.Pending, len(rows))
	for _, r := range rows {
		out[r.QueueID] = digest.Pending{Count: r.Count, OldestAge: r.OldestAge}
	}
	return out, nil
}

// Claimed counts claimed todos per queue.
func (s *DigestSources) Claimed(ctx context.Context, q digests.Query) (map[int64]int, error) {
	return s.claimed(ctx, q, func(r hoststore.QueueClaimed) int { return r.Claimed })
}

// StalledLeases counts stalled claims per queue: lease expired but not yet
// reaped, or no heartbeat for more than twice the lease TTL.
func (s *DigestSources) StalledLeases(ctx context.Context, q digests.Query) (map[int64]int, error) {
	return s.claimed(ctx, q, func(r hoststore.QueueClaimed) int { return r.Stalled })
}

func (s *DigestSources) claimed(ctx context.Context, q digests.Query, pick func(hoststore.QueueClaimed) int) (map[int64]int, error) {
	rows, err := hoststore.ClaimedByQueue(ctx, s.db, q.Owner, q.QueueIDs)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]int, len(rows))
	for _, r := range rows {
		out[r.QueueID] = pick(r)
	}
	return out, nil
}

// DeadLetters counts the todos dead-lettered since q.Since per queue, with
// up to five titles each.
func (s *DigestSources) DeadLetters(ctx context.Context, q digests.Query) (map[int64]digest.DeadLetters, error) {
	rows, err := hoststore.DeadLettersByQueue(ctx, s.db, q.Owner, q.QueueIDs, q.Since, digest.MaxDeadLetterTitles)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]digest.DeadLetters, len(rows))
	for _, r := range rows {
		d := digest.DeadLetters{Count: r.Count}
		for i, id := range r.IDs {
			d.Recent = append(d.Recent, digest.TodoRef{ID: id, Title: r.Titles[i]})
		}
		out[r.QueueID] = d
	}
	return out, nil
}

// Quarantined counts the deliveries quarantined since q.Since per webhook
// of the scope.
func (s *DigestSources) Quarantined(ctx context.Context, q digests.Query) ([]digest.NamedCount, error) {
	rows, err := hoststore.QuarantinedByWebhook(ctx, s.db, q.Owner, q.Since)
	if err != nil {
		return nil, err
	}
	out := make([]digest.NamedCount, len(rows))
	for i, r := range rows {
		out[i] = digest.NamedCount{Name: r.Name, Count: r.Count}
	}
	return out, nil
}

// UnheardDoorbells is not measured by the reference host (D21).
func (s *DigestSources) UnheardDoorbells(context.Context, digests.Query) ([]digest.NamedCount, error) {
	return nil, digests.ErrNotMeasured
}

// ClockedOut is not measured by the reference host (D21).
func (s *DigestSources) ClockedOut(context.Context, digests.Query) ([]string, error) {
	return nil, digests.ErrNotMeasured
}

// AdmissionDeferred is not measured by the reference host (D21).
func (s *DigestSources) AdmissionDeferred(context.Context, digests.Query) (map[int64]int, error) {
	return nil, digests.ErrNotMeasured
}
