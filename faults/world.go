package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// Lifted budget bounds for drains: a sink that may send this much never
// holds a row, so a drain measures delivery, not the budget.
const (
	LiftedPerHour = 1_000_000
	LiftedBurst   = 100_000
)

// NewKey returns a random 32-byte operator key and its hex form
// (SWITCHBOARD_SECRET_KEY).
func NewKey() ([]byte, string) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return key, hex.EncodeToString(key)
}

// SeedSinks creates, through the engine's management service (with the
// budget bounds lifted, as an operator would through D27's settings), one
// human and n Gotify sinks pointed at baseURL with token, and returns the
// sink ids.
func SeedSinks(ctx context.Context, pool *pgxpool.Pool, key []byte, baseURL, token string, n int) ([]int64, error) {
	eng, err := engine.New(engine.Config{
		Pool: pool, Directory: host.NewDirectory(pool), Events: host.Events(), Links: host.Links(), SecretKey: key, PushAllowHTTP: true,
		PrivateHosts:     []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		BudgetPerHourMax: LiftedPerHour, BudgetBurstMax: LiftedBurst, MaxSinksPerScope: n,
	})
	if err != nil {
		return nil, fmt.Errorf("error building the seeding engine: %w", err)
	}
	var humanID int64
	if err := pool.QueryRow(ctx, `INSERT INTO humans (name, email) VALUES ('Faults', $1) RETURNING id`,
		"faults-"+strings.ToLower(rand.Text()[:8])+"@example.test").Scan(&humanID); err != nil {
		return nil, fmt.Errorf("error inserting the human: %w", err)
	}
	p, owner := engine.HumanPrincipal(hostid.String(humanID)), hostid.Human(humanID)
	ids := make([]int64, 0, n)
	for i := range n {
		c, err := eng.CreateConnection(ctx, p, engine.ConnectionInput{
			Owner: owner, Kind: engine.KindGotify, Name: fmt.Sprintf("receiver-%d", i), BaseURL: baseURL,
			Secret: notifytype.NewSecret(token),
		})
		if err != nil {
			return nil, err
		}
		s, err := eng.CreateSink(ctx, p, engine.SinkInput{
			Owner: owner, Name: fmt.Sprintf("drain-%d", i), Kind: engine.KindGotify, ConnectionID: c.ID,
			BudgetPerHour: LiftedPerHour, BudgetBurst: LiftedBurst,
		})
		if err != nil {
			return nil, err
		}
		ids = append(ids, s.ID)
	}
	return ids, nil
}

// InsertRows inserts n due outbox rows spread over sinks, each titled
// RowMarker + its id, as the fan-out would have written them.
func InsertRows(ctx context.Context, db *pgxpool.Pool, sinks []int64, n int) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at)
			SELECT s.id, s.owner, 'agent.notify', 'normal', '{}', now()
			FROM generate_series(0, $2 - 1) g
			JOIN switchboard.sinks s ON s.id = ($1::bigint[])[1 + g % cardinality($1::bigint[])]`, sinks, n); err != nil {
			return fmt.Errorf("error inserting outbox rows: %w", err)
		}
		_, err := tx.Exec(ctx, `UPDATE switchboard.outbox SET payload = jsonb_build_object('title', $1 || id, 'summary', 'reliability suite')
			WHERE payload = '{}'`, RowMarker)
		if err != nil {
			return fmt.Errorf("error titling outbox rows: %w", err)
		}
		return nil
	})
}

// Tally is the state of the drained rows.
type Tally struct {
	Total, Delivered, Undeliverable, Partial, Open int
}

// Finished is how many rows reached an end.
func (t Tally) Finished() int { return t.Delivered + t.Undeliverable + t.Partial }

// CountRows tallies the outbox by state.
func CountRows(ctx context.Context, db *pgxpool.Pool) (Tally, error) {
	var t Tally
	err := db.QueryRow(ctx, `SELECT count(*),
		count(*) FILTER (WHERE state = 'delivered'), count(*) FILTER (WHERE state = 'undeliverable'),
		count(*) FILTER (WHERE state = 'partial'), count(*) FILTER (WHERE state IN ('pending', 'held', 'claimed'))
		FROM switchboard.outbox`).Scan(&t.Total, &t.Delivered, &t.Undeliverable, &t.Partial, &t.Open)
	if err != nil {
		return t, fmt.Errorf("error counting outbox rows: %w", err)
	}
	return t, nil
}

// Lost counts the rows InsertRows wrote (titled RowMarker + id) that are
// neither finished nor, when delivered, seen by the receiver. Rows of
// other events (a digest, a rule notify) are the scenario's to count.
func Lost(ctx context.Context, db *pgxpool.Pool, seen map[int64]int) (int, error) {
	rows, err := db.Query(ctx, `SELECT id, state FROM switchboard.outbox WHERE payload->>'title' = $1 || id`, RowMarker)
	if err != nil {
		return 0, fmt.Errorf("error reading outbox rows: %w", err)
	}
	lost := 0
	for rows.Next() {
		var (
			id    int64
			state string
		)
		if err := rows.Scan(&id, &state); err != nil {
			return 0, err
		}
		switch state {
		case "delivered":
			if seen[id] == 0 {
				lost++
			}
		case "undeliverable", "partial":
		default:
			lost++
		}
	}
	return lost, rows.Err()
}

// DescribeOpen summarises the outbox rows not yet finished, by state,
// attempts and last class, with how far their due time and claim are
// from the database's now: what a failed drain shows.
func DescribeOpen(ctx context.Context, db *pgxpool.Pool) string {
	var out string
	err := db.QueryRow(ctx, `SELECT coalesce(string_agg(line, '; '), 'none') FROM (
		SELECT format('%s x %s (attempts %s, last class %s, due in %s s, claim left %s s)', count(*), state, attempts,
			coalesce(last_class, '-'), round(extract(epoch FROM min(due_at) - now())),
			coalesce(round(extract(epoch FROM max(claim_expires_at) - now()))::text, '-')) AS line
		FROM switchboard.outbox WHERE state IN ('pending', 'held', 'claimed')
		GROUP BY state, attempts, last_class ORDER BY count(*) DESC LIMIT 10) t`).Scan(&out)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return out
}

// DumpTables returns every row of every table of the database as JSON
// text, one row a line: what a secret search reads.
func DumpTables(ctx context.Context, db *pgxpool.Pool) (string, error) {
	rows, err := db.Query(ctx, `SELECT table_schema || '.' || table_name FROM information_schema.tables
		WHERE table_schema IN (current_schema(), 'switchboard') AND table_type = 'BASE TABLE' ORDER BY 1`)
	if err != nil {
		return "", fmt.Errorf("error listing tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("error listing tables: %w", err)
	}
	var b strings.Builder
	for _, table := range tables {
		var dump string
		if err := db.QueryRow(ctx, `SELECT coalesce(string_agg(to_jsonb(t)::text, E'\n'), '') FROM `+
			table+` t`).Scan(&dump); err != nil {
			return "", fmt.Errorf("error dumping %s: %w", table, err)
		}
		b.WriteString(dump)
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// WaitUntil calls cond every tick until it reports true or an error, or
// until timeout (wall time) passes: for waiting on what another process
// does, which sends no signal of its own.
func WaitUntil(timeout, tick time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("condition not met within %v", timeout)
		}
		<-t.C
	}
}
