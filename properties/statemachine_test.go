package properties

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// The delivery core as a state machine (issue 18): two or three engines
// share one database, each a pool of its own, on the world's fake clock
// (started from the real time.Now()); two sinks whose receivers can be
// switched to fail; actions emit, flip a receiver, hold its requests (a
// slow sink), advance the clock past backoffs and claim TTLs, crash an
// engine and restart it. After every action the invariants are read from
// the database and the receivers (smMachine.check); at the end every
// event is accounted for (smMachine.settleAll).

// Heartbeats of the machine's engines: the clock moves in steps shorter
// than smHeartbeatTTL − smHeartbeatEvery, and waits for every live engine
// to beat after each, so that a live engine never looks dead because the
// fake clock jumped (in real time it beats every smHeartbeatEvery).
const (
	smHeartbeatEvery = 15 * time.Second
	smHeartbeatTTL   = time.Minute
	smMaxStep        = 30 * time.Second
)

// smMode is how a receiver answers.
type smMode int

const (
	smOK   smMode = iota // 200
	smFail               // 500: transient (server)
	smDrop               // the connection closed without an answer: transient (network), as a timeout is
)

func (m smMode) String() string { return [...]string{"ok", "fail", "drop"}[m] }

// smReceipt is one request a receiver got.
type smReceipt struct {
	serial int     // the serial of the event that opened the row; 0 for a coalesced message
	row    int64   // that row (0 for a coalesced message)
	rows   []int64 // a coalesced message's rows: those its attempt's record links
	late   bool    // a coalesced message that arrived after its rows were taken over (coalescedRows)
	events int     // how many events the message stands for
	ok     bool    // answered 200 to a client still waiting
}

// smSenders knows which engine is sending which message: every engine's
// adapters note the title they send, under the engine's name, before the
// request leaves, so the receiver checks the order of one instance's
// sends against that instance's own claims.
type smSenders struct {
	mu     sync.Mutex
	byItem map[string]string // title: the engine sending it last
}

func (s *smSenders) note(title, engine string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byItem == nil {
		s.byItem = map[string]string{}
	}
	s.byItem[title] = engine
}

func (s *smSenders) of(title string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byItem[title]
}

// smAdapter is an adapter as a function.
type smAdapter func(ctx context.Context, m sinks.Message) sinks.Result

func (f smAdapter) Deliver(ctx context.Context, m sinks.Message) sinks.Result { return f(ctx, m) }

var (
	smSingle    = regexp.MustCompile(`: e(\d+)(?: \(and (\d+) more\))?$`)
	smCoalesced = coalescedTitle // one pattern for the coalesced title (coalesce_test.go)
)

// smReceiver is a Gotify stand-in for one sink.
type smReceiver struct {
	*httptest.Server
	w       *hosttest.World
	sink    int64
	senders *smSenders

	mu       sync.Mutex
	mode     smMode
	hold     chan struct{} // non-nil while requests are held: closed to release them
	receipts []smReceipt
	faults   []string // order violations and unreadable requests seen
	live     func() []string
	lost     func() bool // whether a claim was lost in the check (an allowance)
}

// newSMReceiver starts a receiver; its check closes it.
func newSMReceiver(w *hosttest.World, senders *smSenders) *smReceiver {
	rc := &smReceiver{w: w, senders: senders}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	return rc
}

func (rc *smReceiver) reset(sink int64, live func() []string, lost func() bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.hold != nil {
		close(rc.hold)
	}
	rc.sink, rc.live, rc.lost, rc.mode, rc.hold, rc.receipts, rc.faults = sink, live, lost, smOK, nil, nil, nil
}

func (rc *smReceiver) setMode(m smMode) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.mode = m
}

// setHold holds the requests that arrive from now on until release.
func (rc *smReceiver) setHold() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.hold == nil {
		rc.hold = make(chan struct{})
	}
}

func (rc *smReceiver) release() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.hold != nil {
		close(rc.hold)
		rc.hold = nil
	}
}

func (rc *smReceiver) held() bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.hold != nil
}

func (rc *smReceiver) snapshot() ([]smReceipt, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.receipts), slices.Clone(rc.faults)
}

func (rc *smReceiver) fault(format string, args ...any) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.faults = append(rc.faults, fmt.Sprintf(format, args...))
}

func (rc *smReceiver) serve(rw http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var m struct{ Title string }
	_ = json.Unmarshal(raw, &m)
	rec := smReceipt{}
	switch s, c := smSingle.FindStringSubmatch(m.Title), smCoalesced.FindStringSubmatch(m.Title); {
	case s != nil:
		rec.serial, _ = strconv.Atoi(s[1])
		rec.events = 1
		if s[2] != "" {
			more, _ := strconv.Atoi(s[2])
			rec.events += more
		}
		rec.row = rc.checkOrder(r.Context(), rec.serial, rc.senders.of(m.Title))
	case c != nil:
		rec.events, _ = strconv.Atoi(c[1])
		rec.rows, rec.late = rc.coalescedRows(r.Context(), rc.senders.of(m.Title))
	default:
		rc.fault("unreadable title %q", m.Title)
	}

	rc.mu.Lock()
	mode, hold := rc.mode, rc.hold
	rc.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}
	switch mode {
	case smOK:
		rec.ok = r.Context().Err() == nil
		rw.WriteHeader(http.StatusOK)
		_, _ = rw.Write([]byte(`{"id": 1}`))
	case smFail:
		rw.WriteHeader(http.StatusInternalServerError)
	case smDrop:
		if conn, _, err := http.NewResponseController(rw).Hijack(); err == nil {
			_ = conn.Close()
		}
	}
	rc.mu.Lock()
	rc.receipts = append(rc.receipts, rec)
	rc.mu.Unlock()
}

// checkOrder finds the row an arriving message is for, and checks the
// documented order (README "How delivery scales"; store.ClaimDue) two
// ways.
//
// Within one instance, with no excuse: the instance sending the row
// (sender, as its adapter noted it) holds no row of the sink from the same
// claim or an earlier one whose attempt has not begun and that comes
// before it, by due time and then by event (the events' serials: their
// order of emission, which is also the order of equal due times). Such a
// row would go out after this one: the claim handed the rows over, or the
// instance dispatched them, out of order (issue 23, defect 1). A row's
// attempt began under its claim when a record of it (its own, or a
// coalesced message's linked from it) was written at or after the claim
// began: claim_expires_at <= sent_at + ClaimTTL (a start that extends the
// claim sets it to exactly that); a claim alone leaves older records, or
// none. A row whose claim has expired is any instance's to take (at least
// once): its holder's order no longer binds it.
//
// Across instances, best effort: while a live instance's claim holds the
// row, no row of the sink that fell due before it, and was never
// attempted, waits pending, while no other instance holds rows of the
// sink. (A row attempted before may be due before it and still be right
// behind it: a retry whose slot was already past when its outcome was
// written.) A held row, flushed when its token returns (D9), is held to
// the same: the flush waits while a pending row of the sink fell due
// before it (store.ClaimHeld), whoever is to claim that row.
func (rc *smReceiver) checkOrder(ctx context.Context, serial int, sender string) int64 {
	rc.mu.Lock()
	sink, live := rc.sink, rc.live()
	rc.mu.Unlock()
	var (
		row            int64
		earlier, ahead []int64
	)
	err := rc.w.Pool.QueryRow(ctx, `
		WITH r AS (
		    SELECT id, due_at, state, claimed_by, claim_expires_at, claim_token,
		           substring(payload->>'link_path' from '[0-9]+$')::int AS serial
		    FROM switchboard.outbox
		    WHERE sink_id = $1 AND payload->>'link_path' = $2
		)
		SELECT r.id, ARRAY(
		    SELECT o.id FROM switchboard.outbox o
		    WHERE r.state = 'claimed' AND r.claimed_by = ANY ($3) AND r.claim_expires_at > $4
		      AND o.sink_id = $1 AND o.state = 'pending' AND (o.due_at, o.id) < (r.due_at, r.id)
		      AND NOT EXISTS (SELECT 1 FROM switchboard.delivery_records d WHERE d.outbox_id = o.id)
		      AND NOT EXISTS (SELECT 1 FROM switchboard.outbox c WHERE c.sink_id = $1 AND c.state = 'claimed'
		                      AND c.claimed_by <> r.claimed_by))
		, ARRAY(
		    SELECT o.id FROM switchboard.outbox o
		    WHERE r.state = 'claimed' AND r.claimed_by = $5
		      AND o.sink_id = $1 AND o.id <> r.id AND o.state = 'claimed' AND o.claimed_by = $5
		      AND o.claim_token <= r.claim_token AND o.claim_expires_at > $4
		      AND (o.due_at, substring(o.payload->>'link_path' from '[0-9]+$')::int) < (r.due_at, r.serial)
		      AND NOT EXISTS (SELECT 1 FROM switchboard.delivery_records d
		                      WHERE (d.outbox_id = o.id OR d.id = o.attempt_record_id)
		                        AND d.sent_at + $6::interval >= o.claim_expires_at)
		    ORDER BY o.id)
		FROM r`, sink, smLink(serial), live, rc.w.Clock.Now(), sender, engine.ClaimTTLDefault).Scan(&row, &earlier, &ahead)
	switch {
	case errors.Is(err, pgx.ErrNoRows) && rc.lost():
		// A late message of a claim lost: a row goes only when a repeat
		// of its key going back takes it in, and only while it is open
		// (pending or held: absorbRepeats), so the row of a message under
		// way had been claimed since by another instance, which failed it
		// or gave it back. Its sender began the attempt, then crashed, or
		// the clock passed its claim, before the message left (in real
		// time a send ends long before either; on this machine's loaded
		// runs it did not). The allowance covers the send; no row is left
		// to check it against.
		return 0
	case err != nil:
		rc.fault("message for e%d from %s: no row found (%v); live %v; rows:%s", serial, sender, err, live, smDescribe(ctx, rc.w, sink))
	case len(ahead) > 0:
		rc.fault("row %d (e%d) sent by %s while it held rows %v of sink %d, due before it or of earlier events, not yet begun, at %v; rows:%s",
			row, serial, sender, ahead, sink, rc.w.Clock.Now().Sub(enginetest.Start), smDescribe(ctx, rc.w, sink))
	case len(earlier) > 0:
		rc.fault("row %d (e%d) sent while rows %v of sink %d, due before it, waited pending, at %v; live %v; rows:%s",
			row, serial, earlier, sink, rc.w.Clock.Now().Sub(enginetest.Start), live, smDescribe(ctx, rc.w, sink))
	}
	return row
}

// coalescedRows returns the rows of the coalesced message arriving, sent
// by sender: those the sink's latest coalesced record still sending links
// (its rows are claimed and linked, and the record written, before the
// message is sent).
//
// Or, late, those of the sink's newest coalesced record when another
// instance closed it as abandoned: the fake clock outran the message.
// Its sender committed the record and had not yet sent the request when
// the clock passed the claim's expiry or the sender's heartbeat (in real
// time a send ends long before either, which this machine cannot hold
// it to), and a claim took its rows over and closed the record. Such a
// message's rows must each have an allowance (a claim lost while it may
// have been mid-send: check).
func (rc *smReceiver) coalescedRows(ctx context.Context, sender string) (rows []int64, late bool) {
	rc.mu.Lock()
	sink, live := rc.sink, rc.live()
	rc.mu.Unlock()
	err := rc.w.Pool.QueryRow(ctx, `
		SELECT ARRAY(
		    SELECT o.id FROM switchboard.outbox o
		    WHERE o.sink_id = $1 AND o.attempt_record_id = (
		        SELECT max(d.id) FROM switchboard.delivery_records d
		        WHERE d.sink_id = $1 AND d.status = 'sending' AND d.outbox_id IS NULL)
		    ORDER BY o.id)`, sink).Scan(&rows)
	if err == nil && len(rows) == 0 {
		err = rc.w.Pool.QueryRow(ctx, `
			SELECT ARRAY(
			    SELECT o.id FROM switchboard.outbox o
			    WHERE o.sink_id = $1 AND o.attempt_record_id = (
			        SELECT d.id FROM switchboard.delivery_records d
			        WHERE d.sink_id = $1 AND d.outbox_id IS NULL ORDER BY d.id DESC LIMIT 1)
			      AND EXISTS (SELECT 1 FROM switchboard.delivery_records d
			                  WHERE d.id = o.attempt_record_id AND d.status = 'failed' AND d.class = 'abandoned')
			    ORDER BY o.id)`, sink).Scan(&rows)
		late = len(rows) > 0
	}
	switch {
	case err != nil:
		rc.fault("coalesced message: its rows not found (%v)", err)
	case len(rows) == 0:
		// Which instance sent it, whether it still lives (a crashed
		// instance's send may arrive late), and the sink's rows: what a
		// repeat needs to tell a late send from one without its record.
		rc.fault("coalesced message: no row linked to a coalesced record sending, nor to the newest one closed as abandoned; sent by %s (live %v) at %v; rows:%s",
			sender, live, rc.w.Clock.Now().Sub(enginetest.Start), smDescribe(ctx, rc.w, sink))
	}
	return rows, late
}

// smDescribe lists a sink's rows, for failure messages.
func smDescribe(ctx context.Context, w *hosttest.World, sink int64) string {
	var rows, records, instances string
	err := w.Pool.QueryRow(ctx, `
		SELECT coalesce((SELECT string_agg(format(E'\n  row %s %s attempts %s due %s claimed by %s until %s token %s key %s count %s',
		       id, state, attempts, due_at - $2, claimed_by, claim_expires_at - $2, claim_token, dedup_key, count), '' ORDER BY id)
		       FROM switchboard.outbox WHERE sink_id = $1), ''),
		       coalesce((SELECT string_agg(format(E'\n  record %s of row %s attempt %s %s %s sent %s finished %s',
		       id, outbox_id, attempt, status, class, sent_at - $2, finished_at - $2), '' ORDER BY id)
		       FROM switchboard.delivery_records WHERE sink_id = $1), ''),
		       coalesce((SELECT string_agg(format(E'\n  instance %s alive until %s', name, alive_until - $2), '' ORDER BY name)
		       FROM switchboard.outbox_instances), '')`, sink, enginetest.Start).Scan(&rows, &records, &instances)
	if err != nil {
		return err.Error()
	}
	return rows + records + instances
}

func smLink(serial int) string { return fmt.Sprintf("/board/events/%d", serial) }

// smEngine is one instance of the machine: an engine on a pool of its
// own, whose connections the machine can cut as a crash would.
type smEngine struct {
	eng     *engine.Engine
	name    string
	dialer  *cuttableDialer
	cancel  context.CancelFunc
	done    chan error
	pool    *pgxpool.Pool
	stopped chan struct{}

	stopOnce sync.Once
	stopErr  error
}

// cuttableDialer dials the database until it is cut; cut closes every
// connection it made.
type cuttableDialer struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (d *cuttableDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		return nil, errors.New("the instance crashed")
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *cuttableDialer) sever() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = true
	for _, c := range d.conns {
		_ = c.Close()
	}
}

// smEngines are every engine a test started: its cleanup stops those
// still running, whatever way a check ended.
type smEngines struct {
	mu  sync.Mutex
	all []*smEngine
}

func (r *smEngines) add(e *smEngine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, e)
}

func (r *smEngines) stopAll() {
	r.mu.Lock()
	all := slices.Clone(r.all)
	r.mu.Unlock()
	for _, e := range all {
		_ = e.stop()
	}
}

func startSMEngine(rt *rapid.T, w *hosttest.World, reg *smEngines, senders *smSenders) *smEngine {
	rt.Helper()
	name := "sm-" + rand.Text()[:10]
	cfg, err := pgxpool.ParseConfig(w.URL)
	require.NoError(rt, err)
	d := &cuttableDialer{}
	cfg.ConnConfig.DialFunc = d.dial
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(rt, err)
	eng, err := engine.New(w.Config(pool, quietJanitor, func(c *engine.Config) {
		c.Instance = name
		c.HeartbeatEvery, c.HeartbeatTTL = smHeartbeatEvery, smHeartbeatTTL
	}))
	require.NoError(rt, err)
	testhooks.WrapAdapters(eng, func(_ int64, a sinks.Adapter) sinks.Adapter {
		return smAdapter(func(ctx context.Context, m sinks.Message) sinks.Result {
			senders.note(m.Title, name)
			return a.Deliver(ctx, m)
		})
	})
	ctx, cancel := context.WithCancel(context.Background())
	e := &smEngine{eng: eng, name: name, dialer: d, cancel: cancel, done: make(chan error, 1), pool: pool,
		stopped: make(chan struct{})}
	go func() { e.done <- eng.Serve(ctx) }()
	reg.add(e)
	return e
}

// stop stops the engine gracefully and waits for it; it may be called
// more than once, and from several goroutines (the test's cleanup stops
// every engine still running).
func (e *smEngine) stop() error {
	e.stopOnce.Do(func() {
		e.cancel()
		err := <-e.done
		e.pool.Close()
		close(e.stopped)
		if !errors.Is(err, context.Canceled) {
			e.stopErr = err
		}
	})
	return e.stopErr
}

// smMachine is the state of one check.
type smMachine struct {
	w       *hosttest.World
	reg     *smEngines
	senders *smSenders
	mgr     *engine.Engine
	scope   notifytype.OwnerScope
	rcs     []*smReceiver
	sinks   []int64
	// budgets of the sinks, as created.
	perHour, burst []int

	mu      sync.Mutex
	engines []*smEngine // nil where the slot's engine crashed
	zombies []*smEngine // crashed engines, stopping in the background

	serial  int
	emitted map[int64]int // sink: events emitted
	// allowance counts, per row, the times its claim was lost while it may
	// have been mid-send: its holder crashed, or the fake clock passed the
	// claim's expiry. Only those may send a row a second time.
	allowance map[int64]int
	expiredOf map[[2]int64]bool // (row, token) already counted
	crashes   int
	lost      atomic.Bool // a claim was lost (an allowance given): read by the receivers
	logFrom   int
}

// live lists the names of the engines that have not crashed.
func (m *smMachine) live() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, e := range m.engines {
		if e != nil {
			out = append(out, e.name)
		}
	}
	return out
}

func (m *smMachine) anyHeld() bool {
	return slices.ContainsFunc(m.rcs, (*smReceiver).held)
}

// TestDeliveryStateMachine runs the machine. Each check draws two or
// three engines and two sinks with random budgets, then a random sequence
// of actions; check runs after each, settleAll at the end. It runs 20
// checks by default (make test); run more with -rapid.checks=N.
func TestDeliveryStateMachine(t *testing.T) {
	// 20 checks (about 30 s under -race) unless -rapid.checks says
	// otherwise: the other properties keep rapid's 100.
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
	if f := flag.Lookup("rapid.checks"); f != nil && !explicit {
		prev := f.Value.String()
		require.NoError(t, f.Value.Set("20"))
		t.Cleanup(func() { _ = f.Value.Set(prev) })
	}
	w := newWorld(t)
	mgr := w.Engine(quietJanitor) // management and emits; it does not deliver
	senders, reg := &smSenders{}, &smEngines{}
	// Whatever way a check ends (rapid's failure included), every engine
	// stops and closes its pool before the database goes (a check's own
	// end released its receivers' held requests and closed them first,
	// so that no send waits for ever).
	t.Cleanup(reg.stopAll)

	rapid.Check(t, func(rt *rapid.T) {
		// Receivers of the check's own: a crashed engine of an earlier
		// check, still stopping, may yet send an attempt it began, and
		// finds its receiver closed rather than this check's sink.
		rcs := []*smReceiver{newSMReceiver(w, senders), newSMReceiver(w, senders)}
		defer func() {
			for _, rc := range rcs {
				rc.release()
				rc.Close()
			}
		}()
		require.NoError(rt, w.Reset())
		_, err := w.Pool.Exec(w.Ctx, `DELETE FROM switchboard.outbox_instances`)
		require.NoError(rt, err)
		m := &smMachine{w: w, reg: reg, senders: senders, mgr: mgr, rcs: rcs, emitted: map[int64]int{}, allowance: map[int64]int{},
			expiredOf: map[[2]int64]bool{}, logFrom: len(w.Logs.String())}
		_, p, scope := w.Human()
		m.scope = scope
		for i, rc := range rcs {
			perHour := rapid.IntRange(engine.BudgetPerHourMinDefault, engine.BudgetPerHourMaxDefault).Draw(rt, fmt.Sprintf("sink%d.perHour", i))
			burst := rapid.IntRange(engine.BudgetBurstMinDefault, 12).Draw(rt, fmt.Sprintf("sink%d.burst", i))
			sink := w.Sink(mgr, p, scope, enginetest.SinkOpts{BaseURL: rc.URL, Secret: "gtfya.machine-token",
				PerHour: perHour, Burst: burst, Events: []notifytype.EventType{host.EventRuleNotify}})
			rc.reset(sink, m.live, func() bool { return m.lost.Load() })
			m.sinks, m.perHour, m.burst = append(m.sinks, sink), append(m.perHour, perHour), append(m.burst, burst)
		}
		for range rapid.IntRange(2, 3).Draw(rt, "engines") {
			m.engines = append(m.engines, startSMEngine(rt, w, reg, senders))
		}
		defer func() {
			for _, rc := range rcs {
				rc.release()
			}
			for _, e := range m.engines {
				if e != nil {
					if err := e.stop(); err != nil {
						rt.Errorf("engine %s stopped with: %v", e.name, err)
					}
				}
			}
		}()

		rt.Repeat(map[string]func(*rapid.T){
			"":        m.check,
			"emit":    m.emit,
			"mode":    m.flipMode,
			"hold":    m.hold,
			"release": m.releaseAction,
			"advance": m.advance,
			"crash":   m.crash,
			"restart": m.restart,
		})
		m.settleAll(rt)
	})
}

func (m *smMachine) emit(rt *rapid.T) {
	i := rapid.IntRange(0, len(m.sinks)-1).Draw(rt, "sink")
	rule := rapid.IntRange(1, 2).Draw(rt, "rule")
	subject := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "subject")
	m.serial++
	ev := engine.Event{Type: host.EventRuleNotify, Owner: m.scope, Subject: host.RuleSubject(int64(rule), subject, 0),
		Content: sinks.Content{Title: fmt.Sprintf("e%d", m.serial), Place: "forge", LinkPath: smLink(m.serial)}}
	require.NoError(rt, pgx.BeginFunc(m.w.Ctx, m.w.Pool, func(tx pgx.Tx) error {
		ok, err := m.mgr.EmitToSink(m.w.Ctx, tx, m.sinks[i], ev)
		if err == nil && !ok {
			err = errors.New("the sink took no row")
		}
		return err
	}))
	m.emitted[m.sinks[i]]++
	m.settleUnlessHeld(rt)
}

func (m *smMachine) flipMode(rt *rapid.T) {
	i := rapid.IntRange(0, len(m.sinks)-1).Draw(rt, "sink")
	m.rcs[i].setMode(rapid.SampledFrom([]smMode{smOK, smFail, smDrop}).Draw(rt, "mode"))
}

func (m *smMachine) hold(rt *rapid.T) {
	m.rcs[rapid.IntRange(0, len(m.sinks)-1).Draw(rt, "sink")].setHold()
}

func (m *smMachine) releaseAction(rt *rapid.T) {
	m.rcs[rapid.IntRange(0, len(m.sinks)-1).Draw(rt, "sink")].release()
	m.settleUnlessHeld(rt)
}

// advance moves the fake clock: within a backoff, past one or several,
// past the claim TTL, past the whole schedule.
func (m *smMachine) advance(rt *rapid.T) {
	d := rapid.SampledFrom([]time.Duration{
		5 * time.Second, 31 * time.Second, engine.ClaimTTLDefault + 5*time.Second, 10 * time.Minute, 35 * time.Minute,
	}).Draw(rt, "by")
	m.advanceBy(rt, d)
	m.settleUnlessHeld(rt)
}

func (m *smMachine) advanceBy(rt *rapid.T, d time.Duration) {
	rt.Helper()
	for d > 0 {
		step := min(d, smMaxStep)
		d -= step
		m.w.Clock.Advance(step)
		m.waitForBeats(rt)
		m.countExpired(rt)
	}
}

// waitForBeats waits until every live engine's heartbeat outlasts the
// next step of the clock.
func (m *smMachine) waitForBeats(rt *rapid.T) {
	rt.Helper()
	live := m.live()
	limit := waitLimit()
	deadline := time.Now().Add(limit)
	for {
		var fresh int
		require.NoError(rt, m.w.Pool.QueryRow(m.w.Ctx, `
			SELECT count(*) FROM switchboard.outbox_instances WHERE name = ANY ($1) AND alive_until > $2`,
			live, m.w.Clock.Now().Add(smMaxStep)).Scan(&fresh))
		if fresh == len(live) {
			return
		}
		if time.Now().After(deadline) {
			rt.Fatalf("live engines %v did not beat within %v (%s)", live, limit, waitEnd)
		}
		m.w.NextAttempt(5 * time.Millisecond)
	}
}

// countExpired gives an allowance to each row whose claim the clock has
// passed: another instance may take it while its holder is still sending.
func (m *smMachine) countExpired(rt *rapid.T) {
	rt.Helper()
	rows, err := m.w.Pool.Query(m.w.Ctx, `
		SELECT id, claim_token FROM switchboard.outbox WHERE state = 'claimed' AND claim_expires_at <= $1`, m.w.Clock.Now())
	require.NoError(rt, err)
	pairs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]int64, error) {
		var p [2]int64
		return p, r.Scan(&p[0], &p[1])
	})
	require.NoError(rt, err)
	for _, p := range pairs {
		if !m.expiredOf[p] {
			m.expiredOf[p] = true
			m.allowance[p[0]]++
			m.lost.Store(true)
		}
	}
}

// crash cuts an engine off the database as a crash would: its
// connections close, nothing it still had under way commits, its
// heartbeat lapses and its claims stay until they expire. It is then
// stopped in the background (it can change nothing any more).
func (m *smMachine) crash(rt *rapid.T) {
	var live []int
	for i, e := range m.engines {
		if e != nil {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		rt.Skip("no engine to crash")
	}
	i := rapid.SampledFrom(live).Draw(rt, "engine")
	e := m.engines[i]
	e.dialer.sever()
	// Wait until the server has ended every session of the engine: a
	// pipeline it had fully sent (its COMMIT included) may still commit
	// until then.
	limit := waitLimit()
	deadline := time.Now().Add(limit)
	for {
		var n int
		require.NoError(rt, m.w.Pool.QueryRow(m.w.Ctx,
			`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, e.name).Scan(&n))
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			rt.Fatalf("the sessions of crashed engine %s did not end", e.name)
		}
		m.w.NextAttempt(5 * time.Millisecond)
	}
	rows, err := m.w.Pool.Query(m.w.Ctx, `SELECT id FROM switchboard.outbox WHERE claimed_by = $1`, e.name)
	require.NoError(rt, err)
	held, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(rt, err)
	for _, id := range held {
		m.allowance[id]++
		m.lost.Store(true)
	}
	m.mu.Lock()
	m.engines[i] = nil
	m.zombies = append(m.zombies, e)
	m.crashes++
	m.mu.Unlock()
	go func() { _ = e.stop() }()
}

func (m *smMachine) restart(rt *rapid.T) {
	var dead []int
	for i, e := range m.engines {
		if e == nil {
			dead = append(dead, i)
		}
	}
	if len(dead) == 0 {
		rt.Skip("no engine to restart")
	}
	i := rapid.SampledFrom(dead).Draw(rt, "engine")
	e := startSMEngine(rt, m.w, m.reg, m.senders)
	m.mu.Lock()
	m.engines[i] = e
	m.mu.Unlock()
	m.waitForBeats(rt)
	m.settleUnlessHeld(rt)
}

func (m *smMachine) settleUnlessHeld(rt *rapid.T) {
	rt.Helper()
	if !m.anyHeld() {
		m.settle(rt)
	}
}

// settle waits until the live engines have nothing to do at the fake
// clock's present: no row claimed by a live engine, none whose claim they
// may take, none due (but those of a sink a crashed engine still holds,
// its heartbeat not yet lapsed: a claim leaves such a sink to it, rows
// taken over included).
func (m *smMachine) settle(rt *rapid.T) {
	rt.Helper()
	live := m.live()
	if len(live) == 0 {
		return
	}
	limit := waitLimit()
	deadline := time.Now().Add(limit)
	for {
		var busy int
		require.NoError(rt, m.w.Pool.QueryRow(m.w.Ctx, `
			WITH dead AS (SELECT name FROM switchboard.outbox_instances WHERE alive_until <= $1),
			blocked AS (
			    SELECT DISTINCT sink_id FROM switchboard.outbox
			    WHERE state = 'claimed' AND claimed_by <> ALL ($2) AND claim_expires_at > $1
			      AND claimed_by NOT IN (SELECT name FROM dead)
			)
			SELECT count(*) FROM switchboard.outbox o
			WHERE (o.state = 'claimed' AND (o.claimed_by = ANY ($2)
			                                OR ((o.claim_expires_at <= $1 OR o.claimed_by IN (SELECT name FROM dead))
			                                    AND o.sink_id NOT IN (SELECT sink_id FROM blocked))))
			   OR (o.state IN ('pending', 'held') AND o.due_at <= $1
			       AND o.sink_id NOT IN (SELECT sink_id FROM blocked))`,
			m.w.Clock.Now(), live).Scan(&busy))
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			var status []engine.SinkStatus
			for _, e := range m.allEngines() {
				status = append(status, e.eng.AllSinkStatuses()...)
			}
			logs := m.w.Logs.String()[m.logFrom:]
			rt.Fatalf("%d rows still due or claimed after %v (%s) at %v; live engines %v; actors %+v:\n%s\nlogs:\n%s", busy, limit, waitEnd,
				m.w.Clock.Now().Sub(enginetest.Start), live, status, m.w.TableJSON("outbox", "payload"), logs[max(0, len(logs)-6000):])
		}
		m.w.NextAttempt(5 * time.Millisecond)
	}
}

// check reads the invariants from the database and the receivers.
func (m *smMachine) check(rt *rapid.T) {
	w := m.w
	var (
		overCap, openTwice, records7 int
	)
	require.NoError(rt, w.Pool.QueryRow(w.Ctx, `
		SELECT
		  (SELECT count(*) FROM switchboard.outbox WHERE attempts > $1),
		  (SELECT count(*) FROM (SELECT 1 FROM switchboard.outbox WHERE state IN ('pending', 'held') AND dedup_key IS NOT NULL
		                         GROUP BY sink_id, dedup_key HAVING count(*) > 1) x),
		  (SELECT count(*) FROM switchboard.delivery_records WHERE attempt > $1)`,
		engine.MaxAttempts).Scan(&overCap, &openTwice, &records7))
	require.Zero(rt, overCap, "rows past %d attempts", engine.MaxAttempts)
	require.Zero(rt, records7, "delivery records of an attempt past %d", engine.MaxAttempts)
	require.Zero(rt, openTwice, "two open rows share a dedup key")

	for i, sink := range m.sinks {
		// Every event emitted is in a row's count: its own row, or the
		// row that took it in as a repeat.
		var events int
		require.NoError(rt, w.Pool.QueryRow(w.Ctx, `SELECT coalesce(sum(count), 0) FROM switchboard.outbox WHERE sink_id = $1`,
			sink).Scan(&events))
		require.Equal(rt, m.emitted[sink], events, "events of sink %d against those emitted", sink)
		m.checkBudget(rt, sink, m.perHour[i], m.burst[i])

		receipts, faults := m.rcs[i].snapshot()
		if len(faults) > 0 {
			// Logged as well: rapid shows a flaky failure's log, not its message.
			rt.Logf("sink %d: %s", sink, strings.Join(faults, "; "))
			rt.Fatalf("sink %d: %s", sink, strings.Join(faults, "; "))
		}
		// Sends of each row: in a message of its own, or in a coalesced
		// one (the rows its record linked as it arrived). Together they
		// never pass the cap, whatever the path that started them.
		sent, delivered := map[int64]int{}, map[int64]int{}
		for _, r := range receipts {
			rows := r.rows
			if r.row != 0 {
				rows = []int64{r.row}
			}
			for _, row := range rows {
				// A coalesced message may arrive after its rows were taken
				// over only if their claim was lost while it was being sent.
				require.True(rt, !r.late || m.allowance[row] > 0,
					"row %d of sink %d: a coalesced message arrived after its record was closed as abandoned, yet no claim of the row was lost", row, sink)
			}
			for _, row := range rows {
				sent[row]++
				if r.ok {
					delivered[row]++
				}
			}
		}
		for row, n := range sent {
			require.LessOrEqual(rt, n, engine.MaxAttempts, "row %d of sink %d sent %d times, coalesced messages included", row, sink, n)
		}
		for row, n := range delivered {
			// At most once, but for a claim lost mid-send (a crash, or a
			// claim the clock outran).
			require.LessOrEqual(rt, n, 1+m.allowance[row],
				"row %d of sink %d delivered %d times (claims lost %d, crashes %d)", row, sink, n, m.allowance[row], m.crashes)
		}
	}
	for _, e := range m.allEngines() {
		require.Zero(rt, e.eng.OutcomesDropped(), "outcomes dropped by %s", e.name)
	}
}

func (m *smMachine) allEngines() []*smEngine {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.zombies)
	for _, e := range m.engines {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// checkBudget checks Invariant 4 (D8) from the sink's counted delivery
// records: for every pair of sends i ≤ j, the sends in [t_i, t_j] number
// at most burst + perHour × (t_j − t_i) / 1h.
func (m *smMachine) checkBudget(rt *rapid.T, sink int64, perHour, burst int) {
	rt.Helper()
	rows, err := m.w.Pool.Query(m.w.Ctx, `
		SELECT sent_at FROM switchboard.delivery_records WHERE sink_id = $1 AND counts_budget ORDER BY sent_at`, sink)
	require.NoError(rt, err)
	sent, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	require.NoError(rt, err)
	for i := range sent {
		if i > 0 && sent[i].Equal(sent[i-1]) {
			continue
		}
		for j := i; j < len(sent); j++ {
			last := j
			for last+1 < len(sent) && sent[last+1].Equal(sent[j]) {
				last++
			}
			n := int64(last - i + 1)
			d := sent[j].Sub(sent[i])
			if n*int64(time.Hour) > int64(burst)*int64(time.Hour)+int64(perHour)*int64(d) {
				rt.Fatalf("sink %d: %d sends in %v exceed its bucket (%d/h, burst %d): sends at %v",
					sink, n, d, perHour, burst, offsets(sent))
			}
		}
	}
}

// settleAll ends a check: every receiver answers and holds nothing, one
// engine at least is live, and the clock runs until no row is open; then
// every event is accounted for.
func (m *smMachine) settleAll(rt *rapid.T) {
	for _, rc := range m.rcs {
		rc.setMode(smOK)
		rc.release()
	}
	if len(m.live()) == 0 {
		e := startSMEngine(rt, m.w, m.reg, m.senders)
		m.mu.Lock()
		m.engines[0] = e
		m.mu.Unlock()
		m.waitForBeats(rt)
	}
	for range 12 { // 12 × 35 minutes: past every schedule, claim and budget
		m.settle(rt)
		if openRows(rt, m.w) == 0 {
			break
		}
		m.advanceBy(rt, 35*time.Minute)
	}
	m.settle(rt)
	m.check(rt)
	require.Zero(rt, openRows(rt, m.w), "rows still open at the end:\n%s", m.w.TableJSON("outbox", "payload"))

	for i, sink := range m.sinks {
		// Every row ended, each event in one: delivered with its row (in
		// a message of its own or a coalesced one), or undeliverable.
		var (
			deliveredEvents, otherEvents int
			alone, gone                  []int64
		)
		require.NoError(rt, m.w.Pool.QueryRow(m.w.Ctx, `
			SELECT coalesce(sum(delivered_count) FILTER (WHERE state = 'delivered'), 0),
			       coalesce(sum(count) FILTER (WHERE state <> 'delivered'), 0),
			       ARRAY(SELECT DISTINCT d.outbox_id FROM switchboard.delivery_records d
			             WHERE d.sink_id = $1 AND d.status = 'delivered' AND d.outbox_id IS NOT NULL),
			       ARRAY(SELECT DISTINCT d.outbox_id FROM switchboard.delivery_records d
			             WHERE d.sink_id = $1 AND d.status = 'delivered' AND d.outbox_id IS NOT NULL
			               AND NOT EXISTS (SELECT 1 FROM switchboard.outbox g WHERE g.id = d.outbox_id))
			FROM switchboard.outbox WHERE sink_id = $1`, sink).Scan(&deliveredEvents, &otherEvents, &alone, &gone))
		require.Equal(rt, m.emitted[sink], deliveredEvents+otherEvents, "events of sink %d", sink)
		receipts, _ := m.rcs[i].snapshot()
		got, okRows, lateOK := 0, map[int64]bool{}, 0
		for _, r := range receipts {
			if r.ok {
				got += r.events
				okRows[r.row] = true
				if r.row == 0 && r.rows == nil && r.serial != 0 {
					lateOK++ // a late message of a claim lost: its row was gone when it arrived (checkOrder)
				}
			}
		}
		require.GreaterOrEqual(rt, got, deliveredEvents, "sink %d received fewer events than its rows delivered", sink)
		// A row gone since (a repeat's row took it in while a lost claim's
		// message was still under way: absorbRepeats) has no row for its
		// message to be told by when it arrived late; such messages are
		// counted instead, one at least for each.
		unmatched := 0
		for _, row := range alone {
			switch {
			case okRows[row]:
			case slices.Contains(gone, row):
				unmatched++
			default:
				require.Fail(rt, "a delivered record without its message", "row %d of sink %d is recorded delivered, but the sink never took it", row, sink)
			}
		}
		require.LessOrEqual(rt, unmatched, lateOK,
			"sink %d: %d rows gone since are recorded delivered, but only %d messages arrived late and were taken", sink, unmatched, lateOK)
	}
	// A recorder's outcome may meet outbox_open_key once and is written
	// again on its own (store.absorbRepeats); a reservation, or an outcome
	// given up, never.
	for _, line := range strings.Split(m.w.Logs.String()[m.logFrom:], "\n") {
		if strings.Contains(line, "SQLSTATE 23505") && !strings.Contains(line, "error recording delivery outcomes; trying again") {
			rt.Fatalf("a statement failed on a unique key: %s", line)
		}
	}
}
