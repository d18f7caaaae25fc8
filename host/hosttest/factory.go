package hosttest

import (
	"cmp"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// Factory is storetest's Factory with the reference host's rows: humans,
// teams, endpoints, queues, webhooks and todos. Like it, it bypasses every
// rule of the host's services on purpose.
type Factory struct {
	*storetest.Factory
}

// NewFactory returns a factory writing to pool.
func NewFactory(tb testing.TB, pool *pgxpool.Pool) *Factory {
	return &Factory{Factory: storetest.NewFactory(tb, pool)}
}

// Human inserts a human and returns its id.
func (f *Factory) Human(name string) int64 {
	n := storetest.Next()
	name = cmp.Or(name, fmt.Sprintf("human-%d", n))
	return f.Insert(`INSERT INTO humans (name, email) VALUES ($1, $2) RETURNING id`, name, fmt.Sprintf("h%d@example.test", n))
}

// Team inserts a team and returns its id.
func (f *Factory) Team(name string) int64 {
	name = cmp.Or(name, fmt.Sprintf("team-%d", storetest.Next()))
	return f.Insert(`INSERT INTO teams (name) VALUES ($1) RETURNING id`, name)
}

// Member adds a human to a team with a role ("owner", "admin", "member").
func (f *Factory) Member(teamID, humanID int64, role string) {
	f.Exec(`INSERT INTO team_members (team_id, human_id, role) VALUES ($1, $2, $3)`, teamID, humanID, role)
}

// EndpointOpts describes an endpoint. Human defaults to a new human; Grants
// to the default grant {todos, rules}.
type EndpointOpts struct {
	Owner  notifytype.OwnerScope
	Human  int64
	Name   string
	Grants []string
}

// Endpoint inserts an endpoint with a random credential hash.
func (f *Factory) Endpoint(o EndpointOpts) int64 {
	n := storetest.Next()
	if o.Human == 0 {
		o.Human = f.Human("")
	}
	if o.Owner.IsZero() {
		o.Owner = hostid.Human(o.Human)
	}
	if o.Grants == nil {
		o.Grants = []string{"todos", "rules"}
	}
	return f.Insert(`INSERT INTO endpoints (owner, name, accountable_human_id, grants, credential_hash)
		VALUES ($1, $2, $3, $4, $5) RETURNING id`,
		o.Owner.String(), cmp.Or(o.Name, fmt.Sprintf("endpoint-%d", n)), o.Human, o.Grants, []byte(fmt.Sprintf("hash-%d", n)))
}

// Queue inserts a queue.
func (f *Factory) Queue(owner notifytype.OwnerScope, name string) int64 {
	name = cmp.Or(name, fmt.Sprintf("queue-%d", storetest.Next()))
	return f.Insert(`INSERT INTO queues (owner, name) VALUES ($1, $2) RETURNING id`, owner.String(), name)
}

// Webhook inserts a webhook.
func (f *Factory) Webhook(owner notifytype.OwnerScope, name string) int64 {
	name = cmp.Or(name, fmt.Sprintf("webhook-%d", storetest.Next()))
	return f.Insert(`INSERT INTO webhooks (owner, name) VALUES ($1, $2) RETURNING id`, owner.String(), name)
}

// TodoOpts describes a todo. Owner defaults to the queue's; Title to a
// generated one; AttemptCap to 3.
type TodoOpts struct {
	Queue      int64
	Title      string
	Payload    string // JSON, default {}
	AttemptCap int
	LeaseTTL   int // seconds, default 300
}

// Todo inserts a pending todo.
func (f *Factory) Todo(o TodoOpts) int64 {
	return f.Insert(`INSERT INTO todos (queue_id, owner, title, payload, attempt_cap, lease_ttl_secs)
		SELECT $1, owner, $2, $3, $4, $5 FROM queues WHERE id = $1 RETURNING id`,
		o.Queue, cmp.Or(o.Title, fmt.Sprintf("todo %d", storetest.Next())), cmp.Or(o.Payload, "{}"),
		cmp.Or(o.AttemptCap, 3), cmp.Or(o.LeaseTTL, 300))
}
