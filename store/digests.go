package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/notifytype"
)

// ErrDigestNameTaken reports a digest name already used in its owner scope.
var ErrDigestNameTaken = errors.New("a digest with this name exists in this owner scope")

// Digest is a row of digests (REQ-12). QueueIDs empty means every queue of
// the scope; CairnConnectionID 0 means no Cairn target.
type Digest struct {
	ID                  int64
	Owner               notifytype.OwnerScope
	Name                string
	Schedule            string
	QueueIDs            []int64
	SinkIDs             []int64
	CairnConnectionID   int64
	SkipWhenQuiet       bool
	QuietThresholdSecs  int
	LastSentAt          *time.Time
	LastSlotAt          *time.Time
	CreatedAt           time.Time
	UpdatedAt           time.Time
	UpdatedByHumanID    string
	UpdatedByEndpointID int64
}

const digestColumns = `id, owner, name, schedule, queue_ids, sink_ids, coalesce(cairn_connection_id, 0), skip_when_quiet,
	quiet_threshold_secs, last_sent_at, last_slot_at, created_at, updated_at,
	coalesce(updated_by_human_id, ''), coalesce(updated_by_endpoint_id, 0)`

func scanDigest(row pgx.Row) (Digest, error) {
	var (
		d     Digest
		owner string
	)
	if err := row.Scan(&d.ID, &owner, &d.Name, &d.Schedule, &d.QueueIDs, &d.SinkIDs, &d.CairnConnectionID, &d.SkipWhenQuiet,
		&d.QuietThresholdSecs, &d.LastSentAt, &d.LastSlotAt, &d.CreatedAt, &d.UpdatedAt,
		&d.UpdatedByHumanID, &d.UpdatedByEndpointID); err != nil {
		return Digest{}, err
	}
	var err error
	if d.Owner, err = notifytype.ParseOwnerScope(owner); err != nil {
		return Digest{}, fmt.Errorf("error reading digest %d owner: %w", d.ID, err)
	}
	return d, nil
}

func ids(v []int64) []int64 {
	if v == nil {
		return []int64{}
	}
	return v
}

// CountDigests counts the digests of one owner scope.
func CountDigests(ctx context.Context, db DBTX, owner notifytype.OwnerScope) (int, error) {
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM switchboard.digests WHERE owner = $1`, owner.String()).Scan(&n); err != nil {
		return 0, fmt.Errorf("error counting digests: %w", err)
	}
	return n, nil
}

// InsertDigest stores a digest.
func InsertDigest(ctx context.Context, db DBTX, d Digest) (Digest, error) {
	out, err := scanDigest(db.QueryRow(ctx, `
		INSERT INTO switchboard.digests (owner, name, schedule, queue_ids, sink_ids, cairn_connection_id, skip_when_quiet,
		                     quiet_threshold_secs, updated_by_human_id, updated_by_endpoint_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING `+digestColumns,
		d.Owner.String(), d.Name, d.Schedule, ids(d.QueueIDs), ids(d.SinkIDs), nullID(d.CairnConnectionID), d.SkipWhenQuiet,
		d.QuietThresholdSecs, nullText(d.UpdatedByHumanID), nullID(d.UpdatedByEndpointID)))
	if isUniqueViolation(err, "digests_owner_name_key") {
		return Digest{}, ErrDigestNameTaken
	}
	if err != nil {
		return Digest{}, fmt.Errorf("error inserting digest: %w", err)
	}
	return out, nil
}

// GetDigest reads one digest.
func GetDigest(ctx context.Context, db DBTX, id int64) (Digest, error) {
	d, err := scanDigest(db.QueryRow(ctx, `SELECT `+digestColumns+` FROM switchboard.digests WHERE id = $1`, id))
	if err != nil {
		return Digest{}, fmt.Errorf("error reading digest %d: %w", id, err)
	}
	return d, nil
}

// GetDigestForUpdate reads one digest and locks its row until tx ends.
func GetDigestForUpdate(ctx context.Context, tx DBTX, id int64) (Digest, error) {
	d, err := scanDigest(tx.QueryRow(ctx, `SELECT `+digestColumns+` FROM switchboard.digests WHERE id = $1 FOR UPDATE`, id))
	if err != nil {
		return Digest{}, fmt.Errorf("error reading digest %d: %w", id, err)
	}
	return d, nil
}

// ListDigests lists an owner scope's digests, by name.
func ListDigests(ctx context.Context, db DBTX, owner notifytype.OwnerScope) ([]Digest, error) {
	rows, err := db.Query(ctx, `SELECT `+digestColumns+` FROM switchboard.digests WHERE owner = $1 ORDER BY name, id`, owner.String())
	if err != nil {
		return nil, fmt.Errorf("error listing digests: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Digest, error) { return scanDigest(r) })
	if err != nil {
		return nil, fmt.Errorf("error listing digests: %w", err)
	}
	return out, nil
}

// UpdateDigest writes a digest's editable fields.
func UpdateDigest(ctx context.Context, db DBTX, d Digest) (Digest, error) {
	out, err := scanDigest(db.QueryRow(ctx, `
		UPDATE switchboard.digests SET name = $2, schedule = $3, queue_ids = $4, sink_ids = $5, cairn_connection_id = $6,
		       skip_when_quiet = $7, quiet_threshold_secs = $8, updated_at = now(),
		       updated_by_human_id = $9, updated_by_endpoint_id = $10
		WHERE id = $1 RETURNING `+digestColumns,
		d.ID, d.Name, d.Schedule, ids(d.QueueIDs), ids(d.SinkIDs), nullID(d.CairnConnectionID), d.SkipWhenQuiet,
		d.QuietThresholdSecs, nullText(d.UpdatedByHumanID), nullID(d.UpdatedByEndpointID)))
	if isUniqueViolation(err, "digests_owner_name_key") {
		return Digest{}, ErrDigestNameTaken
	}
	if err != nil {
		return Digest{}, fmt.Errorf("error updating digest %d: %w", d.ID, err)
	}
	return out, nil
}

// DeleteDigest deletes a digest and its runs; pgx.ErrNoRows when none.
func DeleteDigest(ctx context.Context, db DBTX, id int64) error {
	tag, err := db.Exec(ctx, `DELETE FROM switchboard.digests WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("error deleting digest %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return pgx.ErrNoRows
	}
	return nil
}

// ScheduledDigest is what the scheduler needs of a digest to find its due
// slot, with the database's now.
type ScheduledDigest struct {
	ID         int64
	Schedule   string
	LastSlotAt *time.Time
	CreatedAt  time.Time
	DBNow      time.Time
}

// ScheduledDigests lists every digest with the database's clock.
func ScheduledDigests(ctx context.Context, db DBTX) ([]ScheduledDigest, error) {
	rows, err := db.Query(ctx, `SELECT id, schedule, last_slot_at, created_at, now() FROM switchboard.digests ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("error listing scheduled digests: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ScheduledDigest, error) {
		var d ScheduledDigest
		err := r.Scan(&d.ID, &d.Schedule, &d.LastSlotAt, &d.CreatedAt, &d.DBNow)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing scheduled digests: %w", err)
	}
	return out, nil
}

// SlotClaim is the outcome of claiming a digest's scheduled time.
type SlotClaim struct {
	// Claimed is true for exactly one claimant of a slot.
	Claimed bool
	// Late is true when the slot was claimed an hour or more after its
	// time (on the database's clock): it is skipped, not sent.
	Late bool
	// PrevSentAt is the previous digest's send time, nil for the first.
	PrevSentAt *time.Time
	// SentAt is the database's now at the claim.
	SentAt time.Time
}

// claimSlotSQL claims slot $2 of digest $1 in one statement: it moves
// last_slot_at to the slot only while it is older, the slot has passed on
// the database's clock and the digest existed before it. A slot claimed
// $3 or more after its time is recorded as passed but not sent (its
// last_sent_at stays). Concurrent claimants of one slot queue on the row
// lock; the one after the first finds last_slot_at moved and claims
// nothing.
const claimSlotSQL = `
WITH prev AS (SELECT id, last_sent_at FROM switchboard.digests WHERE id = $1 FOR UPDATE)
UPDATE switchboard.digests d SET last_slot_at = $2,
       last_sent_at = CASE WHEN now() - $2 < $3::interval THEN now() ELSE d.last_sent_at END
FROM prev
WHERE d.id = prev.id AND (d.last_slot_at IS NULL OR d.last_slot_at < $2) AND $2 <= now() AND d.created_at < $2
RETURNING prev.last_sent_at, now() - $2 >= $3::interval, now()`

// ClaimDigestSlot claims one scheduled time of a digest for this instance.
func ClaimDigestSlot(ctx context.Context, db DBTX, id int64, slot time.Time, lateAfter time.Duration) (SlotClaim, error) {
	var c SlotClaim
	err := db.QueryRow(ctx, claimSlotSQL, id, slot, lateAfter).Scan(&c.PrevSentAt, &c.Late, &c.SentAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return SlotClaim{}, nil
	}
	if err != nil {
		return SlotClaim{}, fmt.Errorf("error claiming digest %d slot: %w", id, err)
	}
	c.Claimed = true
	return c, nil
}

// DBNow is the database's clock.
func DBNow(ctx context.Context, db DBTX) (time.Time, error) {
	var now time.Time
	if err := db.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("error reading the database's clock: %w", err)
	}
	return now, nil
}

// DigestRun is a row of digest_runs.
type DigestRun struct {
	ID          int64
	DigestID    int64
	Owner       notifytype.OwnerScope
	Kind        string // scheduled | manual
	Outcome     string // sent | quiet | late | no_target
	SlotAt      *time.Time
	RanAt       time.Time
	Headline    string
	SinksQueued int
	ArtifactURL string
	CairnError  string
}

// InsertDigestRun records what became of a digest built (or skipped).
func InsertDigestRun(ctx context.Context, db DBTX, r DigestRun) error {
	_, err := db.Exec(ctx, `
		INSERT INTO switchboard.digest_runs (digest_id, owner, kind, outcome, slot_at, headline, sinks_queued, artifact_url, cairn_error)
		VALUES ($1, $2, $3, $4, $5, $6, $7, nullif($8, ''), nullif($9, ''))`,
		r.DigestID, r.Owner.String(), r.Kind, r.Outcome, r.SlotAt, r.Headline, r.SinksQueued, r.ArtifactURL, r.CairnError)
	if err != nil {
		return fmt.Errorf("error recording digest %d run: %w", r.DigestID, err)
	}
	return nil
}

// ListDigestRuns lists a digest's latest runs, newest first.
func ListDigestRuns(ctx context.Context, db DBTX, digestID int64, limit int) ([]DigestRun, error) {
	rows, err := db.Query(ctx, `
		SELECT id, digest_id, owner, kind, outcome, slot_at, ran_at, headline, sinks_queued,
		       coalesce(artifact_url, ''), coalesce(cairn_error, '')
		FROM switchboard.digest_runs WHERE digest_id = $1 ORDER BY id DESC LIMIT $2`, digestID, limit)
	if err != nil {
		return nil, fmt.Errorf("error listing digest runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DigestRun, error) {
		var (
			d     DigestRun
			owner string
		)
		if err := r.Scan(&d.ID, &d.DigestID, &owner, &d.Kind, &d.Outcome, &d.SlotAt, &d.RanAt, &d.Headline,
			&d.SinksQueued, &d.ArtifactURL, &d.CairnError); err != nil {
			return d, err
		}
		var err error
		d.Owner, err = notifytype.ParseOwnerScope(owner)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing digest runs: %w", err)
	}
	return out, nil
}

// CountUndeliverable counts an owner scope's notifications recorded
// undeliverable since since.
func CountUndeliverable(ctx context.Context, db DBTX, owner notifytype.OwnerScope, since time.Time) (int, error) {
	var n int
	err := db.QueryRow(ctx, `SELECT count(*) FROM switchboard.outbox WHERE owner = $1 AND state = 'undeliverable' AND finished_at >= $2`,
		owner.String(), since).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("error counting undeliverable notifications: %w", err)
	}
	return n, nil
}

// EnqueueDigestTx writes one pending digest row into the outbox for each
// of sinkIDs that is an enabled sink of owner, and wakes the claimers at
// commit. The rows are due at the database's now(), decided inside the
// statement, never by an instance's own clock; due, when not zero, stands
// in for it (a test's fake database clock). It returns the sinks it queued
// for. The rows are delivered like any other: budgets, retries and records
// apply.
func EnqueueDigestTx(ctx context.Context, tx DBTX, owner notifytype.OwnerScope, sinkIDs []int64, payload []byte, due time.Time) ([]int64, error) {
	rows, err := tx.Query(ctx, `
		WITH ins AS (
			INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at)
			SELECT k.id, k.owner, 'digest', 'low', $3, coalesce($4::timestamptz, now()) FROM switchboard.sinks k
			WHERE k.id = ANY ($1) AND k.owner = $2 AND k.enabled
			ORDER BY k.id
			RETURNING sink_id)
		SELECT sink_id, pg_notify('switchboard_outbox', '') FROM ins`, ids(sinkIDs), owner.String(), payload, orNow(due))
	if err != nil {
		return nil, fmt.Errorf("error enqueueing digest: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (int64, error) {
		var id int64
		var ignored any
		err := r.Scan(&id, &ignored)
		return id, err
	})
	if err != nil {
		return nil, fmt.Errorf("error enqueueing digest: %w", err)
	}
	return out, nil
}

// orNow is t as a statement's argument, NULL when t is zero: the statement
// then takes the database's now() (coalesce($n, now())).
func orNow(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
