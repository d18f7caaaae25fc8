// Package fleet makes many owners with their sinks in a bench database,
// in a few set-based statements instead of one management call per row:
// humans, one Gotify connection per sink (its secret sealed by the vault
// with the engine's key, as the management service seals it), the sinks
// with the budget given, and one subscription per sink. What it writes is
// what the management service would write; it only skips the ceiling of
// sinks per scope check (it never puts more than the ceiling in a scope).
package fleet

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/engine/vault"
	"github.com/switchboard/notify/notifytype"
)

// Options describes a fleet.
type Options struct {
	Scopes        int    // owner scopes (humans)
	SinksPerScope int    // sinks per scope, at most engine.MaxSinksPerScopeDefault
	BaseURL       string // every connection's account key: the stand-in
	PerHour       int    // every sink's budget_per_hour
	Burst         int    // every sink's budget_burst
	EventType     notifytype.EventType
	Tag           string // makes the humans' emails unique per fleet in one database
}

// Owner is one scope and its sinks.
type Owner struct {
	Scope notifytype.OwnerScope
	Sinks []int64
}

// Fleet is what Build made.
type Fleet struct {
	Owners []Owner
	Sinks  int
}

// Build makes o's fleet in pool's database, sealing the connections'
// secrets with key. Each sink has a connection of its own whose secret is
// "gtfya.fleet-<connection id>", so the stand-in tells sinks apart by
// their X-Gotify-Key.
func Build(ctx context.Context, pool *pgxpool.Pool, key []byte, o Options) (*Fleet, error) {
	v := vault.New(key)
	const chunk = 5000 // scopes per statement group
	f := &Fleet{}
	for start := 0; start < o.Scopes; start += chunk {
		n := min(chunk, o.Scopes-start)
		rows, err := pool.Query(ctx, `INSERT INTO humans (name, email)
			SELECT 'fleet-' || g, 'fleet-' || $2 || '-' || g || '@example.test' FROM generate_series($3::int, $3::int + $1 - 1) g
			RETURNING id`, n, o.Tag, start)
		if err != nil {
			return nil, fmt.Errorf("error inserting humans: %w", err)
		}
		var humans []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return nil, err
			}
			humans = append(humans, id)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("error inserting humans: %w", err)
		}
		// Connections: SinksPerScope per human.
		rows, err = pool.Query(ctx, `INSERT INTO switchboard.connections (owner, kind, name, account_key)
			SELECT 'human:' || h, 'gotify', 'gotify-' || g, $2 FROM unnest($1::bigint[]) h, generate_series(1, $3::int) g
			RETURNING id, owner`, humans, o.BaseURL, o.SinksPerScope)
		if err != nil {
			return nil, fmt.Errorf("error inserting connections: %w", err)
		}
		var ids []int64
		var owners []string
		for rows.Next() {
			var id int64
			var ow string
			if err := rows.Scan(&id, &ow); err != nil {
				return nil, err
			}
			ids, owners = append(ids, id), append(owners, ow)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("error inserting connections: %w", err)
		}
		sealed := make([][]byte, len(ids))
		for i, id := range ids {
			scope, err := notifytype.ParseOwnerScope(owners[i])
			if err != nil {
				return nil, err
			}
			if sealed[i], err = v.Seal(id, scope, notifytype.NewSecret(fmt.Sprintf("gtfya.fleet-%d", id))); err != nil {
				return nil, fmt.Errorf("error sealing: %w", err)
			}
		}
		if _, err := pool.Exec(ctx, `UPDATE switchboard.connections c SET secret = v.s
			FROM unnest($1::bigint[], $2::bytea[]) v(id, s) WHERE c.id = v.id`, ids, sealed); err != nil {
			return nil, fmt.Errorf("error sealing connections: %w", err)
		}
		rows, err = pool.Query(ctx, `WITH s AS (
				INSERT INTO switchboard.sinks (owner, name, kind, connection_id, budget_per_hour, budget_burst)
				SELECT owner, 'sink-' || substr(name, 8), 'gotify', id, $2, $3 FROM switchboard.connections WHERE id = ANY($1)
				RETURNING id, owner),
			sub AS (INSERT INTO switchboard.subscriptions (sink_id, owner, event_types) SELECT id, owner, ARRAY[$4::text] FROM s)
			SELECT id, owner FROM s ORDER BY owner, id`, ids, o.PerHour, o.Burst, string(o.EventType))
		if err != nil {
			return nil, fmt.Errorf("error inserting sinks: %w", err)
		}
		byOwner := map[string]int{}
		for rows.Next() {
			var id int64
			var ow string
			if err := rows.Scan(&id, &ow); err != nil {
				return nil, err
			}
			i, ok := byOwner[ow]
			if !ok {
				scope, err := notifytype.ParseOwnerScope(ow)
				if err != nil {
					return nil, err
				}
				i = len(f.Owners)
				byOwner[ow] = i
				f.Owners = append(f.Owners, Owner{Scope: scope})
			}
			f.Owners[i].Sinks = append(f.Owners[i].Sinks, id)
			f.Sinks++
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("error inserting sinks: %w", err)
		}
	}
	if _, err := pool.Exec(ctx, `ANALYZE humans, switchboard.connections, switchboard.sinks, switchboard.subscriptions`); err != nil {
		return nil, fmt.Errorf("error analyzing: %w", err)
	}
	return f, nil
}
