package store

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DBTX is what a statement needs: a pgx.Tx or a *pgxpool.Pool.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PoolMaxConnsDefault is the size of the server's connection pool when
// DATABASE_URL does not set pool_max_conns. The delivery engine keeps up
// to four connections busy at once (the claimer, the group reservation,
// the group record and the LISTEN connection), the janitor and the digest
// scheduler one each now and then, and the API the rest; pgxpool's own
// default, max(4, number of CPUs), would make the engine's own parts wait
// for each other on a small machine.
const PoolMaxConnsDefault = 16

// ApplyPoolDefaults sizes pc, parsed from databaseURL, to
// PoolMaxConnsDefault unless the URL sets pool_max_conns itself, and keeps
// that many connections open (MinConns) unless the URL sets pool_min_conns:
// a fixed-size pool, as HikariCP recommends for latency. A pool that grows
// on demand opens its connections inside the requests of a burst, and
// opening one (a backend forked, authenticated and started) waits for a
// core as long as the burst does: 196 ms for another owner's delivery
// beside eight hostile dry runs (faults row 6d), where the rest of the
// delivery took under 10 ms. pgxpool opens them in the background, at the
// start and again after a connection's lifetime ends.
func ApplyPoolDefaults(pc *pgxpool.Config, databaseURL string) {
	if !strings.Contains(databaseURL, "pool_max_conns") {
		pc.MaxConns = PoolMaxConnsDefault
	}
	if !strings.Contains(databaseURL, "pool_min_conns") {
		pc.MinConns = pc.MaxConns
	}
}

// nullID is id, or NULL for 0.
func nullID(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

// nullText is s, or NULL for "".
func nullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
