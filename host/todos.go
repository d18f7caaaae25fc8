package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/clocks"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/notifytype"
)

// Defaults and bounds of todo input.
const (
	// AttemptCapDefault is a todo's attempt cap when its input gives none.
	AttemptCapDefault = 3
	// LeaseTTLDefault is a todo's lease TTL when its input gives none.
	LeaseTTLDefault = 5 * time.Minute
	// ReapBatchDefault is how many expired leases one reaper transaction
	// takes at most.
	ReapBatchDefault = 100
	// TitleMaxLen bounds a todo title, in characters. Rendering truncates
	// further (REQ-9); this only refuses abuse.
	TitleMaxLen = 1000
	// AttemptSummaryMaxLen and ArtifactHandleMaxLen bound an attempt
	// report, in characters.
	AttemptSummaryMaxLen = 4000
	ArtifactHandleMaxLen = 1000
)

// TodoState is where a todo is in its life (D15).
type TodoState string

const (
	TodoPending TodoState = "pending"
	TodoClaimed TodoState = "claimed"
	TodoDone    TodoState = "done"
	TodoDead    TodoState = "dead"
)

// Cause is why a todo dead-lettered. It is stored as the todo's
// dead_reason and carried by the notification (REQ-9).
type Cause string

const (
	CauseFailAtCap       Cause = "fail at the cap"
	CauseLeaseExpired    Cause = "lease expired at the cap"
	CauseEndpointRevoked Cause = "endpoint revoked"
	CauseInterrupted     Cause = "interrupted"
)

// AttemptKind is who made an attempt (D16): the claiming agent itself, or
// a relay (Harness SPEC-0019) acting for it.
type AttemptKind string

const (
	AttemptAgent AttemptKind = "agent"
	AttemptRelay AttemptKind = "relay"
)

// Attempt outcomes, as the attempts table records them.
const (
	outcomeDone        = "done"
	outcomeFailed      = "failed"
	outcomeExpired     = "expired"
	outcomeRevoked     = "revoked"
	outcomeInterrupted = "interrupted"
)

// grantTodos is the verb family an endpoint needs to work todos (D5).
const grantTodos = "todos"

// Emitter is the engine's Emit as the host calls it: inside the
// transaction of the state change. An *engine.Engine satisfies it.
type Emitter interface {
	Emit(ctx context.Context, tx pgx.Tx, ev engine.Event) error
}

var _ Emitter = (*engine.Engine)(nil)

// Todos is the reference host's queues of todos (SPEC-0003 stand-in, D15)
// and their attempt history (SPEC-0034 stand-in, D16). Each method is one
// transaction; every time it stores or compares is read from its clock.
// Every dead letter (fail at the cap, lease expiry at the cap, revocation of
// the claimant, interrupt) emits one todo.dead_lettered, or relay.exhausted
// for a todo with a relay attempt, in the same transaction.
type Todos struct {
	pool      *pgxpool.Pool
	emitter   Emitter
	clock     clocks.Clock
	reapBatch int
}

// NewTodos returns the todos kept in pool's database, announcing dead
// letters through emitter. clock defaults to the database's clock
// (clocks.Database), so that instances whose own clocks disagree
// agree on every lease; tests give a fake one.
func NewTodos(pool *pgxpool.Pool, emitter Emitter, clock clocks.Clock) *Todos {
	if pool == nil || emitter == nil {
		panic("host: NewTodos needs a pool and an emitter")
	}
	if clock == nil {
		clock = clocks.NewDatabase(pool, nil).AsClock()
	}
	return &Todos{pool: pool, emitter: emitter, clock: clock, reapBatch: ReapBatchDefault}
}

// TodoInput is a new todo.
type TodoInput struct {
	// Title is what the todo is called. Required; sender-written.
	Title string

	// Payload is a JSON object. Defaults to {}. A string field "body" is
	// the subject's body, the source of an opt-in excerpt (REQ-9).
	Payload json.RawMessage

	// AttemptCap is how many claims the todo gets before it dead-letters.
	// Defaults to AttemptCapDefault (3).
	AttemptCap int

	// LeaseTTL is how long a claim holds without a heartbeat, rounded up to
	// whole seconds. Defaults to LeaseTTLDefault (5 minutes).
	LeaseTTL time.Duration

	// OriginDisplay and OriginPermalink describe the reply origin
	// (SPEC-0028), when there is one. OriginPermalink must be an http(s)
	// URL.
	OriginDisplay, OriginPermalink string

	// WebhookID is the webhook whose delivery was routed to this todo, zero
	// for none. It may belong to another owner scope (a friend's webhook
	// routing to this queue); the todo still belongs to its queue's scope.
	WebhookID int64
}

// Todo is a todo as the host's verbs return it.
type Todo struct {
	ID      int64
	QueueID int64
	// Owner is the queue's owner scope; a todo claimed from a team queue by
	// a member's personal endpoint still belongs to the team (REQ-7).
	Owner   notifytype.OwnerScope
	Title   string
	Payload json.RawMessage
	State   TodoState
	// ClaimedBy is the claiming endpoint, zero unless State is claimed.
	ClaimedBy       int64
	LeaseTTL        time.Duration
	LeaseExpiresAt  time.Time // zero unless claimed
	LastHeartbeatAt time.Time // zero until first claimed
	// Attempts counts claims since the todo was enqueued or last re-queued.
	Attempts        int
	AttemptCap      int
	DeadLetterCount int
	// DeadReason is the cause of the last dead letter while State is dead.
	DeadReason      Cause
	OriginDisplay   string
	OriginPermalink string
	WebhookID       int64
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// ClaimOpts modify a claim.
type ClaimOpts struct {
	// Relay records the attempt as a relay attempt (D16): a todo whose
	// history has one dead-letters as relay.exhausted.
	Relay bool
	// TodoID claims that todo of the queue, not the oldest pending one; ok
	// is false when it is not pending. Zero for the oldest.
	TodoID int64
}

// AttemptReport is what the claimant says as it completes or fails an
// attempt. Both fields are optional; Summary is agent-written.
type AttemptReport struct {
	Summary        string
	ArtifactHandle string
}

// Enqueue adds a pending todo to the queue, in the queue's owner scope. A
// queue that does not exist is not_found; bad input is invalid_argument
// naming the field.
func (t *Todos) Enqueue(ctx context.Context, queueID int64, in TodoInput) (Todo, error) {
	ins, err := in.validate()
	if err != nil {
		return Todo{}, err
	}
	ins.QueueID = queueID
	ins.Now = t.clock.Now()
	var out Todo
	err = pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		if in.WebhookID != 0 {
			ok, err := hoststore.WebhookExists(ctx, tx, in.WebhookID)
			if err != nil {
				return err
			}
			if !ok {
				return notifytype.InvalidArgument("webhook_id", "no such webhook")
			}
		}
		row, err := hoststore.InsertTodo(ctx, tx, ins)
		if err != nil {
			return err
		}
		out, err = toTodo(row)
		return err
	})
	if err != nil {
		return Todo{}, fmt.Errorf("error enqueueing todo on queue %d: %w", queueID, err)
	}
	return out, nil
}

func (in TodoInput) validate() (hoststore.TodoInsert, error) {
	var ins hoststore.TodoInsert
	title := strings.TrimSpace(in.Title)
	switch {
	case title == "":
		return ins, notifytype.InvalidArgument("title", "a todo needs a title")
	case utf8.RuneCountInString(title) > TitleMaxLen:
		return ins, notifytype.InvalidArgumentf("title", "at most %d characters", TitleMaxLen)
	}
	ins.Title = title

	ins.Payload = []byte(`{}`)
	if len(bytes.TrimSpace(in.Payload)) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(in.Payload, &m); err != nil || m == nil {
			return ins, notifytype.InvalidArgument("payload", "must be a JSON object")
		}
		ins.Payload = in.Payload
	}

	switch {
	case in.AttemptCap < 0:
		return ins, notifytype.InvalidArgument("attempt_cap", "must be positive")
	case in.AttemptCap == 0:
		ins.AttemptCap = AttemptCapDefault
	default:
		ins.AttemptCap = in.AttemptCap
	}

	ttl := in.LeaseTTL
	switch {
	case ttl < 0:
		return ins, notifytype.InvalidArgument("lease_ttl", "must be positive")
	case ttl == 0:
		ttl = LeaseTTLDefault
	}
	secs := (ttl + time.Second - 1) / time.Second
	if secs > math.MaxInt32 {
		return ins, notifytype.InvalidArgument("lease_ttl", "too long")
	}
	ins.LeaseTTLSecs = int(secs)

	if in.OriginDisplay != "" {
		ins.OriginDisplay = &in.OriginDisplay
	}
	if in.OriginPermalink != "" {
		u, err := url.Parse(in.OriginPermalink)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return ins, notifytype.InvalidArgument("origin_permalink", "must be an http(s) URL")
		}
		ins.OriginPermalink = &in.OriginPermalink
	}

	switch {
	case in.WebhookID < 0:
		return ins, notifytype.InvalidArgument("webhook_id", "no such webhook")
	case in.WebhookID > 0:
		ins.WebhookID = &in.WebhookID
	}
	return ins, nil
}

func (r AttemptReport) validate() error {
	if utf8.RuneCountInString(r.Summary) > AttemptSummaryMaxLen {
		return notifytype.InvalidArgumentf("summary", "at most %d characters", AttemptSummaryMaxLen)
	}
	if utf8.RuneCountInString(r.ArtifactHandle) > ArtifactHandleMaxLen {
		return notifytype.InvalidArgumentf("artifact_handle", "at most %d characters", ArtifactHandleMaxLen)
	}
	return nil
}

// Claim gives the endpoint the oldest pending todo of the queue (FOR
// UPDATE SKIP LOCKED, so concurrent claimers never get one todo twice),
// starts an attempt (agent, or relay with ClaimOpts{Relay: true}; at most
// one ClaimOpts), counts it and leases the todo for its TTL. ok is false
// when the queue has no pending todo.
//
// An endpoint may claim from queues of its own owner scope and, when that
// scope is a human, from queues of the teams the human is a member of
// (REQ-7 "Team todo"). Any other queue is not_found; a revoked endpoint, or
// one whose grant lacks the todos family, is forbidden.
func (t *Todos) Claim(ctx context.Context, endpointID, queueID int64, opts ...ClaimOpts) (todo Todo, ok bool, err error) {
	var o ClaimOpts
	if len(opts) > 0 {
		o = opts[len(opts)-1]
	}
	kind := AttemptAgent
	if o.Relay {
		kind = AttemptRelay
	}
	now := t.clock.Now()
	err = pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		ep, scope, err := lockActingEndpoint(ctx, tx, endpointID)
		if err != nil {
			return err
		}
		memberOf, _ := hostid.Of(scope, notifytype.ScopeHuman)
		claimable, err := hoststore.QueueClaimable(ctx, tx, queueID, ep.Owner, memberOf)
		if err != nil {
			return err
		}
		if !claimable {
			return notifytype.NotFound("queue")
		}
		var row hoststore.TodoRow
		if o.TodoID != 0 {
			row, err = hoststore.ClaimTodoByID(ctx, tx, queueID, o.TodoID, endpointID, now)
		} else {
			row, err = hoststore.ClaimNextTodo(ctx, tx, queueID, endpointID, now)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := hoststore.InsertAttempt(ctx, tx, row.ID, string(kind), endpointID, now); err != nil {
			return err
		}
		todo, err = toTodo(row)
		ok = err == nil
		return err
	})
	if err != nil {
		return Todo{}, false, fmt.Errorf("error claiming from queue %d: %w", queueID, err)
	}
	return todo, ok, nil
}

// Heartbeat renews the claimant's lease on the todo for a full TTL from
// now. A todo the endpoint does not hold claimed is not_found.
func (t *Todos) Heartbeat(ctx context.Context, endpointID, todoID int64) (Todo, error) {
	return t.asClaimant(ctx, endpointID, todoID, "renewing lease of", func(tx pgx.Tx, _ hoststore.TodoRow, now time.Time) (Todo, error) {
		row, err := hoststore.ExtendTodoLease(ctx, tx, todoID, now)
		if err != nil {
			return Todo{}, err
		}
		return toTodo(row)
	})
}

// asClaimant runs fn in one transaction on a todo that endpointID holds
// claimed, with the endpoint's row locked (a revocation waits), and wraps
// its error as "error <doing> todo <id>". A todo the endpoint does not hold
// claimed is not_found.
func (t *Todos) asClaimant(ctx context.Context, endpointID, todoID int64, doing string,
	fn func(tx pgx.Tx, row hoststore.TodoRow, now time.Time) (Todo, error)) (Todo, error) {
	now := t.clock.Now()
	var out Todo
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		if _, _, err := lockActingEndpoint(ctx, tx, endpointID); err != nil {
			return err
		}
		row, err := hoststore.LockClaimedTodo(ctx, tx, todoID, endpointID)
		if err != nil {
			return err
		}
		out, err = fn(tx, row, now)
		return err
	})
	if err != nil {
		return Todo{}, fmt.Errorf("error %s todo %d: %w", doing, todoID, err)
	}
	return out, nil
}

// Complete marks the claimant's todo done and closes its attempt with the
// report. A todo the endpoint does not hold claimed is not_found.
func (t *Todos) Complete(ctx context.Context, endpointID, todoID int64, report AttemptReport) (Todo, error) {
	if err := report.validate(); err != nil {
		return Todo{}, err
	}
	return t.asClaimant(ctx, endpointID, todoID, "completing", func(tx pgx.Tx, _ hoststore.TodoRow, now time.Time) (Todo, error) {
		if err := finishAttempt(ctx, tx, todoID, outcomeDone, &report, now); err != nil {
			return Todo{}, err
		}
		row, err := hoststore.CompleteTodo(ctx, tx, todoID, now)
		if err != nil {
			return Todo{}, err
		}
		return toTodo(row)
	})
}

// Fail closes the claimant's attempt as failed with the report. Below the
// attempt cap the todo is pending again; at the cap it dead-letters (cause
// "fail at the cap"). A todo the endpoint does not hold claimed is
// not_found.
func (t *Todos) Fail(ctx context.Context, endpointID, todoID int64, report AttemptReport) (Todo, error) {
	if err := report.validate(); err != nil {
		return Todo{}, err
	}
	return t.asClaimant(ctx, endpointID, todoID, "failing", func(tx pgx.Tx, row hoststore.TodoRow, now time.Time) (Todo, error) {
		if row.Attempts >= row.AttemptCap {
			return t.deadLetter(ctx, tx, row, CauseFailAtCap, outcomeFailed, &report, now)
		}
		return release(ctx, tx, todoID, outcomeFailed, &report, now)
	})
}

// ReapExpired processes claimed todos whose lease has expired: the attempt
// closes as expired and the todo dead-letters at its cap (cause "lease
// expired at the cap") or is pending again below it. It works in
// transactions of at most ReapBatchDefault todos taken FOR UPDATE SKIP
// LOCKED, so several reapers (instances) share the work and each todo is
// reaped once. It returns how many todos it reaped, also on error (the
// batches before the failing one committed).
func (t *Todos) ReapExpired(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := t.reapOnce(ctx)
		if err != nil {
			return total, fmt.Errorf("error reaping expired leases: %w", err)
		}
		total += n
		if n < t.reapBatch {
			return total, nil
		}
	}
}

func (t *Todos) reapOnce(ctx context.Context) (int, error) {
	now := t.clock.Now()
	var n int
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		rows, err := hoststore.LockExpiredTodos(ctx, tx, now, t.reapBatch)
		if err != nil {
			return err
		}
		for _, row := range rows {
			if row.Attempts >= row.AttemptCap {
				_, err = t.deadLetter(ctx, tx, row, CauseLeaseExpired, outcomeExpired, nil, now)
			} else {
				_, err = release(ctx, tx, row.ID, outcomeExpired, nil, now)
			}
			if err != nil {
				return err
			}
		}
		n = len(rows)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// RevokeEndpoint marks the endpoint revoked (it is forbidden from every
// todo verb thereafter) and dead-letters every todo it holds claimed (cause
// "endpoint revoked"). Revoking a revoked endpoint does nothing more; an
// endpoint that does not exist is not_found. The caller has checked that
// the principal may revoke it.
func (t *Todos) RevokeEndpoint(ctx context.Context, endpointID int64) error {
	return t.revokeEndpoint(ctx, endpointID, nil)
}

// revokeEndpoint is RevokeEndpoint; also, when set, runs inTx in the
// revocation's transaction (to record its author).
func (t *Todos) revokeEndpoint(ctx context.Context, endpointID int64, inTx func(pgx.Tx) error) error {
	now := t.clock.Now()
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		if err := hoststore.MarkEndpointRevoked(ctx, tx, endpointID, now); err != nil {
			return err
		}
		if inTx != nil {
			if err := inTx(tx); err != nil {
				return err
			}
		}
		rows, err := hoststore.LockTodosClaimedBy(ctx, tx, endpointID)
		if err != nil {
			return err
		}
		for _, row := range rows {
			if _, err := t.deadLetter(ctx, tx, row, CauseEndpointRevoked, outcomeRevoked, nil, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("error revoking endpoint %d: %w", endpointID, err)
	}
	return nil
}

// Interrupt dead-letters a pending or claimed todo at a human's request
// (cause "interrupted"). The human must be the todo's owner or a member of
// its owning team; any other todo is not_found. A done or dead todo is
// invalid_argument.
func (t *Todos) Interrupt(ctx context.Context, humanID, todoID int64) (Todo, error) {
	now := t.clock.Now()
	var out Todo
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		row, err := lockTodoFor(ctx, tx, humanID, todoID)
		if err != nil {
			return err
		}
		if row.State != string(TodoPending) && row.State != string(TodoClaimed) {
			return notifytype.InvalidArgumentf("todo_id", "the todo is %s; only a pending or claimed todo can be interrupted", row.State)
		}
		out, err = t.deadLetter(ctx, tx, row, CauseInterrupted, outcomeInterrupted, nil, now)
		return err
	})
	if err != nil {
		return Todo{}, fmt.Errorf("error interrupting todo %d: %w", todoID, err)
	}
	return out, nil
}

// Requeue puts a dead todo back to pending at a human's request, its
// attempts reset to 0. Its dead-letter count is kept, so its next dead
// letter has a new dedup key and is announced again (REQ-6). The human must
// be the todo's owner or a member of its owning team; any other todo is
// not_found. A todo that is not dead is invalid_argument.
func (t *Todos) Requeue(ctx context.Context, humanID, todoID int64) (Todo, error) {
	now := t.clock.Now()
	var out Todo
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		row, err := lockTodoFor(ctx, tx, humanID, todoID)
		if err != nil {
			return err
		}
		if row.State != string(TodoDead) {
			return notifytype.InvalidArgumentf("todo_id", "the todo is %s; only a dead todo can be re-queued", row.State)
		}
		row, err = hoststore.RequeueTodo(ctx, tx, todoID, now)
		if err != nil {
			return err
		}
		out, err = toTodo(row)
		return err
	})
	if err != nil {
		return Todo{}, fmt.Errorf("error re-queueing todo %d: %w", todoID, err)
	}
	return out, nil
}

// deadLetter ends a locked todo: its open attempt closes with outcome (and
// the report, if any), the todo becomes dead with its dead-letter count
// incremented, its reason set and its claim cleared, and one event is
// emitted in tx. An emit error fails the transaction.
func (t *Todos) deadLetter(ctx context.Context, tx pgx.Tx, row hoststore.TodoRow, cause Cause, outcome string, report *AttemptReport, now time.Time) (Todo, error) {
	if err := finishAttempt(ctx, tx, row.ID, outcome, report, now); err != nil {
		return Todo{}, err
	}
	dead, err := hoststore.DeadLetterTodo(ctx, tx, row.ID, string(cause), now)
	if err != nil {
		return Todo{}, err
	}
	dc, err := hoststore.TodoDeadLetterContext(ctx, tx, row.ID)
	if err != nil {
		return Todo{}, err
	}
	todo, err := toTodo(dead)
	if err != nil {
		return Todo{}, err
	}
	ev := deadLetterEvent(todo, deref(row.ClaimedBy), cause, dc)
	if err := t.emitter.Emit(ctx, tx, ev); err != nil {
		return Todo{}, fmt.Errorf("error announcing dead letter of todo %d: %w", row.ID, err)
	}
	return todo, nil
}

// deadLetterEvent is the event announcing a dead todo; claimant is the
// endpoint that held it, zero for none.
func deadLetterEvent(todo Todo, claimant int64, cause Cause, dc hoststore.DeadLetterContext) engine.Event {
	typ, what := EventTodoDeadLettered, "Todo dead-lettered"
	if dc.HasRelay {
		typ, what = EventRelayExhausted, "Relay exhausted"
	}
	tc := TodoContent{
		Cause:           string(cause),
		Attempts:        todo.Attempts,
		OriginDisplay:   todo.OriginDisplay,
		OriginPermalink: todo.OriginPermalink,
	}
	// The latest attempt closed this dead letter only if it belongs to the
	// current round (attempts restart at 0 on re-queue).
	if todo.Attempts > 0 {
		tc.AttemptSummary = deref(dc.LastSummary)
		tc.ArtifactHandle = deref(dc.LastArtifactHandle)
	}
	c := WithTodo(engine.Content{
		Title:    todo.Title,
		Place:    dc.QueueName,
		Summary:  what + afterAttempts(todo.Attempts),
		LinkPath: "/board/todos/" + strconv.FormatInt(todo.ID, 10),
		Body:     payloadBody(todo.Payload),
	}, tc)
	return engine.Event{
		Type:          typ,
		Owner:         todo.Owner,
		QueueID:       todo.QueueID,
		EndpointID:    claimant,
		WebhookID:     todo.WebhookID,
		OccurrenceKey: DeadLetterKey(todo.ID, todo.DeadLetterCount),
		Content:       c,
	}
}

// release closes the open attempt with outcome and puts the todo back to
// pending.
func release(ctx context.Context, tx pgx.Tx, todoID int64, outcome string, report *AttemptReport, now time.Time) (Todo, error) {
	if err := finishAttempt(ctx, tx, todoID, outcome, report, now); err != nil {
		return Todo{}, err
	}
	row, err := hoststore.ReleaseTodo(ctx, tx, todoID, now)
	if err != nil {
		return Todo{}, err
	}
	return toTodo(row)
}

func finishAttempt(ctx context.Context, tx pgx.Tx, todoID int64, outcome string, report *AttemptReport, now time.Time) error {
	f := hoststore.AttemptFinish{TodoID: todoID, Outcome: outcome, Now: now}
	if report != nil {
		f.Summary = nonEmpty(report.Summary)
		f.ArtifactHandle = nonEmpty(report.ArtifactHandle)
	}
	_, err := hoststore.FinishOpenAttempt(ctx, tx, f)
	return err
}

// lockActingEndpoint reads the acting endpoint FOR SHARE and refuses a
// revoked one, or one whose grant lacks the todos family, with forbidden.
func lockActingEndpoint(ctx context.Context, tx pgx.Tx, endpointID int64) (hoststore.ClaimantEndpoint, notifytype.OwnerScope, error) {
	ep, err := hoststore.LockClaimantEndpoint(ctx, tx, endpointID)
	if err != nil {
		return ep, notifytype.OwnerScope{}, err
	}
	if ep.Revoked {
		return ep, notifytype.OwnerScope{}, notifytype.Forbidden("the endpoint is revoked")
	}
	if !slices.Contains(ep.Grants, grantTodos) {
		return ep, notifytype.OwnerScope{}, notifytype.Forbidden("the endpoint's grant lacks the todos verbs")
	}
	scope, err := notifytype.ParseOwnerScope(ep.Owner)
	if err != nil {
		return ep, notifytype.OwnerScope{}, fmt.Errorf("error reading endpoint %d: %w", endpointID, err)
	}
	return ep, scope, nil
}

// lockTodoFor locks a todo the human may act on: one they own, or one of a
// team they are a member of. Any other is not_found (D3).
func lockTodoFor(ctx context.Context, tx pgx.Tx, humanID, todoID int64) (hoststore.TodoRow, error) {
	row, err := hoststore.LockTodo(ctx, tx, todoID)
	if err != nil {
		return row, err
	}
	scope, err := notifytype.ParseOwnerScope(row.Owner)
	if err != nil {
		return row, fmt.Errorf("error reading todo %d: %w", todoID, err)
	}
	switch scope.Kind {
	case notifytype.ScopeHuman:
		if scope == hostid.Human(humanID) {
			return row, nil
		}
	case notifytype.ScopeTeam:
		team, ok := hostid.Of(scope, notifytype.ScopeTeam)
		if !ok {
			break
		}
		role, err := hoststore.TeamRole(ctx, tx, team, humanID)
		if err != nil {
			return row, err
		}
		if role != "" {
			return row, nil
		}
	}
	return row, notifytype.NotFound("todo")
}

func toTodo(r hoststore.TodoRow) (Todo, error) {
	owner, err := notifytype.ParseOwnerScope(r.Owner)
	if err != nil {
		return Todo{}, fmt.Errorf("error reading todo %d: %w", r.ID, err)
	}
	return Todo{
		ID:              r.ID,
		QueueID:         r.QueueID,
		Owner:           owner,
		Title:           r.Title,
		Payload:         json.RawMessage(r.Payload),
		State:           TodoState(r.State),
		ClaimedBy:       deref(r.ClaimedBy),
		LeaseTTL:        time.Duration(r.LeaseTTLSecs) * time.Second,
		LeaseExpiresAt:  deref(r.LeaseExpiresAt),
		LastHeartbeatAt: deref(r.LastHeartbeatAt),
		Attempts:        r.Attempts,
		AttemptCap:      r.AttemptCap,
		DeadLetterCount: r.DeadLetterCount,
		DeadReason:      Cause(deref(r.DeadReason)),
		OriginDisplay:   deref(r.OriginDisplay),
		OriginPermalink: deref(r.OriginPermalink),
		WebhookID:       deref(r.WebhookID),
		CreatedAt:       r.CreatedAt,
		UpdatedAt:       r.UpdatedAt,
	}, nil
}

// payloadBody returns the payload's "body" field when it is a string.
func payloadBody(payload json.RawMessage) string {
	var p struct {
		Body json.RawMessage `json:"body"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	var body string
	if json.Unmarshal(p.Body, &body) != nil {
		return ""
	}
	return body
}

// afterAttempts ends a dead letter's summary: " after 3 attempts", or
// " before any attempt" when none was made (a todo interrupted while
// pending).
func afterAttempts(n int) string {
	if n <= 0 {
		return " before any attempt"
	}
	return " after " + plural(n, "attempt")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// EnsureQueue returns the id of scope's queue name, creating it if needed.
func (t *Todos) EnsureQueue(ctx context.Context, scope notifytype.OwnerScope, name string) (int64, error) {
	if !scope.Valid() || name == "" {
		return 0, notifytype.InvalidArgument("queue", "a queue needs an owner scope and a name")
	}
	return hoststore.EnsureQueue(ctx, t.pool, scope.String(), name)
}
