package digests

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digest"
	"github.com/switchboard/notify/internal/enginecore"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

// Actions and the object kind of the write log that digests record.
const (
	writeDigestCreate = "digest.create"
	writeDigestUpdate = "digest.update"
	writeDigestDelete = "digest.delete"
	writeDigestSend   = "digest.send"
	objectDigest      = "digest"
)

// Digest limits (REQ-12, REQ-13).
const (
	// MaxPerScope is the most digests one owner scope may have.
	MaxPerScope = 5
	// QuietThresholdDefault is the oldest-pending age above which a digest
	// is not quiet, unless the digest sets its own.
	QuietThresholdDefault = time.Hour
	// QuietThresholdMin and QuietThresholdMax bound a digest's threshold.
	QuietThresholdMin = time.Minute
	QuietThresholdMax = 7 * 24 * time.Hour
	// LateAfter is how late a scheduled time may be sent: a time
	// missed during downtime is sent once on recovery if less late than
	// this, and skipped otherwise.
	LateAfter = time.Hour
)

// Input is a digest as a caller creates it (REQ-12).
type Input struct {
	// Owner is the owner scope. Required.
	Owner notifytype.OwnerScope
	// Name is unique in the scope: 1 to 64 printable characters. Required.
	Name string
	// Schedule is the D19 grammar, "TZ=Europe/Berlin Mon-Fri 09:00".
	// Required.
	Schedule string
	// QueueIDs are the queues covered, each of the scope. Defaults to
	// every queue the scope owns (now and later).
	QueueIDs []int64
	// SinkIDs are the sinks the digest goes to, each of the scope.
	SinkIDs []int64
	// CairnConnectionID is a cairn connection of the scope to publish the
	// digest to (REQ-14); 0 for none. A digest needs sinks, Cairn, or both.
	CairnConnectionID int64
	// SkipWhenQuiet defaults to true: a quiet digest is not sent.
	SkipWhenQuiet *bool
	// QuietThreshold defaults to QuietThresholdDefault (1 hour), from 1
	// minute to 7 days.
	QuietThreshold time.Duration
}

// Patch changes a digest; a nil field keeps its value.
type Patch struct {
	Name              *string
	Schedule          *string
	QueueIDs          *[]int64
	SinkIDs           *[]int64
	CairnConnectionID *int64
	SkipWhenQuiet     *bool
	QuietThreshold    *time.Duration
}

// Digest is a digest as the service returns it.
type Digest struct {
	ID                  int64
	Owner               notifytype.OwnerScope
	Name                string
	Schedule            string
	QueueIDs            []int64
	SinkIDs             []int64
	CairnConnectionID   int64
	SkipWhenQuiet       bool
	QuietThreshold      time.Duration
	LastSentAt          *time.Time
	NextSendAt          time.Time
	CreatedAt           time.Time
	UpdatedAt           time.Time
	UpdatedByHumanID    string
	UpdatedByEndpointID int64
}

func digestOut(d store.Digest) Digest {
	out := Digest{
		ID: d.ID, Owner: d.Owner, Name: d.Name, Schedule: d.Schedule, QueueIDs: d.QueueIDs, SinkIDs: d.SinkIDs,
		CairnConnectionID: d.CairnConnectionID, SkipWhenQuiet: d.SkipWhenQuiet,
		QuietThreshold: time.Duration(d.QuietThresholdSecs) * time.Second, LastSentAt: d.LastSentAt,
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
		UpdatedByHumanID: d.UpdatedByHumanID, UpdatedByEndpointID: d.UpdatedByEndpointID,
	}
	if sch, err := digest.Parse(d.Schedule); err == nil {
		after := d.CreatedAt
		if d.LastSlotAt != nil && d.LastSlotAt.After(after) {
			after = *d.LastSlotAt
		}
		out.NextSendAt = sch.Next(after)
	}
	return out
}

// Create validates and stores a digest: permissions as for sinks
// (D2, D3), name, schedule (invalid_argument naming schedule), queues and
// sinks of the same scope, a Cairn connection of the same scope and kind
// (else forbidden), at least one target, the threshold, and at most 5
// digests per scope, which holds under concurrent creates.
func (s *Service) Create(ctx context.Context, p engine.Principal, in Input) (Digest, error) {
	d, err := s.createDigest(ctx, p, in)
	return d, enginecore.WrapErr(err, "creating digest")
}

func (s *Service) createDigest(ctx context.Context, p engine.Principal, in Input) (Digest, error) {
	if err := s.core.AuthorizeTarget(ctx, principal(p), in.Owner); err != nil {
		return Digest{}, err
	}
	row := store.Digest{
		Owner: in.Owner, Name: in.Name, Schedule: in.Schedule, QueueIDs: in.QueueIDs, SinkIDs: in.SinkIDs,
		CairnConnectionID: in.CairnConnectionID, SkipWhenQuiet: true,
		QuietThresholdSecs: int(QuietThresholdDefault / time.Second),
		UpdatedByHumanID:   p.HumanID, UpdatedByEndpointID: p.EndpointID,
	}
	if in.SkipWhenQuiet != nil {
		row.SkipWhenQuiet = *in.SkipWhenQuiet
	}
	if in.QuietThreshold != 0 {
		row.QuietThresholdSecs = int(in.QuietThreshold / time.Second)
	}
	var out store.Digest
	err := pgx.BeginFunc(ctx, s.core.Pool, func(tx pgx.Tx) error {
		if err := store.LockOwnerScope(ctx, tx, in.Owner); err != nil {
			return err
		}
		var err error
		if row, err = s.checkDigest(ctx, tx, row); err != nil {
			return err
		}
		n, err := store.CountDigests(ctx, tx, in.Owner)
		if err != nil {
			return err
		}
		if n >= MaxPerScope {
			return notifytype.InvalidArgumentf("digests", "this owner scope already has %d digests, the most allowed; delete one first", MaxPerScope)
		}
		if out, err = store.InsertDigest(ctx, tx, row); err != nil {
			return digestNameTaken(err)
		}
		return enginecore.RecordWrite(ctx, tx, principal(p), out.Owner, writeDigestCreate, objectDigest, out.ID)
	})
	if err != nil {
		return Digest{}, err
	}
	return digestOut(out), nil
}

// checkDigest validates every field of a digest row and returns it
// normalised (schedule canonical, ids sorted without repeats).
func (s *Service) checkDigest(ctx context.Context, db store.DBTX, d store.Digest) (store.Digest, error) {
	if err := engine.CheckName(d.Name); err != nil {
		return d, err
	}
	sch, err := digest.Parse(d.Schedule)
	if err != nil {
		return d, err
	}
	d.Schedule = sch.String()
	threshold := time.Duration(d.QuietThresholdSecs) * time.Second
	if threshold < QuietThresholdMin || threshold > QuietThresholdMax {
		return d, notifytype.InvalidArgument("quiet_threshold", "must be from 1 minute to 7 days")
	}
	d.QueueIDs = uniqueIDs(d.QueueIDs)
	d.SinkIDs = uniqueIDs(d.SinkIDs)
	if len(d.QueueIDs) > 0 {
		owned, err := s.core.Owned(ctx, d.Owner, string(engine.ResourceQueue), d.QueueIDs)
		if err != nil {
			return d, err
		}
		if !slices.Equal(uniqueIDs(owned), d.QueueIDs) {
			return d, notifytype.InvalidArgument("queue_ids", "every id must name a queue of the digest's owner scope")
		}
	}
	for _, id := range d.SinkIDs {
		s, err := store.GetSink(ctx, db, id)
		if err != nil || s.Owner != d.Owner {
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return d, err
			}
			return d, notifytype.InvalidArgument("sink_ids", "every id must name a sink of the digest's owner scope")
		}
	}
	if d.CairnConnectionID < 0 {
		return d, notifytype.InvalidArgument("cairn_connection_id", "must be a connection id, or 0 for none")
	}
	if d.CairnConnectionID > 0 {
		if _, err := s.core.ConnectionFor(ctx, db, d.CairnConnectionID, d.Owner, engine.KindCairn); err != nil {
			return d, err
		}
	}
	if len(d.SinkIDs) == 0 && d.CairnConnectionID == 0 {
		return d, notifytype.InvalidArgument("sink_ids", "a digest needs at least one sink or a Cairn connection")
	}
	return d, nil
}

func uniqueIDs(v []int64) []int64 {
	out := slices.Clone(v)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []int64{}
	}
	return out
}

// Get reads one digest; another scope's digest is not_found.
func (s *Service) Get(ctx context.Context, p engine.Principal, id int64) (Digest, error) {
	d, err := s.readDigest(ctx, p, id, false)
	if err != nil {
		return Digest{}, enginecore.WrapErr(err, "reading digest")
	}
	return digestOut(d), nil
}

func (s *Service) readDigest(ctx context.Context, p engine.Principal, id int64, write bool) (store.Digest, error) {
	d, err := store.GetDigest(ctx, s.core.Pool, id)
	if err != nil {
		return store.Digest{}, enginecore.NotFoundIfNoRows(err, "digest")
	}
	if err := s.core.AuthorizeResource(ctx, principal(p), d.Owner, write, "digest"); err != nil {
		return store.Digest{}, err
	}
	return d, nil
}

// List lists an owner scope's digests, by name.
func (s *Service) List(ctx context.Context, p engine.Principal, scope notifytype.OwnerScope) ([]Digest, error) {
	if err := s.core.Authorize(ctx, principal(p), scope, false); err != nil {
		return nil, err
	}
	rows, err := store.ListDigests(ctx, s.core.Pool, scope)
	if err != nil {
		return nil, enginecore.WrapErr(err, "listing digests")
	}
	out := make([]Digest, len(rows))
	for i, r := range rows {
		out[i] = digestOut(r)
	}
	return out, nil
}

// Update changes a digest with the same checks as Create. A
// changed schedule applies from the next send time; it never resends a
// time already passed.
func (s *Service) Update(ctx context.Context, p engine.Principal, id int64, patch Patch) (Digest, error) {
	d, err := s.updateDigest(ctx, p, id, patch)
	return d, enginecore.WrapErr(err, "updating digest")
}

func (s *Service) updateDigest(ctx context.Context, p engine.Principal, id int64, patch Patch) (Digest, error) {
	if _, err := s.readDigest(ctx, p, id, true); err != nil {
		return Digest{}, err
	}
	var out store.Digest
	err := pgx.BeginFunc(ctx, s.core.Pool, func(tx pgx.Tx) error {
		row, err := store.GetDigestForUpdate(ctx, tx, id)
		if err != nil {
			return enginecore.NotFoundIfNoRows(err, "digest")
		}
		if patch.Name != nil {
			row.Name = *patch.Name
		}
		if patch.Schedule != nil {
			row.Schedule = *patch.Schedule
		}
		if patch.QueueIDs != nil {
			row.QueueIDs = *patch.QueueIDs
		}
		if patch.SinkIDs != nil {
			row.SinkIDs = *patch.SinkIDs
		}
		if patch.CairnConnectionID != nil {
			row.CairnConnectionID = *patch.CairnConnectionID
		}
		if patch.SkipWhenQuiet != nil {
			row.SkipWhenQuiet = *patch.SkipWhenQuiet
		}
		if patch.QuietThreshold != nil {
			row.QuietThresholdSecs = int(*patch.QuietThreshold / time.Second)
		}
		if row, err = s.checkDigest(ctx, tx, row); err != nil {
			return err
		}
		row.UpdatedByHumanID, row.UpdatedByEndpointID = p.HumanID, p.EndpointID
		if out, err = store.UpdateDigest(ctx, tx, row); err != nil {
			return digestNameTaken(err)
		}
		return enginecore.RecordWrite(ctx, tx, principal(p), out.Owner, writeDigestUpdate, objectDigest, out.ID)
	})
	if err != nil {
		return Digest{}, err
	}
	return digestOut(out), nil
}

// Delete deletes a digest and its run history.
func (s *Service) Delete(ctx context.Context, p engine.Principal, id int64) error {
	d, err := s.readDigest(ctx, p, id, true)
	if err != nil {
		return enginecore.WrapErr(err, "deleting digest")
	}
	err = pgx.BeginFunc(ctx, s.core.Pool, func(tx pgx.Tx) error {
		if err := enginecore.NotFoundIfNoRows(store.DeleteDigest(ctx, tx, id), "digest"); err != nil {
			return err
		}
		return enginecore.RecordWrite(ctx, tx, principal(p), d.Owner, writeDigestDelete, objectDigest, id)
	})
	return enginecore.WrapErr(err, "deleting digest")
}

// Run is what became of one digest built: sent (to how many sinks,
// with the Cairn artifact's link or the class of its failure), skipped as
// quiet, or skipped as too late.
type Run struct {
	ID       int64
	DigestID int64
	Owner    notifytype.OwnerScope
	// Kind is scheduled or manual (SendNow).
	Kind string
	// Outcome is sent, quiet, late or no_target.
	Outcome string
	// SlotAt is the scheduled time a scheduled run was for.
	SlotAt   *time.Time
	RanAt    time.Time
	Headline string
	// SinksQueued is how many sinks the digest was queued for.
	SinksQueued int
	// ArtifactURL is the Cairn artifact's link, when published;
	// CairnError the class of the publishing's failure.
	ArtifactURL string
	CairnError  string
}

func runOut(r store.DigestRun) Run { return Run(r) }

func runIn(r Run) store.DigestRun { return store.DigestRun(r) }

// Runs lists a digest's latest runs, newest first (at most limit).
func (s *Service) Runs(ctx context.Context, p engine.Principal, id int64, limit int) ([]Run, error) {
	if _, err := s.readDigest(ctx, p, id, false); err != nil {
		return nil, enginecore.WrapErr(err, "reading digest runs")
	}
	rows, err := store.ListDigestRuns(ctx, s.core.Pool, id, min(max(limit, 1), 100))
	if err != nil {
		return nil, enginecore.WrapErr(err, "reading digest runs")
	}
	runs := make([]Run, len(rows))
	for i, r := range rows {
		runs[i] = runOut(r)
	}
	return runs, nil
}

// Preview is a digest built now and not sent.
type Preview struct {
	Report digest.Report
	// Markdown is the digest as Cairn and the board show it.
	Markdown string
	// Text is the digest as a sink receives it in full.
	Text string
	// Quiet reports whether the digest would be skipped as quiet (with
	// skip_when_quiet).
	Quiet bool
}

// Preview builds a digest now, over the period its next send would
// cover, and returns it without sending anything or spending a slot. A
// member of a team may preview.
func (s *Service) Preview(ctx context.Context, p engine.Principal, id int64) (Preview, error) {
	d, err := s.readDigest(ctx, p, id, false)
	if err != nil {
		return Preview{}, enginecore.WrapErr(err, "previewing digest")
	}
	r, err := s.buildNow(ctx, d)
	if err != nil {
		return Preview{}, enginecore.WrapErr(err, "previewing digest")
	}
	return Preview{
		Report: r, Markdown: r.Text(digest.Markdown, s.core.BaseURL, s.reportLinks(d.Owner, d.ID)),
		Text: r.Text(digest.Plain, s.core.BaseURL, s.reportLinks(d.Owner, d.ID)), Quiet: r.Quiet(),
	}, nil
}

// SendNow builds a digest now and sends it to its targets, quiet or
// not, without spending its scheduled slot: the next scheduled send still
// happens, and still covers the time since the previous scheduled one.
// Only those who may change the digest may send it.
func (s *Service) SendNow(ctx context.Context, p engine.Principal, id int64) (Run, error) {
	d, err := s.readDigest(ctx, p, id, true)
	if err != nil {
		return Run{}, enginecore.WrapErr(err, "sending digest")
	}
	if err := enginecore.RecordWrite(ctx, s.core.Pool, principal(p), d.Owner, writeDigestSend, objectDigest, id); err != nil {
		return Run{}, enginecore.WrapErr(err, "sending digest")
	}
	r, err := s.buildNow(ctx, d)
	if err != nil {
		return Run{}, enginecore.WrapErr(err, "sending digest")
	}
	run, err := s.sendReport(ctx, d, r, Run{Kind: "manual"})
	return run, enginecore.WrapErr(err, "sending digest")
}

func (s *Service) buildNow(ctx context.Context, d store.Digest) (digest.Report, error) {
	now, err := store.DBNow(ctx, s.core.Pool)
	if err != nil {
		return digest.Report{}, err
	}
	return s.buildReport(ctx, d, d.LastSentAt, now), nil
}

func digestNameTaken(err error) error {
	if errors.Is(err, store.ErrDigestNameTaken) {
		return notifytype.InvalidArgument("name", "a digest with this name already exists in this owner scope")
	}
	return err
}
