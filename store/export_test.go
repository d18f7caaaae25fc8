package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// MigrateLegacyForTest applies the legacy set (store/migrations) up to and
// including upTo (every file when empty), as store.Migrate did before the
// split: a database as an older build left it.
func MigrateLegacyForTest(ctx context.Context, db Beginner, upTo string) error {
	return migrateLegacy(ctx, db, upTo)
}

// ExpirySelectsForTest returns, for each kind of row PruneExpired prunes,
// the SELECT that finds one batch of old rows ($1 the cut-off, $2 the
// batch), so a test can check that an index serves each.
func ExpirySelectsForTest() map[string]string {
	out := map[string]string{}
	for _, e := range expiries {
		_, sel, _ := strings.Cut(e.sql, "IN (")
		out[e.what] = strings.TrimSuffix(sel, ")")
	}
	return out
}

// HeldRowsPlanForTest is the setting the statements of
// HeldRowStatementsForTest run under, in their transaction.
const HeldRowsPlanForTest = heldRowsPlan

// HeldRowStatementsForTest returns the statements that change rows an
// instance holds, each with arguments that name rows as held by instance,
// so a test can check how the planner finds them. state is the outcome
// finishRowsSQL writes ("pending" makes it look for repeats to absorb).
func HeldRowStatementsForTest(rows []Claimed, instance, state string) map[string][]any {
	var r rowOutcomes
	now := time.Now()
	r.add(rows, 1, RowOutcome{State: state}, now)
	ids, tokens := splitClaims(rows)
	tats := make([]time.Time, len(rows))
	return map[string][]any{
		finishRowsSQL: r.args(instance, hostReplacesForTest),
		recordFinishedSQL: append(r.args(instance, hostReplacesForTest),
			ids, make([]string, len(ids)), make([]string, len(ids)), make([]int32, len(ids)), tats),
		closeAbandonedSQL: {ids, now, instance, tokens},
		startAttemptsSQL:  {ids, tats, instance, now, time.Minute, tokens, 7, nil},
		holdRowsSQL:       {ids, tats, instance, tokens, hostReplacesForTest.By, hostReplacesForTest.Of},
		releaseRowsSQL:    {ids, tokens, instance, hostReplacesForTest.By, hostReplacesForTest.Of},
	}
}

// hostReplacesForTest is the reference host's replacement (a relay
// exhaustion replaces its todo's dead letter), for the plans of the
// statements that absorb repeats.
var hostReplacesForTest = Replacements{By: []string{"relay.exhausted"}, Of: []string{"todo.dead_lettered"}}

// ClaimDueForTest returns ClaimDue's statement and its arguments for p, so
// a test can check how the planner reads it.
func ClaimDueForTest(p ClaimParams) (string, []any) { return claimDueSQL, p.args() }

// migrateLegacy applies the legacy set the way store.Migrate did before
// the split, for the conversion test: a database as an older build left it.
func migrateLegacy(ctx context.Context, db Beginner, upTo string) error {
	for _, m := range legacySet.list() {
		if upTo != "" && strings.Compare(m.Name, upTo) > 0 {
			break
		}
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if _, err := applied(ctx, tx, legacySet, m.Name); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			return record(ctx, tx, legacySet, m.Name)
		})
		if err != nil {
			return fmt.Errorf("error applying legacy migration %s: %w", m.Name, err)
		}
	}
	return nil
}

// LegacyNamesForTest lists the files of the legacy set.
func LegacyNamesForTest() []string {
	var out []string
	for _, m := range legacySet.list() {
		out = append(out, m.Name)
	}
	return out
}
