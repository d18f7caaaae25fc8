package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// Budgets raised so that they never limit: the operator maxima the engines
// are configured with, and what every sink is created with. 36 million an
// hour is one token per 100 µs (10 000/s per sink), and a burst of a million
// tolerates 100 s of backlog.
const (
	budgetPerHour = 36_000_000
	budgetBurst   = 1_000_000
)

// notifyChannel is the engine's LISTEN/NOTIFY channel (engine/claimer.go);
// the driver listens on it too, to time the wake.
const notifyChannel = "switchboard_outbox"

// content is every event's content, as in engine/delivery_test.go.
var content = host.WithTodo(sinks.Content{Title: "nightly build", Place: "forge", LinkPath: "/board/todos/1"},
	host.TodoContent{Cause: "fail at the cap", Attempts: 3})

// owner is one owner scope with its sinks, all on the stand-in.
type owner struct {
	scope notifytype.OwnerScope
	sinks []int64
}

// world is the database, the host's pool, the stand-in and the owners.
type world struct {
	url   string
	host  *pgxpool.Pool // the host's pool: fixtures and the emitting transactions
	key   []byte
	gs    *standIn
	todo  atomic.Int64 // a new todo id per event: a new dedup key per event
	owner map[int]*owner
	log   *slog.Logger
	conns int32 // engine pool size; 0: the server binary's default

	notes chan time.Time // the driver's own LISTEN: when each NOTIFY arrived
}

func newWorld(ctx context.Context, url string, sinkCounts []int, conns int) (*world, error) {
	hp, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, err
	}
	w := &world{
		url: url, host: hp, key: make([]byte, 32), gs: newStandIn(), owner: map[int]*owner{},
		log:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		conns: int32(conns), notes: make(chan time.Time, 1024),
	}
	_, _ = rand.Read(w.key)
	if err := host.Migrate(ctx, hp); err != nil {
		return nil, err
	}
	// A management engine, never served: the fixtures go in through the
	// management service as an owner would make them.
	mgmt, err := engine.New(w.config(hp, 0, nil))
	if err != nil {
		return nil, err
	}
	for _, n := range sinkCounts {
		if _, ok := w.owner[n]; ok {
			continue
		}
		h, err := hoststore.InsertHuman(ctx, hp, "bench-"+rand.Text()[:8], rand.Text()[:12]+"@example.test")
		if err != nil {
			return nil, err
		}
		p, o := engine.HumanPrincipal(hostid.String(h.ID)), &owner{scope: hostid.Human(h.ID)}
		for i := range n {
			c, err := mgmt.CreateConnection(ctx, p, engine.ConnectionInput{
				Owner: o.scope, Kind: engine.KindGotify, Name: fmt.Sprintf("gotify-%d", i), BaseURL: w.gs.URL,
				Secret: notifytype.NewSecret("gtfya.bench-" + rand.Text()[:10]),
			})
			if err != nil {
				return nil, err
			}
			s, err := mgmt.CreateSink(ctx, p, engine.SinkInput{
				Owner: o.scope, Name: fmt.Sprintf("sink-%d", i), Kind: engine.KindGotify, ConnectionID: c.ID,
				BudgetPerHour: budgetPerHour, BudgetBurst: budgetBurst,
			})
			if err != nil {
				return nil, err
			}
			if _, err := mgmt.AddSubscription(ctx, p, s.ID, engine.SubscriptionInput{
				EventTypes: []notifytype.EventType{host.EventTodoDeadLettered},
			}); err != nil {
				return nil, err
			}
			o.sinks = append(o.sinks, s.ID)
		}
		w.owner[n] = o
	}
	if _, err := hp.Exec(ctx, `CREATE TABLE bench_commit (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("error creating the scratch table: %w", err)
	}
	if err := w.listen(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// config is the engine's configuration: enginetest's (loopback allowed over
// plain HTTP, a 32-byte key) on the real clock, PollInterval at its default,
// NotifyDebounce as given (0: its default), budget bounds raised.
func (w *world) config(pool *pgxpool.Pool, debounce time.Duration, r *running) engine.Config {
	cfg := engine.Config{
		Pool:      pool,
		Directory: host.NewDirectory(pool), Events: host.Events(), Links: host.Links(),
		SecretKey:        w.key,
		BaseURL:          "https://switchboard.example.net",
		PushAllowHTTP:    true,
		PrivateHosts:     []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		BudgetPerHourMax: budgetPerHour,
		BudgetBurstMax:   budgetBurst,
		NotifyDebounce:   debounce,
		Logger:           w.log,
	}
	if r != nil {
		cfg.OnAttempt = r.onAttempt
		cfg.OnClaim = r.onClaim
	}
	return cfg
}

// listen times every NOTIFY on the engine's channel, on a connection of
// its own, as the engine's listener receives them.
func (w *world) listen(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, w.url)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	go func() {
		defer conn.Close(context.Background())
		for {
			if _, err := conn.WaitForNotification(ctx); err != nil {
				return
			}
			select {
			case w.notes <- time.Now():
			default:
			}
		}
	}()
	return nil
}

// emit commits one todo.dead_lettered event of o in a transaction of its
// own (BEGIN, Emit, COMMIT) through eng, and returns when COMMIT returned.
func (w *world) emit(ctx context.Context, eng *engine.Engine, o *owner) (time.Time, error) {
	ev := engine.Event{
		Type: host.EventTodoDeadLettered, Owner: o.scope, OccurrenceKey: host.DeadLetterKey(w.todo.Add(1), 1),
		Content: content,
	}
	err := pgx.BeginFunc(ctx, w.host, func(tx pgx.Tx) error { return eng.Emit(ctx, tx, ev) })
	return time.Now(), err
}

// running is one engine serving on a pool of its own, as an instance of the
// embedding server would.
type running struct {
	eng      *engine.Engine
	pool     *pgxpool.Pool
	cancel   context.CancelFunc
	done     chan error
	attempts chan engine.Attempt // every attempt, as OnAttempt reports it
	claims   chan time.Time      // when the claimer handed each row to an actor
	failed   atomic.Int64        // attempts that did not deliver
	claimed  atomic.Int64        // rows the claimer handed over (or tried to: a row it gives back counts)
}

func (r *running) onAttempt(a engine.Attempt) {
	if a.State != "delivered" {
		r.failed.Add(1)
	}
	select {
	case r.attempts <- a:
	default:
	}
}

func (r *running) onClaim(int64, time.Duration) {
	r.claimed.Add(1)
	select {
	case r.claims <- time.Now():
	default:
	}
}

// start serves a fresh engine with NotifyDebounce debounce (0: default).
// It vacuums the engine's tables first: each delivery updates its outbox
// row three times, none of them HOT, and a test server may run with
// autovacuum off, so that dead rows would pile up from run to run.
func (w *world) start(debounce time.Duration) (*running, error) {
	if _, err := w.host.Exec(context.Background(), `VACUUM (ANALYZE) switchboard.outbox, switchboard.outbox_events, switchboard.delivery_records`); err != nil {
		return nil, fmt.Errorf("error vacuuming: %w", err)
	}
	pc, err := pgxpool.ParseConfig(w.url)
	if err != nil {
		return nil, err
	}
	store.ApplyPoolDefaults(pc, w.url) // as the server binary
	if w.conns > 0 {
		pc.MaxConns = w.conns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, err
	}
	r := &running{pool: pool, done: make(chan error, 1), attempts: make(chan engine.Attempt, 1<<16), claims: make(chan time.Time, 1<<16)}
	r.eng, err = engine.New(w.config(pool, debounce, r))
	if err != nil {
		pool.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.eng.Serve(ctx) }()
	return r, nil
}

// stop stops the engine, waits for it and closes its pool.
func (r *running) stop() error {
	r.cancel()
	err := <-r.done
	r.pool.Close()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if n := r.failed.Load(); n > 0 && err == nil {
		err = fmt.Errorf("%d attempts did not deliver", n)
	}
	return err
}

// waitAttempts waits for n more attempts.
func (r *running) waitAttempts(n int, timeout time.Duration) error {
	deadline := time.After(timeout)
	for i := range n {
		select {
		case <-r.attempts:
		case <-deadline:
			return fmt.Errorf("%d of %d attempts within %v", i, n, timeout)
		}
	}
	return nil
}

// warm makes the engine ready as it would be in service: its listener
// listening, its sink actors started, its HTTP connections open, its
// statements prepared. It emits events for o one at a time, each after the
// previous was recorded.
func (w *world) warm(ctx context.Context, r *running, o *owner, events int) error {
	for range events {
		if _, err := w.emit(ctx, r.eng, o); err != nil {
			return err
		}
		if err := r.waitAttempts(len(o.sinks), 10*time.Second); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	return nil
}

// standIn is a Gotify stand-in on loopback that answers 200 to every
// message and reports when each request arrived (on entering the handler,
// before the body is read).
type standIn struct {
	*httptest.Server
	hook     atomic.Pointer[func(time.Time)]
	newConns atomic.Int64
}

func newStandIn() *standIn {
	g := &standIn{}
	g.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		t := time.Now()
		_, _ = io.Copy(io.Discard, r.Body)
		if h := g.hook.Load(); h != nil {
			(*h)(t)
		}
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write([]byte(`{"id":1}`))
	}))
	g.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			g.newConns.Add(1)
		}
	}
	g.Start()
	return g
}

// on sets what each arriving request reports to (nil: nothing).
func (g *standIn) on(h func(time.Time)) {
	if h == nil {
		g.hook.Store(nil)
		return
	}
	g.hook.Store(&h)
}

// baselineBody is what the engine's Gotify adapter posts for content.
func baselineBody() []byte {
	msg := host.Render(content, sinks.Meta{
		EventType: host.EventTodoDeadLettered, Severity: notifytype.SeverityHigh, Count: 1,
		BaseURL: "https://switchboard.example.net",
	})
	b, _ := json.Marshal(struct {
		Title    string `json:"title"`
		Message  string `json:"message"`
		Priority int    `json:"priority"`
	}{msg.Title, msg.Body, 8})
	return b
}

// plainClient is the baseline's client: net/http with keep-alive and
// enough idle connections per host for conc requests in flight.
func plainClient(conc int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(conc, 2)
	return &http.Client{Transport: t, Timeout: 10 * time.Second}
}

// post sends one message as the Gotify adapter does.
func post(ctx context.Context, c *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/message", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Gotify-Key", "gtfya.bench-baseline")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("stand-in answered %d", resp.StatusCode)
	}
	return nil
}
