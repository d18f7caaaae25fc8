package engine_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// Example shows an embedding server's whole use of the engine: build it
// over your pool, let an owner configure a sink, run Serve, and call Emit
// inside the transaction that changes your state. The notification exists
// exactly when that transaction commits.
func Example() {
	ctx := context.Background()
	pool, cleanup := exampleDatabase(ctx) // yours: pgxpool.New(ctx, os.Getenv("DATABASE_URL")) and store.Migrate
	defer cleanup()

	// A Gotify server stand-in on loopback that prints what it receives.
	received := make(chan string, 1)
	gotify := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct{ Title string }
		_ = json.NewDecoder(r.Body).Decode(&m)
		received <- m.Title
	}))
	defer gotify.Close()

	key := make([]byte, 32) // SWITCHBOARD_SECRET_KEY
	_, _ = rand.Read(key)
	eng, err := engine.New(engine.Config{
		Pool:      pool,
		Directory: host.NewDirectory(pool), // or your own engine.Directory
		SecretKey: key,
		BaseURL:   "https://switchboard.example.net",
		// A local receiver needs the operator's opt-ins; real sinks are HTTPS.
		PushAllowHTTP: true,
		PrivateHosts:  []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	if err != nil {
		panic(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error)
	go func() { served <- eng.Serve(serveCtx) }()
	defer func() { stop(); <-served }()

	// The owner configures a connection, a sink and a subscription: the
	// same calls the web UI, the REST API and MCP make.
	var humanID int64
	_ = pool.QueryRow(ctx, `INSERT INTO humans (name, email) VALUES ('Ada', 'ada@example.net') RETURNING id`).Scan(&humanID)
	ada, owner := engine.HumanPrincipal(humanID), notifytype.Human(humanID)
	conn, err := eng.CreateConnection(ctx, ada, engine.ConnectionInput{
		Owner: owner, Kind: engine.KindGotify, Name: "phone", AccountKey: gotify.URL,
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
		EventTypes: []notifytype.EventType{notifytype.EventTodoDeadLettered},
	})
	if err != nil {
		panic(err)
	}

	// Your state change and its notification, in one transaction.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// ... UPDATE your todo to dead here ...
		return eng.Emit(ctx, tx, engine.Event{
			Type:            notifytype.EventTodoDeadLettered,
			Owner:           owner,
			TodoID:          42,
			DeadLetterCount: 1,
			Content:         sinks.Content{Title: "nightly build", Place: "forge", LinkPath: "/board/todos/42"},
		})
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(<-received)
	// Output: Dead letter in forge: nightly build
}

// exampleDatabase creates a fresh migrated database on the test server and
// returns a pool on it and a function that drops it.
func exampleDatabase(ctx context.Context) (*pgxpool.Pool, func()) {
	admin, err := pgx.Connect(ctx, storetest.ServerURL("postgres"))
	if err != nil {
		panic(err)
	}
	name := "example_" + rand.Text()[:10]
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		panic(err)
	}
	pool, err := pgxpool.New(ctx, storetest.ServerURL(name))
	if err != nil {
		panic(err)
	}
	if err := store.Migrate(ctx, pool); err != nil {
		panic(err)
	}
	return pool, func() {
		pool.Close()
		_, _ = admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		_ = admin.Close(ctx)
	}
}
