package hoststore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// QueueRow is one queue of the reference host (D15) with its todos
// counted by state.
type QueueRow struct {
	ID        int64
	Owner     string
	Name      string
	CreatedAt time.Time
	Pending   int
	Claimed   int
	Done      int
	Dead      int
}

const queueSelect = `SELECT q.id, q.owner, q.name, q.created_at,
	count(t.id) FILTER (WHERE t.state = 'pending'),
	count(t.id) FILTER (WHERE t.state = 'claimed'),
	count(t.id) FILTER (WHERE t.state = 'done'),
	count(t.id) FILTER (WHERE t.state = 'dead')
	FROM queues q LEFT JOIN todos t ON t.queue_id = q.id`

func scanQueue(row pgx.Row) (QueueRow, error) {
	var q QueueRow
	err := row.Scan(&q.ID, &q.Owner, &q.Name, &q.CreatedAt, &q.Pending, &q.Claimed, &q.Done, &q.Dead)
	return q, err
}

// ListQueues returns owner's queues by name, their todos counted.
func ListQueues(ctx context.Context, db DBTX, owner string) ([]QueueRow, error) {
	rows, err := db.Query(ctx, queueSelect+` WHERE q.owner = $1 GROUP BY q.id ORDER BY q.name, q.id`, owner)
	if err != nil {
		return nil, fmt.Errorf("error listing queues: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueueRow, error) { return scanQueue(r) })
	if err != nil {
		return nil, fmt.Errorf("error listing queues: %w", err)
	}
	return out, nil
}

// ListClaimableQueues returns the queues an endpoint of endpointOwner may
// claim from, by owner and name, their todos counted: the queues
// QueueClaimable accepts (its owner scope's, and when memberHumanID is not
// zero those of the teams that human belongs to).
func ListClaimableQueues(ctx context.Context, db DBTX, endpointOwner string, memberHumanID int64) ([]QueueRow, error) {
	rows, err := db.Query(ctx, queueSelect+` WHERE q.owner = $1
		OR q.owner IN (SELECT 'team:' || m.team_id FROM team_members m WHERE m.human_id = $2)
		GROUP BY q.id ORDER BY q.owner = $1 DESC, q.owner, q.name, q.id`, endpointOwner, memberHumanID)
	if err != nil {
		return nil, fmt.Errorf("error listing claimable queues: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueueRow, error) { return scanQueue(r) })
	if err != nil {
		return nil, fmt.Errorf("error listing claimable queues: %w", err)
	}
	return out, nil
}

// GetQueue returns the queue with id, or not_found.
func GetQueue(ctx context.Context, db DBTX, id int64) (QueueRow, error) {
	q, err := scanQueue(db.QueryRow(ctx, queueSelect+` WHERE q.id = $1 GROUP BY q.id`, id))
	if err != nil {
		return QueueRow{}, fmt.Errorf("error reading queue: %w", notFound(err, "queue"))
	}
	return q, nil
}

// QueueByName returns owner's queue name, or not_found.
func QueueByName(ctx context.Context, db DBTX, owner, name string) (QueueRow, error) {
	q, err := scanQueue(db.QueryRow(ctx, queueSelect+` WHERE q.owner = $1 AND q.name = $2 GROUP BY q.id`, owner, name))
	if err != nil {
		return QueueRow{}, fmt.Errorf("error reading queue: %w", notFound(err, "queue"))
	}
	return q, nil
}

// InsertQueue creates owner's queue name; taken reports a name already in
// use in that scope (and then nothing is created).
func InsertQueue(ctx context.Context, db DBTX, owner, name string) (q QueueRow, taken bool, err error) {
	err = db.QueryRow(ctx, `INSERT INTO queues (owner, name) VALUES ($1, $2)
		ON CONFLICT (owner, name) DO NOTHING RETURNING id, owner, name, created_at`, owner, name).
		Scan(&q.ID, &q.Owner, &q.Name, &q.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return QueueRow{}, true, nil
	}
	if err != nil {
		return QueueRow{}, false, fmt.Errorf("error inserting queue: %w", err)
	}
	return q, false, nil
}

// ListQueueTodos returns a queue's latest todos, newest first.
func ListQueueTodos(ctx context.Context, db DBTX, queueID int64, limit int) ([]TodoRow, error) {
	out, err := collectTodos(db.Query(ctx, `SELECT `+todoColumns+` FROM todos t WHERE t.queue_id = $1
		ORDER BY t.id DESC LIMIT $2`, queueID, limit))
	if err != nil {
		return nil, fmt.Errorf("error listing todos: %w", err)
	}
	return out, nil
}

// GetTodo returns the todo with id, or not_found.
func GetTodo(ctx context.Context, db DBTX, id int64) (TodoRow, error) {
	r, err := scanTodo(db.QueryRow(ctx, `SELECT `+todoColumns+` FROM todos t WHERE t.id = $1`, id))
	if err != nil {
		return TodoRow{}, fmt.Errorf("error reading todo: %w", notFound(err, "todo"))
	}
	return r, nil
}

// AttemptRow is one attempt of a todo (D16).
type AttemptRow struct {
	Number         int
	Kind           string
	EndpointID     int64 // 0 for none
	EndpointName   string
	Outcome        string // "" while open
	Summary        string
	ArtifactHandle string
	StartedAt      time.Time
	FinishedAt     *time.Time
}

// ListAttempts returns a todo's attempts, oldest first.
func ListAttempts(ctx context.Context, db DBTX, todoID int64) ([]AttemptRow, error) {
	rows, err := db.Query(ctx, `SELECT a.number, a.kind, coalesce(a.endpoint_id, 0), coalesce(e.name, ''),
			coalesce(a.outcome, ''), coalesce(a.summary, ''), coalesce(a.artifact_handle, ''), a.started_at, a.finished_at
		FROM attempts a LEFT JOIN endpoints e ON e.id = a.endpoint_id
		WHERE a.todo_id = $1 ORDER BY a.id`, todoID)
	if err != nil {
		return nil, fmt.Errorf("error listing attempts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AttemptRow, error) {
		var a AttemptRow
		err := r.Scan(&a.Number, &a.Kind, &a.EndpointID, &a.EndpointName, &a.Outcome, &a.Summary, &a.ArtifactHandle, &a.StartedAt, &a.FinishedAt)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing attempts: %w", err)
	}
	return out, nil
}

// Membership is one team a human belongs to, with the role.
type Membership struct {
	Team Team
	Role string
}

// MemberTeamIDs returns the ids of the teams the human is a member of, in
// ascending order (the team_members_human index).
func MemberTeamIDs(ctx context.Context, db DBTX, humanID int64) ([]int64, error) {
	rows, err := db.Query(ctx, `SELECT team_id FROM team_members WHERE human_id = $1 ORDER BY team_id`, humanID)
	if err != nil {
		return nil, fmt.Errorf("error listing teams: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("error listing teams: %w", err)
	}
	return ids, nil
}

// TeamsOf returns the teams the human is a member of, by name.
func TeamsOf(ctx context.Context, db DBTX, humanID int64) ([]Membership, error) {
	rows, err := db.Query(ctx, `SELECT t.id, t.name, t.created_at, m.role
		FROM team_members m JOIN teams t ON t.id = m.team_id
		WHERE m.human_id = $1 ORDER BY t.name, t.id`, humanID)
	if err != nil {
		return nil, fmt.Errorf("error listing teams: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Membership, error) {
		var m Membership
		err := r.Scan(&m.Team.ID, &m.Team.Name, &m.Team.CreatedAt, &m.Role)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing teams: %w", err)
	}
	return out, nil
}

// ListHumans returns every human, by id.
func ListHumans(ctx context.Context, db DBTX) ([]Human, error) {
	rows, err := db.Query(ctx, `SELECT `+humanColumns+` FROM humans h ORDER BY h.id`)
	if err != nil {
		return nil, fmt.Errorf("error listing humans: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Human, error) { return scanHuman(r) })
	if err != nil {
		return nil, fmt.Errorf("error listing humans: %w", err)
	}
	return out, nil
}

// TeamListing is a team with its members.
type TeamListing struct {
	Team    Team
	Members []TeamMember
}

// TeamMember is one member of a team as listings show it.
type TeamMember struct {
	HumanID int64
	Email   string
	Role    string
}

// ListTeams returns every team with its members, by team id.
func ListTeams(ctx context.Context, db DBTX) ([]TeamListing, error) {
	rows, err := db.Query(ctx, `SELECT t.id, t.name, t.created_at,
			coalesce(m.human_id, 0), coalesce(h.email, ''), coalesce(m.role, '')
		FROM teams t LEFT JOIN team_members m ON m.team_id = t.id LEFT JOIN humans h ON h.id = m.human_id
		ORDER BY t.id, m.human_id`)
	if err != nil {
		return nil, fmt.Errorf("error listing teams: %w", err)
	}
	defer rows.Close()
	var out []TeamListing
	for rows.Next() {
		var t Team
		var m TeamMember
		if err := rows.Scan(&t.ID, &t.Name, &t.CreatedAt, &m.HumanID, &m.Email, &m.Role); err != nil {
			return nil, fmt.Errorf("error reading team: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].Team.ID != t.ID {
			out = append(out, TeamListing{Team: t})
		}
		if m.HumanID != 0 {
			out[len(out)-1].Members = append(out[len(out)-1].Members, m)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing teams: %w", err)
	}
	return out, nil
}

// TeamByName returns the team called name, or not_found.
func TeamByName(ctx context.Context, db DBTX, name string) (Team, error) {
	var t Team
	err := db.QueryRow(ctx, `SELECT id, name, created_at FROM teams WHERE name = $1`, name).Scan(&t.ID, &t.Name, &t.CreatedAt)
	if err != nil {
		return Team{}, fmt.Errorf("error reading team: %w", notFound(err, "team"))
	}
	return t, nil
}

// NamedItem is an id with its name, for pick lists.
type NamedItem struct {
	ID   int64
	Name string
}

// ListOwnedNames returns the ids and names of owner's objects of kind
// ("queue", "endpoint" or "webhook"), by name.
func ListOwnedNames(ctx context.Context, db DBTX, owner, kind string) ([]NamedItem, error) {
	table, ok := ownedTables[kind]
	if !ok || kind == "todo" {
		return nil, fmt.Errorf("error listing names: unknown kind %q", kind)
	}
	rows, err := db.Query(ctx, `SELECT id, name FROM `+table+` WHERE owner = $1 ORDER BY name, id`, owner)
	if err != nil {
		return nil, fmt.Errorf("error listing %ss: %w", kind, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (NamedItem, error) {
		var n NamedItem
		err := r.Scan(&n.ID, &n.Name)
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing %ss: %w", kind, err)
	}
	return out, nil
}
