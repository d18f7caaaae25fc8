package host

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/notifytype"
)

// QueueNameMaxLen bounds a queue name, in characters.
const QueueNameMaxLen = 64

// TodosShownMax bounds how many todos ListTodos returns.
const TodosShownMax = 200

// Queue is a queue of todos (D15) with its todos counted by state.
type Queue struct {
	ID        int64                 `json:"id"`
	Owner     notifytype.OwnerScope `json:"owner"`
	Name      string                `json:"name"`
	CreatedAt time.Time             `json:"created_at"`
	Pending   int                   `json:"pending"`
	Claimed   int                   `json:"claimed"`
	Done      int                   `json:"done"`
	Dead      int                   `json:"dead"`
}

func queueOut(q hoststore.QueueRow) (Queue, error) {
	owner, err := notifytype.ParseOwnerScope(q.Owner)
	if err != nil {
		return Queue{}, fmt.Errorf("error reading queue %d: %w", q.ID, err)
	}
	return Queue{ID: q.ID, Owner: owner, Name: q.Name, CreatedAt: q.CreatedAt,
		Pending: q.Pending, Claimed: q.Claimed, Done: q.Done, Dead: q.Dead}, nil
}

// Attempt is one attempt of a todo (D16), as the board shows it.
type Attempt struct {
	Number         int
	Kind           AttemptKind
	EndpointID     int64
	EndpointName   string
	Outcome        string // "" while the attempt is open
	Summary        string // agent-written
	ArtifactHandle string
	StartedAt      time.Time
	FinishedAt     *time.Time
}

// TodoDetail is a todo with its queue's name and its attempt history.
type TodoDetail struct {
	Todo
	QueueName string
	History   []Attempt
}

// roleIn returns the human's role in scope: "owner" for their own human
// scope, the team role for a team. A scope the human has no part in is
// not_found (D3).
func roleIn(ctx context.Context, db hoststore.DBTX, humanID int64, scope notifytype.OwnerScope, what string) (engine.Role, error) {
	switch scope.Kind {
	case notifytype.ScopeHuman:
		if scope == hostid.Human(humanID) {
			return engine.RoleOwner, nil
		}
	case notifytype.ScopeTeam:
		team, ok := hostid.Of(scope, notifytype.ScopeTeam)
		if !ok {
			break
		}
		role, err := hoststore.TeamRole(ctx, db, team, humanID)
		if err != nil {
			return engine.RoleNone, err
		}
		if role != "" {
			return engine.Role(role), nil
		}
	}
	return engine.RoleNone, notifytype.NotFound(what)
}

// ListQueues returns scope's queues by name. The human must be the scope's
// human or a member of its team; any other scope is not_found.
func (t *Todos) ListQueues(ctx context.Context, humanID int64, scope notifytype.OwnerScope) ([]Queue, error) {
	if _, err := roleIn(ctx, t.pool, humanID, scope, "owner scope"); err != nil {
		return nil, fmt.Errorf("error listing queues: %w", err)
	}
	rows, err := hoststore.ListQueues(ctx, t.pool, scope.String())
	if err != nil {
		return nil, err
	}
	out := make([]Queue, 0, len(rows))
	for _, r := range rows {
		q, err := queueOut(r)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

// ClaimableQueues returns the queues the endpoint may claim from, as Claim
// decides (its owner scope's and, for a human scope, those of the teams the
// human belongs to), its own scope's first. A revoked endpoint, or one whose
// grant lacks the todos family, is forbidden.
func (t *Todos) ClaimableQueues(ctx context.Context, endpointID int64) ([]Queue, error) {
	var out []Queue
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		ep, scope, err := lockActingEndpoint(ctx, tx, endpointID)
		if err != nil {
			return err
		}
		memberOf, _ := hostid.Of(scope, notifytype.ScopeHuman)
		rows, err := hoststore.ListClaimableQueues(ctx, tx, ep.Owner, memberOf)
		if err != nil {
			return err
		}
		out = make([]Queue, 0, len(rows))
		for _, r := range rows {
			q, err := queueOut(r)
			if err != nil {
				return err
			}
			out = append(out, q)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error listing claimable queues: %w", err)
	}
	return out, nil
}

// CheckQueueName validates a queue name: 1 to QueueNameMaxLen characters,
// no control characters, no slash (names appear in /board/queues/<name>).
func CheckQueueName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", notifytype.InvalidArgument("name", "a queue needs a name")
	case utf8.RuneCountInString(name) > QueueNameMaxLen:
		return "", notifytype.InvalidArgumentf("name", "at most %d characters", QueueNameMaxLen)
	case strings.ContainsFunc(name, func(r rune) bool { return unicode.IsControl(r) || r == '/' }):
		return "", notifytype.InvalidArgument("name", "no slashes or control characters")
	}
	return name, nil
}

// CreateQueue creates scope's queue name. The human's own scope, or a team
// they own or administer (D2); a team member is forbidden, any other scope
// not_found. A name already used in the scope is invalid_argument.
func (t *Todos) CreateQueue(ctx context.Context, humanID int64, scope notifytype.OwnerScope, name string) (Queue, error) {
	if !scope.Valid() {
		return Queue{}, notifytype.InvalidArgument("owner", "must be human:<id> or team:<id>")
	}
	name, err := CheckQueueName(name)
	if err != nil {
		return Queue{}, err
	}
	role, err := roleIn(ctx, t.pool, humanID, scope, "owner scope")
	if err != nil {
		return Queue{}, fmt.Errorf("error creating queue: %w", err)
	}
	if !role.CanConfigure() {
		return Queue{}, notifytype.Forbidden("only a team owner or admin may create the team's queues")
	}
	row, taken, err := hoststore.InsertQueue(ctx, t.pool, scope.String(), name)
	if err != nil {
		return Queue{}, err
	}
	if taken {
		return Queue{}, notifytype.InvalidArgumentf("name", "this owner already has a queue called %q", name)
	}
	return queueOut(row)
}

// GetQueue returns a queue of one of the human's scopes; any other is
// not_found.
func (t *Todos) GetQueue(ctx context.Context, humanID, queueID int64) (Queue, error) {
	row, err := hoststore.GetQueue(ctx, t.pool, queueID)
	if err != nil {
		return Queue{}, err
	}
	return t.visibleQueue(ctx, humanID, row)
}

// QueueByName returns scope's queue name, when the human may see scope;
// otherwise not_found.
func (t *Todos) QueueByName(ctx context.Context, humanID int64, scope notifytype.OwnerScope, name string) (Queue, error) {
	if _, err := roleIn(ctx, t.pool, humanID, scope, "queue"); err != nil {
		return Queue{}, err
	}
	row, err := hoststore.QueueByName(ctx, t.pool, scope.String(), name)
	if err != nil {
		return Queue{}, err
	}
	return queueOut(row)
}

func (t *Todos) visibleQueue(ctx context.Context, humanID int64, row hoststore.QueueRow) (Queue, error) {
	q, err := queueOut(row)
	if err != nil {
		return Queue{}, err
	}
	if _, err := roleIn(ctx, t.pool, humanID, q.Owner, "queue"); err != nil {
		return Queue{}, err
	}
	return q, nil
}

// EnqueueAs adds a pending todo to a queue of one of the human's scopes (a
// member of a team may add to its queues); any other queue is not_found.
func (t *Todos) EnqueueAs(ctx context.Context, humanID, queueID int64, in TodoInput) (Todo, error) {
	if _, err := t.GetQueue(ctx, humanID, queueID); err != nil {
		return Todo{}, fmt.Errorf("error enqueueing todo: %w", err)
	}
	return t.Enqueue(ctx, queueID, in)
}

// ListTodos returns a queue's latest todos (at most limit, 1 to
// TodosShownMax), newest first, when the human may see the queue.
func (t *Todos) ListTodos(ctx context.Context, humanID, queueID int64, limit int) ([]Todo, error) {
	if _, err := t.GetQueue(ctx, humanID, queueID); err != nil {
		return nil, fmt.Errorf("error listing todos: %w", err)
	}
	if limit <= 0 || limit > TodosShownMax {
		limit = TodosShownMax
	}
	rows, err := hoststore.ListQueueTodos(ctx, t.pool, queueID, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Todo, 0, len(rows))
	for _, r := range rows {
		td, err := toTodo(r)
		if err != nil {
			return nil, err
		}
		out = append(out, td)
	}
	return out, nil
}

// TodoDetail returns a todo of one of the human's scopes with its queue's
// name and its attempts; any other todo is not_found (D3).
func (t *Todos) TodoDetail(ctx context.Context, humanID, todoID int64) (TodoDetail, error) {
	var out TodoDetail
	err := pgx.BeginTxFunc(ctx, t.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		row, err := hoststore.GetTodo(ctx, tx, todoID)
		if err != nil {
			return err
		}
		if out.Todo, err = toTodo(row); err != nil {
			return err
		}
		if _, err := roleIn(ctx, tx, humanID, out.Owner, "todo"); err != nil {
			return err
		}
		q, err := hoststore.GetQueue(ctx, tx, out.QueueID)
		if err != nil {
			return err
		}
		out.QueueName = q.Name
		attempts, err := hoststore.ListAttempts(ctx, tx, todoID)
		if err != nil {
			return err
		}
		for _, a := range attempts {
			out.History = append(out.History, Attempt{
				Number: a.Number, Kind: AttemptKind(a.Kind), EndpointID: a.EndpointID, EndpointName: a.EndpointName,
				Outcome: a.Outcome, Summary: a.Summary, ArtifactHandle: a.ArtifactHandle,
				StartedAt: a.StartedAt, FinishedAt: a.FinishedAt,
			})
		}
		return nil
	})
	if err != nil {
		return TodoDetail{}, fmt.Errorf("error reading todo %d: %w", todoID, err)
	}
	return out, nil
}

// Named is an id with its name, for pick lists.
type Named struct {
	ID   int64
	Name string
}

// Names returns the ids and names of scope's queues, endpoints or webhooks
// (by kind), for the human to pick from; a scope the human has no part in
// is not_found.
func (d *Directory) Names(ctx context.Context, humanID int64, scope notifytype.OwnerScope, kind engine.Resource) ([]Named, error) {
	switch kind {
	case engine.ResourceQueue, engine.ResourceEndpoint, engine.ResourceWebhook:
	default:
		return nil, fmt.Errorf("error listing names: unknown resource %q", kind)
	}
	if _, err := roleIn(ctx, d.db, humanID, scope, "owner scope"); err != nil {
		return nil, err
	}
	rows, err := hoststore.ListOwnedNames(ctx, d.db, scope.String(), string(kind))
	if err != nil {
		return nil, err
	}
	out := make([]Named, len(rows))
	for i, r := range rows {
		out[i] = Named{ID: r.ID, Name: r.Name}
	}
	return out, nil
}

// TeamOf is a team the human belongs to, with their role.
type TeamOf struct {
	ID   int64
	Name string
	Role engine.Role
}

// Scope is the team's owner scope.
func (t TeamOf) Scope() notifytype.OwnerScope { return hostid.Team(t.ID) }

// TeamsOf returns the teams the human is a member of, by name: the "my
// teams" a scope picker lists.
func (d *Directory) TeamsOf(ctx context.Context, humanID int64) ([]TeamOf, error) {
	rows, err := hoststore.TeamsOf(ctx, d.db, humanID)
	if err != nil {
		return nil, err
	}
	out := make([]TeamOf, len(rows))
	for i, m := range rows {
		out[i] = TeamOf{ID: m.Team.ID, Name: m.Team.Name, Role: engine.Role(m.Role)}
	}
	return out, nil
}
