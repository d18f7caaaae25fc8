package api

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// connGuard bounds a server's connections (issue 18 item 10): at most
// MaxConns at once (past it, Accept waits, as netutil.LimitListener does);
// at most MaxConnsPerClient from one client IP (a connection past it is
// closed as soon as it is accepted, so one client cannot take the whole
// cap and lock everyone else out); and while PressureConns or more are
// open, a connection idle (kept alive between requests, or accepted and
// still silent) for PressureIdleTimeout is closed, instead of waiting out
// the IdleTimeout.
type connGuard struct {
	cfg    ServerConfig
	slots  chan struct{}
	closed chan struct{}
	once   sync.Once

	mu        sync.Mutex
	perClient map[string]int
	idle      map[net.Conn]time.Time // idle (or new) connections, since when
	open      int

	// refused and reaped count the connections closed for the per-client
	// share and under pressure.
	refused atomic.Int64
	reaped  atomic.Int64
}

func newConnGuard(c ServerConfig) *connGuard {
	return &connGuard{
		cfg: c, slots: make(chan struct{}, c.MaxConns), closed: make(chan struct{}),
		perClient: map[string]int{}, idle: map[net.Conn]time.Time{},
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
		select {
		case g.slots <- struct{}{}:
		case <-g.closed:
			return nil, net.ErrClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			<-g.slots
			return nil, err
		}
		ip := clientIP(c.RemoteAddr())
		g.mu.Lock()
		if g.perClient[ip] >= g.cfg.MaxConnsPerClient {
			g.mu.Unlock()
			_ = c.Close()
			<-g.slots
			g.refused.Add(1)
			continue
		}
		g.perClient[ip]++
		g.open++
		gc := &guardedConn{Conn: c, g: g, ip: ip}
		g.idle[gc] = time.Now()
		g.mu.Unlock()
		return gc, nil
	}
}

func (l *guardedListener) Close() error {
	l.g.once.Do(func() { close(l.g.closed) })
	return l.Listener.Close()
}

// guardedConn gives its slot back when closed, once.
type guardedConn struct {
	net.Conn
	g    *connGuard
	ip   string
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
		delete(g.idle, c)
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
// PressureConns are open, and reports how many it closed.
func (g *connGuard) reap(now time.Time) int {
	g.mu.Lock()
	if g.open < g.cfg.PressureConns {
		g.mu.Unlock()
		return 0
	}
	var stale []net.Conn
	for c, since := range g.idle {
		if now.Sub(since) >= g.cfg.PressureIdleTimeout {
			stale = append(stale, c)
			delete(g.idle, c)
		}
	}
	g.mu.Unlock()
	for _, c := range stale {
		_ = c.Close()
	}
	g.reaped.Add(int64(len(stale)))
	return len(stale)
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

// clientIP is the IP of a connection's remote address.
func clientIP(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
