package jobs_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"example.com/jobs"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginemigrate"
	"github.com/switchboard/notify/engine/notifytest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// world is the service on a fresh database its own migrations and the
// engine's were applied to by golang-migrate, with one user (a uuid) and
// one job of theirs.
type world struct {
	pool      *pgxpool.Pool
	eng       *engine.Engine
	gotify    *notifytest.Gotify
	user, job string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	url := storetest.EmptyURL(t)
	if err := jobs.Migrate(url); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	w := &world{pool: pool, gotify: notifytest.NewGotify(t)}
	if err := pool.QueryRow(ctx, `INSERT INTO users (id, name) VALUES (gen_random_uuid(), 'Ada') RETURNING id::text`).Scan(&w.user); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO jobs (id, owner_id, name, runs) VALUES (gen_random_uuid(), $1, 'nightly-export', 3) RETURNING id::text`,
		w.user).Scan(&w.job); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfg := jobs.Config(pool, key)
	w.gotify.Allow(&cfg)
	if w.eng, err = engine.New(cfg); err != nil {
		t.Fatal(err)
	}
	return w
}

// phone gives the user a Gotify sink subscribed to job.failed, as the
// service's settings page would.
func (w *world) phone(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ada, owner := engine.HumanPrincipal(w.user), jobs.Owner(w.user)
	conn, err := w.eng.CreateConnection(ctx, ada, engine.ConnectionInput{
		Owner: owner, Kind: engine.KindGotify, Name: "phone", BaseURL: w.gotify.URL,
		Secret: notifytype.NewSecret(w.gotify.Token),
	})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := w.eng.CreateSink(ctx, ada, engine.SinkInput{Owner: owner, Name: "phone", Kind: engine.KindGotify, ConnectionID: conn.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.eng.AddSubscription(ctx, ada, sink.ID, engine.SubscriptionInput{
		EventTypes: []notifytype.EventType{jobs.JobFailedType},
	}); err != nil {
		t.Fatal(err)
	}
}

// start starts the engine and stops it when the test ends, failing the
// test if the stop leaves anything.
func (w *world) start(t *testing.T) {
	t.Helper()
	if err := w.eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := w.eng.Stop(ctx); err != nil {
			t.Errorf("stopping the engine: %v", err)
		}
	})
}

func (w *world) fail(t *testing.T, cause string) {
	t.Helper()
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		return jobs.Fail(ctx, w.eng, tx, w.job, cause)
	}); err != nil {
		t.Fatal(err)
	}
}

func TestTheEngineStartsOnTheSchemaGolangMigrateApplied(t *testing.T) {
	w := newWorld(t)
	res, err := enginemigrate.New(w.pool).Validate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK {
		t.Fatalf("Validate: %v", res.Messages)
	}
	w.start(t)
}

func TestAFailureRolledBackEmitsNothing(t *testing.T) {
	w := newWorld(t)
	w.phone(t)
	ctx := context.Background()
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := jobs.Fail(ctx, w.eng, tx, w.job, "disk full"); err != nil {
		t.Fatal(err)
	}
	opts := &notifytest.EmittedOpts{Owner: jobs.Owner(w.user).String()}
	e := notifytest.RequireEmittedTx(ctx, t, tx, jobs.JobFailedType, opts)
	if len(e.SinkIDs) != 1 {
		t.Fatalf("the emit in the transaction matched sinks %v, want the user's phone", e.SinkIDs)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	notifytest.RequireNotEmittedTx(ctx, t, w.pool, jobs.JobFailedType, nil)
}

func TestAFailedJobReachesItsOwnersPhoneInTheServicesWords(t *testing.T) {
	w := newWorld(t)
	w.phone(t)
	w.start(t)
	ctx := context.Background()

	w.fail(t, "disk full")
	w.fail(t, "disk full") // the same run again: one notification
	if _, err := notifytest.Deliver(ctx, w.eng, w.pool); err != nil {
		t.Fatal(err)
	}
	msgs := w.gotify.Messages()
	if len(msgs) != 1 {
		t.Fatalf("the phone got %d messages, want 1: %+v", len(msgs), msgs)
	}
	m := msgs[0]
	if m.Title != "Job failed: nightly-export" {
		t.Errorf("title %q", m.Title)
	}
	for _, want := range []string{"Run 3 failed.", "Error: disk full", jobs.BaseURL + "/jobs/" + w.job} {
		if !strings.Contains(m.Message, want) {
			t.Errorf("message %q lacks %q", m.Message, want)
		}
	}
	for _, host := range []string{"todo", "board", "queue"} {
		if strings.Contains(strings.ToLower(m.Message+m.Title), host) {
			t.Errorf("the message speaks the reference host's words (%q): %q", host, m.Message)
		}
	}
}
