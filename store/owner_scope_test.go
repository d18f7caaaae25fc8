package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// ownerScopeRule0025 is the owner scope's check as migration 0025 wrote
// it: the rule the domain's check must keep accepting exactly.
const ownerScopeRule0025 = `^(human|team):[A-Za-z0-9._~:@-]{1,128}$`

// The owner scope's check (migration 0031) accepts exactly what 0025's
// regular expression accepted, and exactly what the engine's parser
// accepts (notifytype.ParseOwnerScope): a differential test over strings
// built near the rule's edges (the kinds and near misses, the colon, ids
// of 0, 1, 127 to 129 and up to 140 characters, characters in and out of
// the id's set). The domain is tried as the database applies it, by a cast
// to switchboard.owner_scope.
func TestTheOwnerScopeCheckAcceptsWhatTheParserAccepts(t *testing.T) {
	t.Parallel()
	pool := storetest.New(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE FUNCTION public.owner_scope_ok(v text) RETURNS boolean LANGUAGE plpgsql AS $$
		BEGIN
		    PERFORM v::switchboard.owner_scope;
		    RETURN true;
		EXCEPTION WHEN check_violation THEN
		    RETURN false;
		END $$`)
	require.NoError(t, err)

	kinds := []string{"human:", "team:", "human::", "Human:", "TEAM:", "humans:", "tea:", "human", "team", ":", "", " human:", "human :"}
	inID := []rune("AZaz09._~:@-xQ7")
	outOfID := []rune(" /#%+,é\t\n'\"\\$^()[]{}*?|")
	value := rapid.Custom(func(t *rapid.T) string {
		kind := rapid.SampledFrom(kinds).Draw(t, "kind")
		n := rapid.OneOf(rapid.SampledFrom([]int{0, 1, 2, 127, 128, 129}), rapid.IntRange(0, 140)).Draw(t, "id length")
		id := make([]rune, n)
		for i := range id {
			id[i] = rapid.SampledFrom(inID).Draw(t, "in")
		}
		if n > 0 && rapid.IntRange(0, 3).Draw(t, "spoil") == 0 {
			id[rapid.IntRange(0, n-1).Draw(t, "at")] = rapid.SampledFrom(outOfID).Draw(t, "out")
		}
		return kind + string(id)
	})

	rapid.Check(t, func(t *rapid.T) {
		values := rapid.SliceOfN(value, 1, 40).Draw(t, "values")
		rows, err := pool.Query(ctx, `SELECT public.owner_scope_ok(v), v ~ $2 FROM unnest($1::text[]) WITH ORDINALITY AS u(v, i) ORDER BY i`,
			values, ownerScopeRule0025)
		require.NoError(t, err)
		defer rows.Close()
		for i := 0; rows.Next(); i++ {
			var domain, rule0025 bool
			require.NoError(t, rows.Scan(&domain, &rule0025))
			_, perr := notifytype.ParseOwnerScope(values[i])
			if domain != rule0025 || domain != (perr == nil) {
				t.Fatalf("%q (%d bytes): the domain's check says %v, 0025's rule %v, the parser %v",
					values[i], len(values[i]), domain, rule0025, perr == nil)
			}
		}
		require.NoError(t, rows.Err())
	})
}

// Every owner column of the engine's tables is an owner scope: the check
// holds where each row is written, and a statement that copies an owner
// from one table to another copies a checked value without checking it
// again (migration 0032 made outbox_events.owner, the last text one, the
// domain).
func TestEveryOwnerColumnIsAnOwnerScope(t *testing.T) {
	t.Parallel()
	pool := storetest.New(t)
	rows, err := pool.Query(context.Background(), `
		SELECT c.relname || '.' || a.attname
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'switchboard' AND c.relkind = 'r' AND a.attname = 'owner' AND NOT a.attisdropped
		  AND a.atttypid <> 'switchboard.owner_scope'::regtype
		ORDER BY 1`)
	require.NoError(t, err)
	text, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, text, "owner columns that are not switchboard.owner_scope")
}

// An event whose owner is no owner scope is refused where it is written,
// in the emitting transaction, and nothing is written; it never reaches a
// fan-out, whose batch it would fail.
func TestAnEventOwnedByNoScopeIsRefusedWhereItIsWritten(t *testing.T) {
	t.Parallel()
	pool := storetest.New(t)
	ctx := context.Background()
	for _, owner := range []string{"nobody", "human:", "team:a b", "human:" + strings.Repeat("x", 129)} {
		_, err := pool.Exec(ctx, `
			INSERT INTO switchboard.outbox_events (owner, event_type, match_types, severity, severity_rank, queue_id, endpoint_id,
			                                       webhook_id, windowed, payload, due_at, sink_ids)
			VALUES ($1, 'agent.notify', '{agent.notify}', 'normal', 1, 0, 0, 0, false, '{}', now(), '{1}')`, owner)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, "%q", owner)
		require.Equal(t, "23514", pgErr.Code, "%q: check_violation", owner)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchboard.outbox_events`).Scan(&n))
	require.Zero(t, n)
}
