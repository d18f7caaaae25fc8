package digests

import (
	"context"
	"time"

	"github.com/switchboard/notify/engine/digest"
	"github.com/switchboard/notify/store"
)

// scheduler is the supervised service that sends due digests
// (REQ-12). Every instance runs one; they agree through the database
// alone: a scheduled time is claimed by one atomic update of the digest's
// row, compared on the database's clock, so exactly one instance builds and
// sends it whatever the instances' own clocks say.
type scheduler struct{ s *Service }

func (sc *scheduler) String() string { return "digest scheduler" }

// Serve looks for due digests at once and then every Config.Interval (wall
// time) until ctx ends.
func (sc *scheduler) Serve(ctx context.Context) error {
	s := sc.s
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := s.RunDue(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("digest scheduler pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// RunDue makes one pass of the digest scheduler, as every instance
// does each Config.Interval: for each digest whose latest scheduled time
// has passed (on the database's clock) and was not yet claimed, it claims
// that time and, if it is less than an hour late, builds the digest and
// sends it, unless it is quiet and skip_when_quiet; a time an hour late or
// more is recorded as skipped. Earlier times missed during downtime are
// not sent. It returns how many times this instance claimed (sent or
// skipped). Nobody need call it: the engine runs the scheduler while it serves.
func (s *Service) RunDue(ctx context.Context) (int, error) {
	due, err := store.ScheduledDigests(ctx, s.core.Pool)
	if err != nil {
		return 0, err
	}
	claimed := 0
	for _, d := range due {
		if ctx.Err() != nil {
			return claimed, ctx.Err()
		}
		sch, err := digest.Parse(d.Schedule)
		if err != nil {
			s.log.Warn("digest has a schedule that no longer parses; not sent", "digest_id", d.ID)
			continue
		}
		anchor := d.CreatedAt
		if d.LastSlotAt != nil && d.LastSlotAt.After(anchor) {
			anchor = *d.LastSlotAt
		}
		slot := sch.Prev(d.DBNow)
		if slot.IsZero() || !slot.After(anchor) {
			continue
		}
		c, err := store.ClaimDigestSlot(ctx, s.core.Pool, d.ID, slot, LateAfter)
		if err != nil {
			return claimed, err
		}
		if !c.Claimed {
			continue // another instance has it
		}
		claimed++
		if err := s.runClaimed(ctx, d.ID, slot, c); err != nil {
			s.log.Error("digest claimed but not sent", "digest_id", d.ID, "slot", slot, "err", err)
		}
	}
	return claimed, nil
}

func (s *Service) runClaimed(ctx context.Context, id int64, slot time.Time, c store.SlotClaim) error {
	d, err := store.GetDigest(ctx, s.core.Pool, id)
	if err != nil {
		return err
	}
	run := Run{DigestID: d.ID, Owner: d.Owner, Kind: "scheduled", SlotAt: &slot}
	if c.Late {
		run.Outcome = "late"
		s.log.Warn("digest time missed by an hour or more; skipped", "digest_id", d.ID, "slot", slot)
		return store.InsertDigestRun(ctx, s.core.Pool, runIn(run))
	}
	r := s.buildReport(ctx, d, c.PrevSentAt, c.SentAt)
	if d.SkipWhenQuiet && r.Quiet() {
		run.Outcome, run.Headline = "quiet", r.Lead()
		return store.InsertDigestRun(ctx, s.core.Pool, runIn(run))
	}
	_, err = s.sendReport(ctx, d, r, run)
	return err
}
