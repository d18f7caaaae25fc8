package hoststore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// TodoRow is one row of the reference host's todos (D15). Nullable columns
// are pointers.
type TodoRow struct {
	ID              int64
	QueueID         int64
	Owner           string
	Title           string
	Payload         []byte
	State           string
	ClaimedBy       *int64
	LeaseTTLSecs    int
	LeaseExpiresAt  *time.Time
	LastHeartbeatAt *time.Time
	Attempts        int
	AttemptCap      int
	DeadLetterCount int
	DeadReason      *string
	OriginDisplay   *string
	OriginPermalink *string
	WebhookID       *int64
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

const todoColumns = `t.id, t.queue_id, t.owner, t.title, t.payload, t.state, t.claimed_by,
	t.lease_ttl_secs, t.lease_expires_at, t.last_heartbeat_at, t.attempts, t.attempt_cap,
	t.dead_letter_count, t.dead_reason, t.origin_display, t.origin_permalink, t.webhook_id,
	t.created_at, t.updated_at`

func scanTodo(row pgx.Row) (TodoRow, error) {
	var r TodoRow
	err := row.Scan(&r.ID, &r.QueueID, &r.Owner, &r.Title, &r.Payload, &r.State, &r.ClaimedBy,
		&r.LeaseTTLSecs, &r.LeaseExpiresAt, &r.LastHeartbeatAt, &r.Attempts, &r.AttemptCap,
		&r.DeadLetterCount, &r.DeadReason, &r.OriginDisplay, &r.OriginPermalink, &r.WebhookID,
		&r.CreatedAt, &r.UpdatedAt)
	return r, err
}

func collectTodos(rows pgx.Rows, err error) ([]TodoRow, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (TodoRow, error) { return scanTodo(r) })
}

// TodoInsert is a new pending todo. Its owner is its queue's.
type TodoInsert struct {
	QueueID         int64
	Title           string
	Payload         []byte
	AttemptCap      int
	LeaseTTLSecs    int
	OriginDisplay   *string
	OriginPermalink *string
	WebhookID       *int64
	Now             time.Time
}

// InsertTodo inserts a pending todo in its queue's owner scope. A queue that
// does not exist is not_found.
func InsertTodo(ctx context.Context, db DBTX, in TodoInsert) (TodoRow, error) {
	r, err := scanTodo(db.QueryRow(ctx, `INSERT INTO todos AS t (queue_id, owner, title, payload,
			attempt_cap, lease_ttl_secs, origin_display, origin_permalink, webhook_id, created_at, updated_at)
		SELECT q.id, q.owner, $2, $3, $4, $5, $6, $7, $8, $9, $9 FROM queues q WHERE q.id = $1
		RETURNING `+todoColumns,
		in.QueueID, in.Title, in.Payload, in.AttemptCap, in.LeaseTTLSecs,
		in.OriginDisplay, in.OriginPermalink, in.WebhookID, in.Now))
	if err != nil {
		return TodoRow{}, fmt.Errorf("error inserting todo: %w", notFound(err, "queue"))
	}
	return r, nil
}

// WebhookExists reports whether a webhook with this id exists, in any scope.
func WebhookExists(ctx context.Context, db DBTX, id int64) (bool, error) {
	var ok bool
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhooks WHERE id = $1)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("error reading webhook: %w", err)
	}
	return ok, nil
}

// ClaimantEndpoint is what the todo verbs need of the endpoint acting.
type ClaimantEndpoint struct {
	ID      int64
	Owner   string
	Grants  []string
	Revoked bool
}

// LockClaimantEndpoint reads the endpoint FOR SHARE, so that a revocation
// waits for the caller's transaction and then sees what it did (and a
// caller waiting on a revocation sees the endpoint revoked). An endpoint
// that does not exist is not_found.
func LockClaimantEndpoint(ctx context.Context, db DBTX, id int64) (ClaimantEndpoint, error) {
	var e ClaimantEndpoint
	err := db.QueryRow(ctx, `SELECT id, owner, grants, revoked_at IS NOT NULL FROM endpoints
		WHERE id = $1 FOR SHARE`, id).Scan(&e.ID, &e.Owner, &e.Grants, &e.Revoked)
	if err != nil {
		return ClaimantEndpoint{}, fmt.Errorf("error reading endpoint: %w", notFound(err, "endpoint"))
	}
	return e, nil
}

// MarkEndpointRevoked sets the endpoint's revoked_at to now unless it is
// already set, holding its row lock until the transaction ends. An endpoint
// that does not exist is not_found.
func MarkEndpointRevoked(ctx context.Context, db DBTX, id int64, now time.Time) error {
	var got int64
	err := db.QueryRow(ctx, `UPDATE endpoints SET revoked_at = coalesce(revoked_at, $2)
		WHERE id = $1 RETURNING id`, id, now).Scan(&got)
	if err != nil {
		return fmt.Errorf("error revoking endpoint: %w", notFound(err, "endpoint"))
	}
	return nil
}

// QueueClaimable reports whether a queue exists that an endpoint of
// endpointOwner may claim from: one of the same owner scope, or, when
// memberHumanID is not zero, one of a team that human belongs to.
func QueueClaimable(ctx context.Context, db DBTX, queueID int64, endpointOwner string, memberHumanID int64) (bool, error) {
	var ok bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM queues q WHERE q.id = $1 AND (q.owner = $2
		OR q.owner IN (SELECT 'team:' || m.team_id FROM team_members m WHERE m.human_id = $3)))`,
		queueID, endpointOwner, memberHumanID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("error reading queue: %w", err)
	}
	return ok, nil
}

// ClaimNextTodo claims the oldest pending todo of the queue for the
// endpoint in one statement (FOR UPDATE SKIP LOCKED): attempts + 1, a lease
// of the todo's TTL from now. It returns pgx.ErrNoRows when none is free.
func ClaimNextTodo(ctx context.Context, db DBTX, queueID, endpointID int64, now time.Time) (TodoRow, error) {
	r, err := scanTodo(db.QueryRow(ctx, `WITH next AS (
			SELECT id FROM todos WHERE queue_id = $1 AND state = 'pending'
			ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED
		)
		UPDATE todos t SET state = 'claimed', claimed_by = $2, attempts = t.attempts + 1,
			lease_expires_at = $3::timestamptz + t.lease_ttl_secs * interval '1 second',
			last_heartbeat_at = $3, updated_at = $3
		FROM next WHERE t.id = next.id
		RETURNING `+todoColumns, queueID, endpointID, now))
	if err != nil {
		return TodoRow{}, fmt.Errorf("error claiming todo: %w", err)
	}
	return r, nil
}

// ClaimTodoByID claims one pending todo of the queue, by id, like
// ClaimNextTodo. It returns pgx.ErrNoRows when that todo is not pending
// (or not of the queue, or locked by another claim).
func ClaimTodoByID(ctx context.Context, db DBTX, queueID, todoID, endpointID int64, now time.Time) (TodoRow, error) {
	r, err := scanTodo(db.QueryRow(ctx, `WITH next AS (
			SELECT id FROM todos WHERE queue_id = $1 AND id = $4 AND state = 'pending'
			FOR UPDATE SKIP LOCKED
		)
		UPDATE todos t SET state = 'claimed', claimed_by = $2, attempts = t.attempts + 1,
			lease_expires_at = $3::timestamptz + t.lease_ttl_secs * interval '1 second',
			last_heartbeat_at = $3, updated_at = $3
		FROM next WHERE t.id = next.id
		RETURNING `+todoColumns, queueID, endpointID, now, todoID))
	if err != nil {
		return TodoRow{}, fmt.Errorf("error claiming todo %d: %w", todoID, err)
	}
	return r, nil
}

// LockTodo reads a todo FOR UPDATE. A todo that does not exist is
// not_found.
func LockTodo(ctx context.Context, db DBTX, id int64) (TodoRow, error) {
	r, err := scanTodo(db.QueryRow(ctx, `SELECT `+todoColumns+` FROM todos t WHERE t.id = $1 FOR UPDATE`, id))
	if err != nil {
		return TodoRow{}, fmt.Errorf("error reading todo: %w", notFound(err, "todo"))
	}
	return r, nil
}

// LockClaimedTodo reads FOR UPDATE a todo the endpoint holds claimed. Any
// other todo, of whatever scope or claimant, is not_found (D3).
func LockClaimedTodo(ctx context.Context, db DBTX, id, endpointID int64) (TodoRow, error) {
	r, err := scanTodo(db.QueryRow(ctx, `SELECT `+todoColumns+` FROM todos t
		WHERE t.id = $1 AND t.state = 'claimed' AND t.claimed_by = $2 FOR UPDATE`, id, endpointID))
	if err != nil {
		return TodoRow{}, fmt.Errorf("error reading todo: %w", notFound(err, "todo"))
	}
	return r, nil
}

// LockExpiredTodos locks up to limit claimed todos whose lease ended at or
// before now, skipping those another transaction holds (SKIP LOCKED).
func LockExpiredTodos(ctx context.Context, db DBTX, now time.Time, limit int) ([]TodoRow, error) {
	rs, err := collectTodos(db.Query(ctx, `SELECT `+todoColumns+` FROM todos t
		WHERE t.state = 'claimed' AND t.lease_expires_at <= $1
		ORDER BY t.id LIMIT $2 FOR UPDATE SKIP LOCKED`, now, limit))
	if err != nil {
		return nil, fmt.Errorf("error reading expired todos: %w", err)
	}
	return rs, nil
}

// LockTodosClaimedBy locks every todo the endpoint holds claimed, in id
// order, waiting for any another transaction holds.
func LockTodosClaimedBy(ctx context.Context, db DBTX, endpointID int64) ([]TodoRow, error) {
	rs, err := collectTodos(db.Query(ctx, `SELECT `+todoColumns+` FROM todos t
		WHERE t.state = 'claimed' AND t.claimed_by = $1 ORDER BY t.id FOR UPDATE`, endpointID))
	if err != nil {
		return nil, fmt.Errorf("error reading claimed todos: %w", err)
	}
	return rs, nil
}

// ExtendTodoLease renews the lease of a claimed todo: a full TTL from now.
func ExtendTodoLease(ctx context.Context, db DBTX, id int64, now time.Time) (TodoRow, error) {
	return updateTodo(ctx, db, "extending lease", `UPDATE todos t SET
		lease_expires_at = $2::timestamptz + t.lease_ttl_secs * interval '1 second',
		last_heartbeat_at = $2, updated_at = $2
		WHERE t.id = $1 RETURNING `+todoColumns, id, now)
}

// CompleteTodo marks a todo done and clears its claim.
func CompleteTodo(ctx context.Context, db DBTX, id int64, now time.Time) (TodoRow, error) {
	return updateTodo(ctx, db, "completing todo", `UPDATE todos t SET state = 'done',
		claimed_by = NULL, lease_expires_at = NULL, updated_at = $2
		WHERE t.id = $1 RETURNING `+todoColumns, id, now)
}

// ReleaseTodo puts a claimed todo back to pending, its claim cleared and its
// attempt count kept.
func ReleaseTodo(ctx context.Context, db DBTX, id int64, now time.Time) (TodoRow, error) {
	return updateTodo(ctx, db, "releasing todo", `UPDATE todos t SET state = 'pending',
		claimed_by = NULL, lease_expires_at = NULL, updated_at = $2
		WHERE t.id = $1 RETURNING `+todoColumns, id, now)
}

// DeadLetterTodo marks a todo dead: dead_letter_count + 1, the reason set,
// the claim cleared.
func DeadLetterTodo(ctx context.Context, db DBTX, id int64, reason string, now time.Time) (TodoRow, error) {
	return updateTodo(ctx, db, "dead-lettering todo", `UPDATE todos t SET state = 'dead',
		dead_letter_count = t.dead_letter_count + 1, dead_reason = $2,
		claimed_by = NULL, lease_expires_at = NULL, updated_at = $3
		WHERE t.id = $1 RETURNING `+todoColumns, id, reason, now)
}

// RequeueTodo puts a dead todo back to pending with its attempts reset to 0
// and its dead-letter count kept, so its next dead letter has a new key.
func RequeueTodo(ctx context.Context, db DBTX, id int64, now time.Time) (TodoRow, error) {
	return updateTodo(ctx, db, "requeueing todo", `UPDATE todos t SET state = 'pending',
		attempts = 0, dead_reason = NULL, claimed_by = NULL, lease_expires_at = NULL, updated_at = $2
		WHERE t.id = $1 RETURNING `+todoColumns, id, now)
}

func updateTodo(ctx context.Context, db DBTX, doing, sql string, args ...any) (TodoRow, error) {
	r, err := scanTodo(db.QueryRow(ctx, sql, args...))
	if err != nil {
		return TodoRow{}, fmt.Errorf("error %s: %w", doing, notFound(err, "todo"))
	}
	return r, nil
}

// InsertAttempt starts the todo's next attempt in its history (D16) and
// returns its number. Numbers run on across re-queues. The caller holds the
// todo's row lock.
func InsertAttempt(ctx context.Context, db DBTX, todoID int64, kind string, endpointID int64, now time.Time) (int, error) {
	var n int
	err := db.QueryRow(ctx, `INSERT INTO attempts (todo_id, number, kind, endpoint_id, started_at)
		SELECT $1, coalesce(max(number), 0) + 1, $2, $3, $4 FROM attempts WHERE todo_id = $1
		RETURNING number`, todoID, kind, endpointID, now).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("error inserting attempt: %w", err)
	}
	return n, nil
}

// AttemptFinish closes the todo's open attempt. Summary and ArtifactHandle
// are kept as they are when nil.
type AttemptFinish struct {
	TodoID         int64
	Outcome        string
	Summary        *string
	ArtifactHandle *string
	Now            time.Time
}

// FinishOpenAttempt closes the todo's open attempt, if it has one, and
// reports whether it did.
func FinishOpenAttempt(ctx context.Context, db DBTX, f AttemptFinish) (bool, error) {
	tag, err := db.Exec(ctx, `UPDATE attempts SET outcome = $2,
		summary = coalesce($3, summary), artifact_handle = coalesce($4, artifact_handle), finished_at = $5
		WHERE todo_id = $1 AND finished_at IS NULL`, f.TodoID, f.Outcome, f.Summary, f.ArtifactHandle, f.Now)
	if err != nil {
		return false, fmt.Errorf("error finishing attempt: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// DeadLetterContext is what a todo's dead-letter message needs beyond the
// todo row: its queue's name, whether its history has a relay attempt
// (D16), and its latest attempt's summary and artifact handle.
type DeadLetterContext struct {
	QueueName          string
	HasRelay           bool
	LastSummary        *string
	LastArtifactHandle *string
}

// TodoDeadLetterContext reads the dead-letter context of a todo.
func TodoDeadLetterContext(ctx context.Context, db DBTX, todoID int64) (DeadLetterContext, error) {
	var c DeadLetterContext
	err := db.QueryRow(ctx, `SELECT q.name,
			EXISTS (SELECT 1 FROM attempts a WHERE a.todo_id = t.id AND a.kind = 'relay'),
			la.summary, la.artifact_handle
		FROM todos t JOIN queues q ON q.id = t.queue_id
		LEFT JOIN LATERAL (SELECT a.summary, a.artifact_handle FROM attempts a
			WHERE a.todo_id = t.id ORDER BY a.number DESC LIMIT 1) la ON true
		WHERE t.id = $1`, todoID).Scan(&c.QueueName, &c.HasRelay, &c.LastSummary, &c.LastArtifactHandle)
	if err != nil {
		return DeadLetterContext{}, fmt.Errorf("error reading dead-letter context: %w", notFound(err, "todo"))
	}
	return c, nil
}

// EnsureQueue returns the id of owner's queue name, creating it if needed.
func EnsureQueue(ctx context.Context, db DBTX, owner, name string) (int64, error) {
	var id int64
	err := db.QueryRow(ctx, `
		WITH ins AS (
		    INSERT INTO queues (owner, name) VALUES ($1, $2) ON CONFLICT (owner, name) DO NOTHING RETURNING id
		)
		SELECT id FROM ins UNION ALL SELECT id FROM queues WHERE owner = $1 AND name = $2 LIMIT 1`, owner, name).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("error ensuring queue %s: %w", name, err)
	}
	return id, nil
}
