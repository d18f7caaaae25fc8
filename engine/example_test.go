package engine_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginemigrate"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// Example shows an embedding program's whole use of the engine: migrate
// the engine's tables beside yours, declare your event type, build the
// engine over your pool, let its owner configure a sink, Start it, and call
// Emit inside the transaction that changes your state: the notification
// exists exactly when that transaction commits. It needs only the engine's
// packages; with no Directory, the engine has one owner
// (engine.SoleOwner) and no teams.
func Example() {
	ctx := context.Background()
	pool, cleanup := exampleDatabase(ctx) // yours: pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	defer cleanup()

	// The engine's tables, in their own schema (switchboard) with their
	// own history: your schema_migrations and queues are left alone.
	if err := enginemigrate.Up(ctx, pool); err != nil {
		panic(err)
	}

	// A Gotify server stand-in on loopback that prints what it receives.
	received := make(chan string, 1)
	gotify := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct{ Title string }
		_ = json.NewDecoder(r.Body).Decode(&m)
		received <- m.Title
	}))
	defer gotify.Close()

	// Your event type: its words, severity, dedup rule and message. The
	// engine cleans, cuts and escapes what Message returns.
	jobFailed := engine.EventKind{
		Type:     "job.failed",
		Words:    "A job failed",
		Label:    "Failed jobs",
		Severity: notifytype.SeverityHigh,
		Dedup:    engine.Dedup{By: engine.DedupOccurrence}, // one message per job run
		Message: func(m engine.EventMessage) sinks.Draft {
			return sinks.Draft{
				Title: "Job failed: " + m.Content.Title,
				Lines: []string{"The job failed after " + m.Content.Data["attempts"] + " attempts."},
				Link:  m.Content.LinkPath, LinkText: "Open the job",
			}
		},
	}

	key := make([]byte, 32) // SWITCHBOARD_SECRET_KEY
	_, _ = rand.Read(key)
	eng, err := engine.New(engine.Config{
		Pool:      pool,
		Events:    []engine.EventKind{jobFailed},
		Directory: nil, // one owner; your own engine.Directory for humans and teams
		SecretKey: key,
		BaseURL:   "https://switchboard.example.net",
		// A local receiver needs the operator's opt-ins; real sinks are HTTPS.
		PushAllowHTTP: true,
		PrivateHosts:  []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	if err != nil {
		panic(err)
	}
	if err := eng.Start(ctx); err != nil {
		panic(err)
	}
	defer func() {
		drain, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := eng.Stop(drain); err != nil {
			panic(err)
		}
	}()

	// The owner configures a connection, a sink and a subscription: the
	// same calls the web UI, the REST API and MCP make.
	ada, owner := engine.HumanPrincipal(engine.SoleOwner.ID), engine.SoleOwner
	conn, err := eng.CreateConnection(ctx, ada, engine.ConnectionInput{
		Owner: owner, Kind: engine.KindGotify, Name: "phone", BaseURL: gotify.URL,
		Secret: notifytype.NewSecret("gtfya.application-token"),
	})
	if err != nil {
		panic(err)
	}
	sink, err := eng.CreateSink(ctx, ada, engine.SinkInput{Owner: owner, Name: "phone", Kind: engine.KindGotify, ConnectionID: conn.ID})
	if err != nil {
		panic(err)
	}
	_, err = eng.AddSubscription(ctx, ada, sink.ID, engine.SubscriptionInput{
		EventTypes: []notifytype.EventType{"job.failed"},
	})
	if err != nil {
		panic(err)
	}

	// Your state change and its notification, in one transaction.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// ... UPDATE your job to failed here ...
		return eng.Emit(ctx, tx, engine.Event{
			Type:          "job.failed",
			Owner:         owner,
			OccurrenceKey: "42:run-1",
			Content:       sinks.Content{Title: "nightly-export", LinkPath: "/jobs/42", Data: map[string]string{"attempts": "3"}},
		})
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(<-received)
	// Output: Job failed: nightly-export
}

// exampleDatabase creates a fresh empty database on the test server
// (SWITCHBOARD_TEST_PGHOST, _PGPORT, _PGUSER; 127.0.0.1:5432 as postgres by
// default), with tables of its own as a host would have, and returns a
// pool on it and a function that drops it.
func exampleDatabase(ctx context.Context) (*pgxpool.Pool, func()) {
	admin, err := pgx.Connect(ctx, serverURL("postgres"))
	if err != nil {
		panic(err)
	}
	name := "example_" + rand.Text()[:10]
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		panic(err)
	}
	pool, err := pgxpool.New(ctx, serverURL(name))
	if err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL);
		CREATE TABLE queues (id bigserial PRIMARY KEY, name text NOT NULL)`); err != nil {
		panic(err)
	}
	return pool, func() {
		pool.Close()
		_, _ = admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		_ = admin.Close(ctx)
	}
}

func serverURL(db string) string {
	return fmt.Sprintf("postgres://%s@%s:%s/%s?sslmode=disable",
		cmp.Or(os.Getenv("SWITCHBOARD_TEST_PGUSER"), "postgres"), cmp.Or(os.Getenv("SWITCHBOARD_TEST_PGHOST"), "127.0.0.1"),
		cmp.Or(os.Getenv("SWITCHBOARD_TEST_PGPORT"), "5432"), db)
}
