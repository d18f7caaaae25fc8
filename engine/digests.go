package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/engine/digest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

// Digest limits (REQ-12, REQ-13).
const (
	// MaxDigestsPerScope is the most digests one owner scope may have.
	MaxDigestsPerScope = 5
	// QuietThresholdDefault is the oldest-pending age above which a digest
	// is not quiet, unless the digest sets its own.
	QuietThresholdDefault = time.Hour
	// QuietThresholdMin and QuietThresholdMax bound a digest's threshold.
	QuietThresholdMin = time.Minute
	QuietThresholdMax = 7 * 24 * time.Hour
	// DigestLateAfter is how late a scheduled time may be sent: a time
	// missed during downtime is sent once on recovery if less late than
	// this, and skipped otherwise.
	DigestLateAfter = time.Hour
)

// DigestInput is a digest as a caller creates it (REQ-12).
type DigestInput struct {
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

// DigestPatch changes a digest; a nil field keeps its value.
type DigestPatch struct {
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

// CreateDigest validates and stores a digest: permissions as for sinks
// (D2, D3), name, schedule (invalid_argument naming schedule), queues and
// sinks of the same scope, a Cairn connection of the same scope and kind
// (else forbidden), at least one target, the threshold, and at most 5
// digests per scope, which holds under concurrent creates.
func (e *Engine) CreateDigest(ctx context.Context, p Principal, in DigestInput) (Digest, error) {
	d, err := e.createDigest(ctx, p, in)
	return d, wrapErr(err, "creating digest")
}

func (e *Engine) createDigest(ctx context.Context, p Principal, in DigestInput) (Digest, error) {
	if err := e.authorizeTarget(ctx, p, in.Owner); err != nil {
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
	err := pgx.BeginFunc(ctx, e.cfg.Pool, func(tx pgx.Tx) error {
		if err := store.LockOwnerScope(ctx, tx, in.Owner); err != nil {
			return err
		}
		var err error
		if row, err = e.checkDigest(ctx, tx, row); err != nil {
			return err
		}
		n, err := store.CountDigests(ctx, tx, in.Owner)
		if err != nil {
			return err
		}
		if n >= MaxDigestsPerScope {
			return notifytype.InvalidArgumentf("digests", "this owner scope already has %d digests, the most allowed; delete one first", MaxDigestsPerScope)
		}
		if out, err = store.InsertDigest(ctx, tx, row); err != nil {
			return digestNameTaken(err)
		}
		return RecordWrite(ctx, tx, p, out.Owner, writeDigestCreate, objectDigest, out.ID)
	})
	if err != nil {
		return Digest{}, err
	}
	return digestOut(out), nil
}

// checkDigest validates every field of a digest row and returns it
// normalised (schedule canonical, ids sorted without repeats).
func (e *Engine) checkDigest(ctx context.Context, db store.DBTX, d store.Digest) (store.Digest, error) {
	if err := checkName(d.Name); err != nil {
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
		owned, err := e.cfg.Directory.Owned(ctx, d.Owner, ResourceQueue, d.QueueIDs)
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
		if _, err := connectionFor(ctx, db, d.CairnConnectionID, d.Owner, KindCairn); err != nil {
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

// GetDigest reads one digest; another scope's digest is not_found.
func (e *Engine) GetDigest(ctx context.Context, p Principal, id int64) (Digest, error) {
	d, err := e.readDigest(ctx, p, id, false)
	if err != nil {
		return Digest{}, wrapErr(err, "reading digest")
	}
	return digestOut(d), nil
}

func (e *Engine) readDigest(ctx context.Context, p Principal, id int64, write bool) (store.Digest, error) {
	d, err := store.GetDigest(ctx, e.cfg.Pool, id)
	if err != nil {
		return store.Digest{}, notFoundIfNoRows(err, "digest")
	}
	if err := e.authorizeResource(ctx, p, d.Owner, write, "digest"); err != nil {
		return store.Digest{}, err
	}
	return d, nil
}

// ListDigests lists an owner scope's digests, by name.
func (e *Engine) ListDigests(ctx context.Context, p Principal, scope notifytype.OwnerScope) ([]Digest, error) {
	if err := e.authorize(ctx, p, scope, false); err != nil {
		return nil, err
	}
	rows, err := store.ListDigests(ctx, e.cfg.Pool, scope)
	if err != nil {
		return nil, wrapErr(err, "listing digests")
	}
	out := make([]Digest, len(rows))
	for i, r := range rows {
		out[i] = digestOut(r)
	}
	return out, nil
}

// UpdateDigest changes a digest with the same checks as CreateDigest. A
// changed schedule applies from the next send time; it never resends a
// time already passed.
func (e *Engine) UpdateDigest(ctx context.Context, p Principal, id int64, patch DigestPatch) (Digest, error) {
	d, err := e.updateDigest(ctx, p, id, patch)
	return d, wrapErr(err, "updating digest")
}

func (e *Engine) updateDigest(ctx context.Context, p Principal, id int64, patch DigestPatch) (Digest, error) {
	if _, err := e.readDigest(ctx, p, id, true); err != nil {
		return Digest{}, err
	}
	var out store.Digest
	err := pgx.BeginFunc(ctx, e.cfg.Pool, func(tx pgx.Tx) error {
		row, err := store.GetDigestForUpdate(ctx, tx, id)
		if err != nil {
			return notFoundIfNoRows(err, "digest")
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
		if row, err = e.checkDigest(ctx, tx, row); err != nil {
			return err
		}
		row.UpdatedByHumanID, row.UpdatedByEndpointID = p.HumanID, p.EndpointID
		if out, err = store.UpdateDigest(ctx, tx, row); err != nil {
			return digestNameTaken(err)
		}
		return RecordWrite(ctx, tx, p, out.Owner, writeDigestUpdate, objectDigest, out.ID)
	})
	if err != nil {
		return Digest{}, err
	}
	return digestOut(out), nil
}

// DeleteDigest deletes a digest and its run history.
func (e *Engine) DeleteDigest(ctx context.Context, p Principal, id int64) error {
	d, err := e.readDigest(ctx, p, id, true)
	if err != nil {
		return wrapErr(err, "deleting digest")
	}
	err = pgx.BeginFunc(ctx, e.cfg.Pool, func(tx pgx.Tx) error {
		if err := notFoundIfNoRows(store.DeleteDigest(ctx, tx, id), "digest"); err != nil {
			return err
		}
		return RecordWrite(ctx, tx, p, d.Owner, writeDigestDelete, objectDigest, id)
	})
	return wrapErr(err, "deleting digest")
}

// DigestRun is what became of one digest built: sent (to how many sinks,
// with the Cairn artifact's link or the class of its failure), skipped as
// quiet, or skipped as too late.
type DigestRun = store.DigestRun

// DigestRuns lists a digest's latest runs, newest first (at most limit).
func (e *Engine) DigestRuns(ctx context.Context, p Principal, id int64, limit int) ([]DigestRun, error) {
	if _, err := e.readDigest(ctx, p, id, false); err != nil {
		return nil, wrapErr(err, "reading digest runs")
	}
	runs, err := store.ListDigestRuns(ctx, e.cfg.Pool, id, min(max(limit, 1), 100))
	return runs, wrapErr(err, "reading digest runs")
}

// DigestPreview is a digest built now and not sent.
type DigestPreview struct {
	Report digest.Report
	// Markdown is the digest as Cairn and the board show it.
	Markdown string
	// Text is the digest as a sink receives it in full.
	Text string
	// Quiet reports whether the digest would be skipped as quiet (with
	// skip_when_quiet).
	Quiet bool
}

// PreviewDigest builds a digest now, over the period its next send would
// cover, and returns it without sending anything or spending a slot. A
// member of a team may preview.
func (e *Engine) PreviewDigest(ctx context.Context, p Principal, id int64) (DigestPreview, error) {
	d, err := e.readDigest(ctx, p, id, false)
	if err != nil {
		return DigestPreview{}, wrapErr(err, "previewing digest")
	}
	r, err := e.buildNow(ctx, d)
	if err != nil {
		return DigestPreview{}, wrapErr(err, "previewing digest")
	}
	return DigestPreview{
		Report: r, Markdown: r.Text(digest.Markdown, e.cfg.BaseURL, e.reportLinks(d.Owner, d.ID)),
		Text: r.Text(digest.Plain, e.cfg.BaseURL, e.reportLinks(d.Owner, d.ID)), Quiet: r.Quiet(),
	}, nil
}

// SendDigestNow builds a digest now and sends it to its targets, quiet or
// not, without spending its scheduled slot: the next scheduled send still
// happens, and still covers the time since the previous scheduled one.
// Only those who may change the digest may send it.
func (e *Engine) SendDigestNow(ctx context.Context, p Principal, id int64) (DigestRun, error) {
	d, err := e.readDigest(ctx, p, id, true)
	if err != nil {
		return DigestRun{}, wrapErr(err, "sending digest")
	}
	if err := RecordWrite(ctx, e.cfg.Pool, p, d.Owner, writeDigestSend, objectDigest, id); err != nil {
		return DigestRun{}, wrapErr(err, "sending digest")
	}
	r, err := e.buildNow(ctx, d)
	if err != nil {
		return DigestRun{}, wrapErr(err, "sending digest")
	}
	run, err := e.sendReport(ctx, d, r, DigestRun{Kind: "manual"})
	return run, wrapErr(err, "sending digest")
}

func (e *Engine) buildNow(ctx context.Context, d store.Digest) (digest.Report, error) {
	now, err := store.DBNow(ctx, e.cfg.Pool)
	if err != nil {
		return digest.Report{}, err
	}
	return e.buildReport(ctx, d, d.LastSentAt, now), nil
}

func digestNameTaken(err error) error {
	if errors.Is(err, store.ErrDigestNameTaken) {
		return notifytype.InvalidArgument("name", "a digest with this name already exists in this owner scope")
	}
	return err
}
