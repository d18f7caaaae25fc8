package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/vault"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// The engine's migrations create the schema switchboard and nothing
// outside it: a database that already has its own schema_migrations (in
// golang-migrate's shape) and its own queues keeps both exactly as they
// were, and gains no table of its current schema.
func TestEngineMigratesBesideTheDatabasesOwnTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := openPool(t, storetest.EmptyURL(t))
	_, err := pool.Exec(ctx, `
		CREATE TABLE schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL);
		INSERT INTO schema_migrations VALUES (7, false);
		CREATE TABLE queues (id serial PRIMARY KEY, name text NOT NULL);
		INSERT INTO queues (name) VALUES ('builds')`)
	require.NoError(t, err)
	before := describe(t, pool, "public")

	require.NoError(t, store.MigrateEngine(ctx, pool))
	require.NoError(t, store.MigrateEngine(ctx, pool), "twice is fine")

	require.Equal(t, before, describe(t, pool, "public"), "the database's own schema is untouched")
	var version int64
	var queue string
	require.NoError(t, pool.QueryRow(ctx, `SELECT version FROM schema_migrations`).Scan(&version))
	require.NoError(t, pool.QueryRow(ctx, `SELECT name FROM queues`).Scan(&queue))
	require.Equal(t, int64(7), version)
	require.Equal(t, "builds", queue)
	var names []string
	rows, err := pool.Query(ctx, `SELECT name FROM switchboard.migrations ORDER BY name`)
	require.NoError(t, err)
	names, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	var want []string
	for _, m := range store.EngineMigrationList() {
		want = append(want, m.Name)
	}
	require.Equal(t, want, names)
	var refs int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*) FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid JOIN pg_class r ON r.oid = c.confrelid
		WHERE c.contype = 'f' AND t.relnamespace = 'switchboard'::regnamespace AND r.relnamespace <> 'switchboard'::regnamespace`).Scan(&refs))
	require.Zero(t, refs, "no engine table references a table outside its schema")
}

// A database an older build migrated (store.Migrate: one history,
// schema_migrations, every table in public, the engine's foreign keys into
// humans and endpoints) is converted in place by the new entry points: the
// data is intact, the schema is exactly what a fresh database gets, and
// the engine delivers on it.
func TestLegacyDatabaseIsConvertedInPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := openPool(t, storetest.EmptyURL(t))
	require.NoError(t, store.MigrateLegacyForTest(ctx, pool, ""))

	received := make(chan string, 4)
	gotify := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct{ Title string }
		_ = json.NewDecoder(r.Body).Decode(&m)
		received <- r.Header.Get("X-Gotify-Key") + " " + m.Title
	}))
	t.Cleanup(gotify.Close)
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i + 1)
	}

	// The world as the old build left it, in the old tables.
	var human, endpoint, conn, sink int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO humans (name, email) VALUES ('Ada', 'ada@example.test') RETURNING id`).Scan(&human))
	owner := hostid.Human(human)
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO endpoints (owner, name, accountable_human_id, grants, credential_hash)
		VALUES ($1, 'agent', $2, '{todos}', 'h') RETURNING id`, owner.String(), human).Scan(&endpoint))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO connections (owner, kind, name, account_key, created_by_human_id)
		VALUES ($1, 'gotify', 'home', $2, $3) RETURNING id`, owner.String(), gotify.URL, human).Scan(&conn))
	sealed, err := vault.New(key).Seal(conn, owner, notifytype.NewSecret("legacy-app-token"))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE connections SET secret = $1 WHERE id = $2`, sealed, conn)
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO sinks (owner, name, kind, connection_id, updated_by_human_id, updated_by_endpoint_id)
		VALUES ($1, 'phone', 'gotify', $2, $3, $4) RETURNING id`, owner.String(), conn, human, endpoint).Scan(&sink))
	_, err = pool.Exec(ctx, `INSERT INTO subscriptions (sink_id, owner, event_types, created_by_human_id)
		VALUES ($1, $2, '{todo.dead_lettered}', $3)`, sink, owner.String(), human)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO write_log (owner, action, object_kind, object_id, acting_human_id, acting_endpoint_id)
		VALUES ($1, 'sink.create', 'sink', $2, $3, $4)`, owner.String(), sink, human, endpoint)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO delivery_records (sink_id, owner, event_type, status, sent_at)
		VALUES ($1, $2, 'todo.dead_lettered', 'delivered', now())`, sink, owner.String())
	require.NoError(t, err)
	var queue int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO queues (owner, name) VALUES ($1, 'builds') RETURNING id`, owner.String()).Scan(&queue))
	legacyRows := dumpRows(t, pool, "public")
	// Owner and actor ids became opaque strings (0025): the engine's
	// columns naming the acting human keep its id, as text.
	for table, rows := range legacyRows {
		for _, col := range []string{"created_by_human_id", "updated_by_human_id", "acting_human_id"} {
			rows = strings.ReplaceAll(rows, fmt.Sprintf(`"%s": %d`, col, human), fmt.Sprintf(`"%s": "%d"`, col, human))
		}
		legacyRows[table] = rows
	}

	// A table the engine's set added since the conversion's baseline
	// starts empty: the notes of due sinks (0029) note no row, as the
	// legacy outbox holds none.
	legacyRows["due_sinks"] = ""

	require.NoError(t, host.Migrate(ctx, pool))
	require.NoError(t, host.Migrate(ctx, pool), "a second run finds nothing to do")

	var legacyLeft bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass('public.schema_migrations') IS NOT NULL`).Scan(&legacyLeft))
	require.False(t, legacyLeft, "the legacy history gave way to the two sets'")
	require.Equal(t, legacyRows, dumpRows(t, pool, "public", "switchboard"), "every row is where it was, unchanged")

	fresh := hosttest.New(t)
	require.Equal(t, describe(t, fresh, "public", "switchboard"), describe(t, pool, "public", "switchboard"),
		"the converted schema is exactly a fresh one")

	// The engine works on it: the old sink, with its old sealed secret,
	// gets an event; new rows take ids after the old ones.
	eng, err := engine.New(engine.Config{
		Pool: pool, Directory: host.NewDirectory(pool), Events: host.Events(), Links: host.Links(), SecretKey: key, PushAllowHTTP: true,
		PrivateHosts: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	require.NoError(t, err)
	require.NoError(t, eng.Start(ctx))
	t.Cleanup(func() { require.NoError(t, eng.Stop(context.Background())) })
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return eng.Emit(ctx, tx, engine.Event{
			Type: host.EventTodoDeadLettered, Owner: owner, OccurrenceKey: host.DeadLetterKey(1, 1), QueueID: queue,
			Content: sinks.Content{Title: "nightly build", Place: "forge"},
		})
	}))
	select {
	case got := <-received:
		require.Equal(t, "legacy-app-token Dead letter in forge: nightly build", got)
	case <-time.After(30 * time.Second):
		t.Fatal("the converted sink got nothing")
	}
	s2, err := eng.CreateSink(ctx, engine.HumanPrincipal(hostid.String(human)), engine.SinkInput{Owner: owner, Name: "tablet", Kind: engine.KindGotify, ConnectionID: conn})
	require.NoError(t, err)
	require.Greater(t, s2.ID, sink)
}

// A database an older build left part way (before the claim tokens,
// webhook message ids and served base URLs) is brought to the end of the
// legacy set and converted in the same step.
func TestPartlyMigratedLegacyDatabaseIsConverted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := openPool(t, storetest.EmptyURL(t))
	require.NoError(t, store.MigrateLegacyForTest(ctx, pool, "0016_claimed_by_instance.sql"))
	require.NoError(t, host.Migrate(ctx, pool))
	require.Equal(t, describe(t, hosttest.New(t), "public", "switchboard"), describe(t, pool, "public", "switchboard"))
}

// A legacy history naming a file this build does not know (a migration
// of a newer build) is refused, changing nothing.
func TestLegacyHistoryWithAnUnknownFileIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := openPool(t, storetest.EmptyURL(t))
	require.NoError(t, store.MigrateLegacyForTest(ctx, pool, ""))
	_, err := pool.Exec(ctx, `INSERT INTO schema_migrations (name) VALUES ('0099_from_the_future.sql')`)
	require.NoError(t, err)
	before := describe(t, pool, "public")
	require.ErrorContains(t, host.Migrate(ctx, pool), "0099_from_the_future.sql")
	require.Equal(t, before, describe(t, pool, "public"))
	var ok bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regnamespace('switchboard') IS NULL`).Scan(&ok))
	require.True(t, ok, "nothing was converted")
}

// describe is the catalog of the schemas: columns, constraints, indexes,
// sequences, domains and storage options, one line each, sorted.
func describe(t *testing.T, pool *pgxpool.Pool, schemas ...string) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT format('column %s.%s.%s %s %s default=%s identity=%s', c.table_schema, c.table_name, c.column_name,
		              format_type(a.atttypid, a.atttypmod), c.is_nullable, coalesce(c.column_default, '-'), coalesce(c.identity_generation, '-'))
		FROM information_schema.columns c
		JOIN pg_attribute a ON a.attrelid = format('%I.%I', c.table_schema, c.table_name)::regclass AND a.attname = c.column_name
		WHERE c.table_schema = ANY($1)
		UNION ALL
		SELECT format('constraint %s %s %s', r.conrelid::regclass, r.conname, pg_get_constraintdef(r.oid))
		FROM pg_constraint r JOIN pg_namespace n ON n.oid = r.connamespace WHERE n.nspname = ANY($1)
		UNION ALL
		SELECT format('index %s.%s %s', schemaname, indexname, indexdef) FROM pg_indexes WHERE schemaname = ANY($1)
		UNION ALL
		SELECT format('sequence %s.%s %s %s %s %s', schemaname, sequencename, data_type, start_value, increment_by, cache_size)
		FROM pg_sequences WHERE schemaname = ANY($1)
		UNION ALL
		SELECT format('relation %s.%s %s %s', n.nspname, k.relname, k.relkind, coalesce(array_to_string(k.reloptions, ','), '-'))
		FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace WHERE n.nspname = ANY($1)
		UNION ALL
		SELECT format('domain %s.%s %s', n.nspname, y.typname, format_type(y.typbasetype, y.typtypmod))
		FROM pg_type y JOIN pg_namespace n ON n.oid = y.typnamespace WHERE y.typtype = 'd' AND n.nspname = ANY($1)
		ORDER BY 1`, schemas)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// dumpRows is every row of every table of the schemas, as JSON, one table
// a line, keyed by the table's name alone (a table that moved schema
// compares equal); the migration histories are left out.
func dumpRows(t *testing.T, pool *pgxpool.Pool, schemas ...string) map[string]string {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT table_schema, table_name FROM information_schema.tables
		WHERE table_schema = ANY($1) AND table_type = 'BASE TABLE'
		  AND table_name NOT IN ('schema_migrations', 'migrations', 'host_migrations')`, schemas)
	require.NoError(t, err)
	type table struct{ schema, name string }
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (table, error) {
		var tb table
		return tb, r.Scan(&tb.schema, &tb.name)
	})
	require.NoError(t, err)
	out := map[string]string{}
	for _, tb := range tables {
		var dump string
		require.NoError(t, pool.QueryRow(ctx, fmt.Sprintf(
			`SELECT coalesce(string_agg(to_jsonb(t)::text, E'\n' ORDER BY to_jsonb(t)::text), '') FROM %s t`,
			pgx.Identifier{tb.schema, tb.name}.Sanitize())).Scan(&dump))
		out[tb.name] = dump
	}
	return out
}

// The legacy set (store/migrations) is frozen: it only brings an old
// database to the point the conversion starts from. A migration added
// there would reach no new database; it belongs in the engine's set
// (store/schema/engine) or the host's (host/hoststore/schema/host).
func TestLegacySetIsFrozen(t *testing.T) {
	require.Equal(t, []string{
		"0001_foundation.sql", "0002_delivery.sql", "0003_surfaces.sql", "0004_event_fanout.sql",
		"0005_sending_index.sql", "0006_commit_time_sinks.sql", "0007_operators_and_authors.sql",
		"0008_webhooks.sql", "0009_digests.sql", "0010_board_indexes.sql", "0011_claim_order.sql",
		"0012_retention_and_webhook_delete.sql", "0013_delivery_churn.sql", "0014_claim_owner.sql",
		"0015_record_writes.sql", "0016_claimed_by_instance.sql", "0017_webhook_message_ids.sql",
		"0018_claim_tokens.sql", "0020_served_base_urls.sql",
	}, store.LegacyNamesForTest(),
		"store/migrations is the frozen legacy set: put a new migration in store/schema/engine (the engine's tables, "+
			"schema-qualified) or host/hoststore/schema/host (the reference host's), numbered after the last file there")
}
