// Command embed is a whole embedding of the Switchboard Notify engine in a
// program of its own, using only the engine's packages (no reference host):
// a database that already has its own schema_migrations and queues tables
// gets the engine's tables beside them, in the schema switchboard; the
// program declares its own event type (queue.stuck: its words, severity,
// dedup rule and message); the program's one owner configures a Gotify
// sink; a change of the program's own state emits an event in the
// program's own transaction; and a Gotify stand-in receives the message,
// in the program's words, linking the program's own page.
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/mine?sslmode=disable go run ./examples/embed
//
// It prints what the Gotify stand-in received and exits 0, or says what
// went wrong and exits 1. It is built and run as a module of its own, outside
// this repository, by TestEmbedOutsideTheModule.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Getenv("DATABASE_URL"), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, databaseURL string, out io.Writer) error {
	if databaseURL == "" {
		return errors.New("set DATABASE_URL")
	}
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()

	// The program's own tables, as its own migration tool (golang-migrate
	// here) would have left them.
	if _, err := pool.Exec(ctx, `
		CREATE TABLE IF NOT EXISTS schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL);
		CREATE TABLE IF NOT EXISTS queues (id bigserial PRIMARY KEY, name text NOT NULL, state text NOT NULL DEFAULT 'ok')`); err != nil {
		return fmt.Errorf("error creating the program's own tables: %w", err)
	}
	// The engine's tables, beside them: the schema switchboard, with its
	// own history (switchboard.migrations).
	if err := enginemigrate.Up(ctx, pool); err != nil {
		return err
	}

	// A Gotify stand-in that hands over the first message it receives:
	// its title and the link a click opens.
	received := make(chan string, 1)
	gotify := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			Title, Message string
			Extras         struct {
				Notification struct {
					Click struct{ URL string } `json:"click"`
				} `json:"client::notification"`
			}
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		select {
		case received <- m.Title + " -> " + m.Extras.Notification.Click.URL:
		default:
		}
	}))
	defer gotify.Close()

	// The program's own event type. The engine refuses any type not
	// declared, and keeps the rules of what a message may carry: Message
	// words it, the engine cleans, cuts and escapes it.
	queueStuck := engine.EventKind{
		Type:     "queue.stuck",
		Words:    "A queue is stuck",
		Label:    "Stuck queues",
		Severity: notifytype.SeverityHigh,
		// One message per queue and incident, however often it is emitted.
		Dedup: engine.Dedup{By: engine.DedupOccurrence},
		Message: func(m engine.EventMessage) engine.Draft {
			return engine.Draft{
				Title:    "Queue stuck: " + m.Content.Place,
				Lines:    []string{m.Content.Summary},
				Link:     m.Content.LinkPath,
				LinkText: "Open the queue",
			}
		},
	}

	key := make([]byte, 32) // keep yours: it seals the sinks' secrets
	_, _ = rand.Read(key)
	eng, err := engine.New(engine.Config{
		Pool:      pool,
		Directory: nil, // one owner (engine.SoleOwner), no teams
		SecretKey: key,
		BaseURL:   "https://example.net",
		Events:    []engine.EventKind{queueStuck},
		// The message that stands for held rows when a sink's budget
		// returns links the program's own page.
		Links: engine.Links{Coalesced: func(notifytype.OwnerScope) string { return "/notifications" }},
		// The stand-in listens on loopback over HTTP: both need the
		// operator's opt-in. A real Gotify server is reached over HTTPS.
		PushAllowHTTP: true,
		PrivateHosts:  []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	if err != nil {
		return err
	}

	// The owner's sink: a connection (the server and its token), a sink on
	// it, and a subscription to the program's event type.
	owner := engine.HumanPrincipal(engine.SoleOwner.ID)
	conn, err := eng.CreateConnection(ctx, owner, engine.ConnectionInput{
		Owner: engine.SoleOwner, Kind: engine.KindGotify, Name: "phone-" + rand.Text()[:6],
		BaseURL: gotify.URL, Secret: notifytype.NewSecret("gotify-app-token"),
	})
	if err != nil {
		return err
	}
	sink, err := eng.CreateSink(ctx, owner, engine.SinkInput{
		Owner: engine.SoleOwner, Name: conn.Name, Kind: engine.KindGotify, ConnectionID: conn.ID,
	})
	if err != nil {
		return err
	}
	if _, err := eng.AddSubscription(ctx, owner, sink.ID, engine.SubscriptionInput{
		EventTypes: []notifytype.EventType{"queue.stuck"},
	}); err != nil {
		return err
	}

	if err := eng.Start(ctx); err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = eng.Stop(context.Background())
		}
	}()

	// The program's own state change and its notification, in one
	// transaction of the program's: the event exists exactly when the
	// change commits.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var queue int64
		if err := tx.QueryRow(ctx, `INSERT INTO queues (name, state) VALUES ('builds', 'stuck') RETURNING id`).Scan(&queue); err != nil {
			return err
		}
		return eng.Emit(ctx, tx, engine.Event{
			Type:          "queue.stuck",
			Owner:         engine.SoleOwner,
			QueueID:       queue,
			OccurrenceKey: fmt.Sprintf("%d:1", queue), // the queue's first incident
			Content: engine.Content{
				Place: "builds", Summary: "no job has finished for an hour",
				LinkPath: fmt.Sprintf("/queues/%d", queue),
			},
		})
	})
	if err != nil {
		return err
	}

	select {
	case title := <-received:
		fmt.Fprintln(out, "delivered:", title)
	case <-ctx.Done():
		return fmt.Errorf("nothing delivered: %w", ctx.Err())
	}
	drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	stopped = true
	return eng.Stop(drain)
}
