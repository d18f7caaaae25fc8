package api

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard/notify/api/httpx"
)

// connGuard bounds a server's connections (issue 18 item 10): at most
// MaxConns at once (past it, a connection accepted waits for a slot, or
// sheds one, below); at most MaxConnsPerClient from one client IP (a
// connection past it is closed as soon as it is accepted, even while
// every slot is held, so one client cannot take the whole cap and lock
// everyone else out); and while PressureConns or more are open, a
// connection idle (kept alive between requests, or accepted and still
// silent) for PressureIdleTimeout is closed, instead of waiting out the
// IdleTimeout.
//
// Issue 24 item 5 adds the reserve: the last ReservedConns of MaxConns are
// kept for clients that present a valid credential. The accept happens
// before any credential is seen, so every connection is accepted while a
// slot is free, and once more than MaxConns-ReservedConns are open, the
// connections that have not presented a valid credential on any request
// (httpx.Authenticated) and are older than PressureIdleTimeout are closed,
// oldest first, until the reserve is free again: unauthenticated
// connections give way first, so a client with a token or a session is
// accepted within a reaping period even while others hold every slot.
// And a connection accepted while every slot is held does not wait for
// the reaper: it takes the slot of an unauthenticated connection still
// waiting on its client, in its headers or its body (shed), within a
// budget, so another client is let in at once even as slow clients take
// every slot together.
//
// Connections from a trusted proxy (TrustedProxies) carry many clients:
// they are not held to MaxConnsPerClient. An IPv6 client is its /64.
type connGuard struct {
	cfg    ServerConfig
	slots  chan struct{}
	closed chan struct{}
	once   sync.Once

	mu        sync.Mutex
	perClient map[string]int
	idle      map[net.Conn]time.Time // idle (or new) connections, since when
	all       map[*guardedConn]struct{}
	// byClient holds each client's connections in the order accepted
	// (oldest first), for shed; a trusted proxy's under its key too.
	byClient map[string]*list.List
	open     int
	// shedTokens is shed's budget, as of shedAt (zero: full).
	shedTokens float64
	shedAt     time.Time

	// openNow mirrors open for the body reader, which must not take mu.
	openNow atomic.Int64

	// refused and reaped count the connections closed for the per-client
	// share and under pressure; evicted those closed to free the reserve;
	// slowBodies the requests cut for a body slower than BodyMinRate.
	refused    atomic.Int64
	reaped     atomic.Int64
	evicted    atomic.Int64
	slowBodies atomic.Int64
	// shedN counts the connections closed at accept to make room (shed).
	shedN atomic.Int64
}

func newConnGuard(c ServerConfig) *connGuard {
	return &connGuard{
		cfg: c, slots: make(chan struct{}, c.MaxConns), closed: make(chan struct{}),
		perClient: map[string]int{}, idle: map[net.Conn]time.Time{}, all: map[*guardedConn]struct{}{},
		byClient: map[string]*list.List{},
	}
}

// guardedListener is ln under a connGuard.
type guardedListener struct {
	net.Listener
	g *connGuard
}

func (l *guardedListener) Accept() (net.Conn, error) {
	g := l.g
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip, proxy := g.client(c.RemoteAddr())
		// The share first, before any wait for a slot: a connection past
		// it is closed at once, even while every slot is held, so it
		// neither sheds another client's connection for one it may not
		// hold nor stalls the accepts behind it. Only closes lower the
		// count between this check and the slot (one Accept at a time).
		g.mu.Lock()
		over := !proxy && g.perClient[ip] >= g.cfg.MaxConnsPerClient
		g.mu.Unlock()
		if over {
			_ = c.Close()
			g.refused.Add(1)
			continue
		}
		if !g.takeSlot() {
			_ = c.Close()
			return nil, net.ErrClosed
		}
		g.mu.Lock()
		g.perClient[ip]++
		g.open++
		g.openNow.Store(int64(g.open))
		now := time.Now()
		gc := &guardedConn{Conn: c, g: g, ip: ip, proxy: proxy, accepted: now}
		gc.state.Store(int32(http.StateNew))
		g.idle[gc] = now
		g.all[gc] = struct{}{}
		l := g.byClient[ip]
		if l == nil {
			l = list.New()
			g.byClient[ip] = l
		}
		gc.elem = l.PushBack(gc)
		g.mu.Unlock()
		return gc, nil
	}
}

// takeSlot takes a slot for a connection just accepted. When every slot
// is held it does not leave the newcomer waiting behind them: it closes a
// connection it may (shed) and takes its slot; only when none may be shed
// yet does it wait, for a slot or until one may be. Issue 24 item 5: 9 ×
// 125 slow bodies took every slot at once, and another client waited in
// the backlog until the first of them was cut for its rate, a second
// later. It reports false when the listener closed meanwhile.
func (g *connGuard) takeSlot() bool {
	for {
		select {
		case g.slots <- struct{}{}:
			return true
		default:
		}
		wait := g.shed(time.Now())
		if wait <= 0 {
			continue // one was closed: its slot is free
		}
		t := time.NewTimer(wait)
		select {
		case g.slots <- struct{}{}:
			t.Stop()
			return true
		case <-g.closed:
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// shed closes one connection to make room for a newcomer while every slot
// is held, as a proxy sheds slow clients under load. It may close one
// that has presented no valid credential (the reserve's rule: a
// credentialed connection is never shed) and is waiting on its client:
// accepted and still silent or in its headers (StateNew), or in the middle
// of reading its request body. A connection whose handler is at work, or
// kept alive between requests (the reaper closes those under pressure),
// is not shed. Among those, the oldest of the client holding the most
// connections goes first, so a client inside its share is not pushed out
// by another's reconnections while that one holds more; a trusted proxy's
// connections (each another client) count as one each. That one goes once
// it is shedAge old (each gets a moment to send its request); until then
// the newcomer waits, and no lighter client's connection goes in its
// place.
//
// Shedding is budgeted: at most MaxConns per PressureIdleTimeout, the rate
// at which the pressure grace already cuts slow bodies, with a burst of a
// quarter of MaxConns. A newcomer arriving as attackers fill every slot
// at once is let in at once, but reconnecting attackers, each shedding
// another, cannot make the server cycle connections faster than the
// pressure rules already do (without the budget, 9 × 125 slow bodies
// cycled 3,500 connections a second, and the run took three times the
// CPU).
//
// It reports 0 when it closed one, or else how long until one may be
// shed (at most shedAge, as states change).
func (g *connGuard) shed(now time.Time) time.Duration {
	age := g.shedAge()
	g.mu.Lock()
	rate := float64(g.cfg.MaxConns) / g.cfg.PressureIdleTimeout.Seconds()
	burst := float64(max(1, g.cfg.MaxConns/4))
	if g.shedAt.IsZero() {
		g.shedTokens = burst
	} else {
		g.shedTokens = min(burst, g.shedTokens+max(now.Sub(g.shedAt), 0).Seconds()*rate)
	}
	g.shedAt = now
	if g.shedTokens < 1 {
		g.mu.Unlock()
		return max(time.Duration((1-g.shedTokens)/rate*float64(time.Second)), time.Millisecond)
	}
	// Each client's oldest connection that may be shed; of those, the
	// heaviest client's (a proxy's: each its own client, so all of them
	// in turn, weighing one).
	var pick *guardedConn
	pickHeld := 0
	for ip, l := range g.byClient {
		held := g.perClient[ip]
		for e := l.Front(); e != nil; e = e.Next() {
			c := e.Value.(*guardedConn)
			if c.authed.Load() || !c.waitingOnClient() {
				continue
			}
			if c.proxy {
				held = 1
			}
			if pick == nil || held > pickHeld || held == pickHeld && c.accepted.Before(pick.accepted) {
				pick, pickHeld = c, held
			}
			break
		}
	}
	if pick == nil {
		g.mu.Unlock()
		return age
	}
	// The one to go is too young yet: wait for it rather than shed a
	// lighter client's older connection.
	if d := age - now.Sub(pick.accepted); d > 0 {
		g.mu.Unlock()
		return d
	}
	g.shedTokens--
	g.mu.Unlock()
	// Counted before it closes, as reap does. It may have presented a
	// credential since it was picked, a request's time ago: it is closed
	// all the same, as a connection cut by the network would be.
	g.shedN.Add(1)
	_ = pick.Close()
	return 0
}

// shedAge is how old a connection must be before shed may close it: a
// quarter of PressureIdleTimeout (the reaper's period).
func (g *connGuard) shedAge() time.Duration {
	return max(g.cfg.PressureIdleTimeout/4, time.Millisecond)
}

func (l *guardedListener) Close() error {
	l.g.once.Do(func() { close(l.g.closed) })
	return l.Listener.Close()
}

// guardedConn gives its slot back when closed, once.
type guardedConn struct {
	net.Conn
	g        *connGuard
	ip       string
	proxy    bool // from a trusted proxy
	accepted time.Time
	// state is its last http.ConnState.
	state atomic.Int32
	// elem is its place in g.byClient; guarded by g.mu.
	elem *list.Element
	// authed: a request on it presented a valid credential.
	authed atomic.Bool
	// body is the request body being served, nil for none.
	body atomic.Pointer[rateBody]
	once sync.Once
	gone bool // closed; guarded by g.mu
}

func (c *guardedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		g := c.g
		g.mu.Lock()
		c.gone = true
		g.perClient[c.ip]--
		if g.perClient[c.ip] <= 0 {
			delete(g.perClient, c.ip)
		}
		g.open--
		g.openNow.Store(int64(g.open))
		delete(g.idle, c)
		delete(g.all, c)
		if l := g.byClient[c.ip]; l != nil {
			l.Remove(c.elem)
			if l.Len() == 0 {
				delete(g.byClient, c.ip)
			}
		}
		g.mu.Unlock()
		<-g.slots
	})
	return err
}

// connState is the server's ConnState hook: it tracks which connections
// are idle, and since when.
func (g *connGuard) connState(c net.Conn, s http.ConnState) {
	gc, ok := c.(*guardedConn)
	if !ok {
		return
	}
	gc.state.Store(int32(s))
	g.mu.Lock()
	defer g.mu.Unlock()
	switch s {
	case http.StateNew, http.StateIdle:
		if gc.gone {
			return
		}
		g.idle[gc] = time.Now()
	default:
		delete(g.idle, gc)
	}
}

// reap closes the connections idle for PressureIdleTimeout when at least
// PressureConns are open, then frees the reserve (overReserve), and
// reports how many it closed.
func (g *connGuard) reap(now time.Time) int {
	g.mu.Lock()
	var stale []net.Conn
	closing := map[*guardedConn]bool{}
	if g.open >= g.cfg.PressureConns {
		for c, since := range g.idle {
			if now.Sub(since) >= g.cfg.PressureIdleTimeout {
				stale = append(stale, c)
				delete(g.idle, c)
				if gc, ok := c.(*guardedConn); ok {
					closing[gc] = true
				}
			}
		}
	}
	evict := g.overReserve(now, len(stale), closing)
	var bodies []*rateBody
	if g.open >= g.cfg.PressureConns {
		for c := range g.all {
			if b := c.body.Load(); b != nil && !closing[c] {
				bodies = append(bodies, b)
			}
		}
	}
	g.mu.Unlock()
	grace := g.bodyGrace()
	for _, b := range bodies {
		b.tighten(now, grace)
	}
	// Counted before they close: a client served in a freed slot then
	// reads counters that already include its freeing.
	g.reaped.Add(int64(len(stale)))
	g.evicted.Add(int64(len(evict)))
	for _, c := range stale {
		_ = c.Close()
	}
	for _, c := range evict {
		_ = c.Close()
	}
	return len(stale) + len(evict)
}

// overReserve picks the connections to close so that the reserve is free:
// while more than MaxConns-ReservedConns are open (counting closing ones,
// already picked, as gone), the unauthenticated ones accepted at least
// PressureIdleTimeout ago, oldest first. g.mu is held.
func (g *connGuard) overReserve(now time.Time, closingN int, closing map[*guardedConn]bool) []*guardedConn {
	over := g.open - closingN - (g.cfg.MaxConns - g.cfg.ReservedConns)
	if g.cfg.ReservedConns <= 0 || over <= 0 {
		return nil
	}
	var cands []*guardedConn
	for c := range g.all {
		if !closing[c] && !c.authed.Load() && now.Sub(c.accepted) >= g.cfg.PressureIdleTimeout {
			cands = append(cands, c)
		}
	}
	slices.SortFunc(cands, func(a, b *guardedConn) int { return a.accepted.Compare(b.accepted) })
	return cands[:min(over, len(cands))]
}

// run reaps every quarter of PressureIdleTimeout until the listener
// closes.
func (g *connGuard) run() {
	tick := time.NewTicker(max(g.cfg.PressureIdleTimeout/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-g.closed:
			return
		case now := <-tick.C:
			g.reap(now)
		}
	}
}

// client is the key a connection's share is counted under (its IP, an
// IPv6 /64), and whether it comes from a trusted proxy.
func (g *connGuard) client(a net.Addr) (string, bool) {
	ip := httpx.PeerAddr(a.String())
	if !ip.IsValid() {
		return a.String(), false
	}
	return httpx.ClientKey(ip), g.cfg.TrustedProxies.Trusts(ip)
}

// connContext is the server's ConnContext: requests on a guarded
// connection mark it authenticated through httpx.Authenticated.
func (g *connGuard) connContext(ctx context.Context, c net.Conn) context.Context {
	if gc, ok := c.(*guardedConn); ok {
		ctx = context.WithValue(ctx, guardedConnKey{}, gc)
		return httpx.WithAuthenticatedHook(ctx, func() { gc.authed.Store(true) })
	}
	return ctx
}

// underPressure reports whether PressureConns or more connections are
// open.
func (g *connGuard) underPressure() bool {
	return g.openNow.Load() >= int64(g.cfg.PressureConns)
}

// bodyGrace is how long a body may take before BodyMinRate applies:
// BodyGrace, or PressureIdleTimeout under pressure when it is shorter.
func (g *connGuard) bodyGrace() time.Duration {
	if g.underPressure() {
		return min(g.cfg.BodyGrace, g.cfg.PressureIdleTimeout)
	}
	return g.cfg.BodyGrace
}

// limitBodies bounds the time a request body may take, as the read
// header timeout bounds its headers (issue 24 item 5): a body gets the
// grace (bodyGrace), then must keep arriving at BodyMinRate bytes a second
// on average, counting only the time the server waits on the client (not
// the handler's own work between reads); past that its read fails, the
// request is answered as a body that could not be read, and the
// connection is closed. When the server comes under pressure, the reaper
// shortens the deadline of every body being read to the pressure grace
// (rateBody.tighten). A handler that never reads its body leaves the
// grace as the deadline, so the server's own read of the unread body
// (before it reuses the connection) is bounded too. Nothing is extended
// past the ReadTimeout; once the body is read, the deadline is the
// ReadTimeout again.
func (g *connGuard) limitBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gc, ok := r.Context().Value(guardedConnKey{}).(*guardedConn)
		if !ok || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		now := time.Now()
		b := &rateBody{ReadCloser: r.Body, conn: gc, g: g, hard: now.Add(g.cfg.ReadTimeout)}
		b.set = b.deadline(now, g.bodyGrace())
		_ = gc.SetReadDeadline(b.set)
		gc.body.Store(b)
		defer gc.body.CompareAndSwap(b, nil)
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

type guardedConnKey struct{}

// rateBody is a request body under limitBodies.
type rateBody struct {
	io.ReadCloser
	conn *guardedConn
	g    *connGuard
	hard time.Time // the ReadTimeout

	mu      sync.Mutex
	n       int64         // bytes read
	waited  time.Duration // time spent in Read, finished ones
	reading time.Time     // when the Read in progress began, zero for none
	// inRead mirrors !reading.IsZero() for shed, which must not take mu
	// for every connection it looks at.
	inRead atomic.Bool
	set    time.Time // the read deadline last set
	done   bool      // read to its end or failed
}

// deadline is the latest the next byte may arrive, from now, with grace.
// b.mu is held (or b not yet shared).
func (b *rateBody) deadline(now time.Time, grace time.Duration) time.Time {
	waited := b.waited
	if !b.reading.IsZero() {
		waited += now.Sub(b.reading)
	}
	budget := grace + time.Duration(float64(b.n)/float64(b.g.cfg.BodyMinRate)*float64(time.Second)) - waited
	if d := now.Add(max(budget, 0)); d.Before(b.hard) {
		return d
	}
	return b.hard
}

func (b *rateBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return b.ReadCloser.Read(p)
	}
	start := time.Now()
	b.set = b.deadline(start, b.g.bodyGrace())
	b.reading = start
	b.inRead.Store(true)
	_ = b.conn.SetReadDeadline(b.set)
	b.mu.Unlock()

	n, err := b.ReadCloser.Read(p)

	b.mu.Lock()
	defer b.mu.Unlock()
	b.waited += time.Since(start)
	b.reading = time.Time{}
	b.inRead.Store(false)
	b.n += int64(n)
	if err != nil {
		b.done = true
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && b.set.Before(b.hard) {
			b.g.slowBodies.Add(1)
			return n, fmt.Errorf("request body slower than %d bytes a second: %w", b.g.cfg.BodyMinRate, err)
		}
		_ = b.conn.SetReadDeadline(b.hard)
	}
	return n, err
}

// waitingOnClient reports whether c waits on its client: accepted and
// not yet past its first request's headers, or reading a request body.
func (c *guardedConn) waitingOnClient() bool {
	if http.ConnState(c.state.Load()) == http.StateNew {
		return true
	}
	b := c.body.Load()
	return b != nil && b.inRead.Load()
}

// tighten brings the deadline of a Read in progress to grace, when that
// is sooner than the one it has.
func (b *rateBody) tighten(now time.Time, grace time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done || b.reading.IsZero() {
		return
	}
	if d := b.deadline(now, grace); d.Before(b.set) {
		b.set = d
		_ = b.conn.SetReadDeadline(d)
	}
}
