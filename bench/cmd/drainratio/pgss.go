package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgssStat is one statement's server time over the traced drain, as
// pg_stat_statements counted it in the bench's database.
type pgssStat struct {
	Calls, Plans, Rows int64
	PlanMs, ExecMs     float64
	Query              string
}

// pgssReset makes pg_stat_statements in the bench's database and forgets
// what it counted there so far (other databases' counts are left alone).
// The server must load the extension (shared_preload_libraries); it counts
// planning only with pg_stat_statements.track_planning on.
func pgssReset(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return fmt.Errorf("-pgss: %w", err)
	}
	_, err := pool.Exec(ctx, `SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)`)
	if err != nil {
		return fmt.Errorf("-pgss: pg_stat_statements must be in the server's shared_preload_libraries: %w", err)
	}
	return nil
}

// pgssRead returns what pg_stat_statements counted in the bench's database
// since pgssReset, the statements that took the server longest first, and
// whether it counted planning.
func pgssRead(ctx context.Context, pool *pgxpool.Pool) ([]pgssStat, bool, error) {
	var planning bool
	if err := pool.QueryRow(ctx, `SELECT current_setting('pg_stat_statements.track_planning')::bool`).Scan(&planning); err != nil {
		return nil, false, fmt.Errorf("-pgss: %w", err)
	}
	rows, err := pool.Query(ctx, `
		SELECT calls, plans, rows, total_plan_time, total_exec_time, query
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_plan_time + total_exec_time DESC`)
	if err != nil {
		return nil, false, fmt.Errorf("-pgss: %w", err)
	}
	stats, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pgssStat, error) {
		var s pgssStat
		err := r.Scan(&s.Calls, &s.Plans, &s.Rows, &s.PlanMs, &s.ExecMs, &s.Query)
		s.Query = strings.Join(strings.Fields(s.Query), " ")
		return s, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("-pgss: %w", err)
	}
	return stats, planning, nil
}

// printPgss prints the server's time of the traced drain's statements, n
// deliveries: the engine's, and drainratio's own few (the count of rows
// left, the CPU meter's read of pg_stat_activity).
func printPgss(stats []pgssStat, planning bool, n int) {
	var plan, exec float64
	for _, s := range stats {
		plan += s.PlanMs
		exec += s.ExecMs
	}
	perDeliv := func(ms float64) float64 { return ms * 1000 / float64(n) }
	fmt.Printf("\n== Server time of the traced engine_1 drain's statements (pg_stat_statements in the bench's database; wall time of each backend, waits included)\n")
	if !planning {
		fmt.Printf("(planning not counted: pg_stat_statements.track_planning is off)\n")
	}
	fmt.Printf("per delivery: %.1f µs planning, %.1f µs executing\n", perDeliv(plan), perDeliv(exec))
	fmt.Printf("%9s %7s %9s %9s %11s %8s  %s\n", "calls", "plans", "plan ms", "exec ms", "µs / deliv", "rows", "statement")
	for i, s := range stats {
		if i == 20 {
			fmt.Printf("(%d statements more)\n", len(stats)-i)
			break
		}
		fmt.Printf("%9d %7d %9.0f %9.0f %11.1f %8d  %s\n", s.Calls, s.Plans, s.PlanMs, s.ExecMs, perDeliv(s.PlanMs+s.ExecMs), s.Rows, statementLabel(s.Query))
	}
}
