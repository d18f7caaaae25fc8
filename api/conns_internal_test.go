package api

import (
	"net"
	"net/http"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/httpx"
)

// fakeListener hands out one end of a pipe per address queued, with that
// remote address.
type fakeListener struct {
	addrs chan net.Addr
}

type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

func (l *fakeListener) Accept() (net.Conn, error) {
	a, ok := <-l.addrs
	if !ok {
		return nil, net.ErrClosed
	}
	server, client := net.Pipe()
	_ = client.Close()
	return addrConn{Conn: server, remote: a}, nil
}
func (l *fakeListener) Close() error   { return nil }
func (l *fakeListener) Addr() net.Addr { return &net.TCPAddr{} }

// The connection share counts an IPv6 client per /64 (issue 24 item 6),
// and a trusted proxy, which carries many clients, is not held to it.
func TestConnectionShareCountsIPv6PerSlash64AndSparesTrustedProxies(t *testing.T) {
	t.Parallel()
	c := ServerConfig{MaxConns: 16, MaxConnsPerClient: 2,
		TrustedProxies: httpx.Proxies{netip.MustParsePrefix("10.0.0.0/8")}}.WithDefaults()
	g := newConnGuard(c)
	fl := &fakeListener{addrs: make(chan net.Addr, 16)}
	ln := &guardedListener{Listener: fl, g: g}
	tcp := func(s string) net.Addr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }

	for _, a := range []string{"[2001:db8:0:1::1]:1", "[2001:db8:0:1::2]:1", "[2001:db8:0:1:ffff::3]:1", "[2001:db8:0:2::1]:1"} {
		fl.addrs <- tcp(a)
	}
	first, err := ln.Accept()
	require.NoError(t, err)
	second, err := ln.Accept()
	require.NoError(t, err)
	third, err := ln.Accept() // the third of 2001:db8:0:1::/64 is closed; the next one comes
	require.NoError(t, err)
	require.Equal(t, "[2001:db8:0:2::1]:1", third.RemoteAddr().String(), "another /64 is another client")
	require.EqualValues(t, 1, g.refused.Load(), "a third address of one /64 is past its share")
	for _, c := range []net.Conn{first, second, third} {
		_ = c.Close()
	}

	for range 5 {
		fl.addrs <- tcp("10.0.0.1:1")
	}
	for range 5 {
		_, err := ln.Accept()
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, g.refused.Load(), "a trusted proxy is not held to one client's share")
}

// shedGuard is a connGuard of cap 8 (a share of 8, 10.0.0.0/8 a trusted
// proxy) and a listener over fake connections from the addresses given,
// each accepted at once, accepted ago before base (the first the oldest).
func shedGuard(t *testing.T, base time.Time, conns ...string) (*connGuard, *guardedListener, *fakeListener, []*guardedConn) {
	t.Helper()
	c := ServerConfig{MaxConns: 8, MaxConnsPerClient: 8, PressureIdleTimeout: time.Second,
		TrustedProxies: httpx.Proxies{netip.MustParsePrefix("10.0.0.0/8")}}.WithDefaults()
	g := newConnGuard(c)
	fl := &fakeListener{addrs: make(chan net.Addr, 16)}
	ln := &guardedListener{Listener: fl, g: g}
	t.Cleanup(func() { _ = ln.Close() })
	var out []*guardedConn
	for i, a := range conns {
		fl.addrs <- net.TCPAddrFromAddrPort(netip.MustParseAddrPort(a))
		conn, err := ln.Accept()
		require.NoError(t, err)
		gc := conn.(*guardedConn)
		gc.accepted = base.Add(-time.Duration(len(conns)-i) * time.Second) // read by shed under g.mu, set before it runs
		out = append(out, gc)
	}
	return g, ln, fl, out
}

// gone reports whether c was closed.
func gone(g *connGuard, c *guardedConn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return c.gone
}

// While every slot is held, a newcomer sheds a connection only if it
// presented no credential and waits on its client (silent or in its
// headers, or reading its body), and the heaviest client's oldest first;
// a trusted proxy's connections count as one client each (issue 24 item
// 5).
func TestShedTakesTheHeaviestClientsOldestConnectionWaitingOnItsClient(t *testing.T) {
	t.Parallel()
	base := time.Now()
	g, _, _, cs := shedGuard(t, base,
		"10.0.0.1:1", "10.0.0.1:2", "10.0.0.1:3", // a proxy: three clients, the oldest three
		"192.0.2.1:1", "192.0.2.1:2", "192.0.2.1:3", // one client holding three
		"192.0.2.2:1", "192.0.2.2:2") // one client holding two
	proxied, heavy, light := cs[0:3], cs[3:6], cs[6:8]
	heavy[0].authed.Store(true)                          // presented a credential
	heavy[1].state.Store(int32(http.StateActive))        // its handler at work, no body
	heavy[2].state.Store(int32(http.StateActive))        // reading its body…
	heavy[2].body.Store(&rateBody{conn: heavy[2], g: g}) // …but between reads: the handler at work
	light[0].state.Store(int32(http.StateIdle))          // kept alive between requests
	light[1].state.Store(int32(http.StateActive))
	reading := &rateBody{conn: light[1], g: g, reading: base} // waiting for its body
	reading.inRead.Store(true)
	light[1].body.Store(reading)

	// 192.0.2.1 holds the most, but none of its three may be shed; of
	// 192.0.2.2's two only the one reading its body may.
	require.Zero(t, g.shed(base))
	require.True(t, gone(g, light[1]), "the heaviest client's connection waiting on its body is shed")
	for _, c := range append(slices.Clone(heavy), light[0]) {
		require.False(t, gone(g, c), "a connection with a credential, at work or kept alive is not shed")
	}
	// Left: proxied connections (one client each), the oldest first; a
	// second apart, past shed's budget (TestShedSparesYoungConnections…).
	now := base
	for _, c := range proxied {
		now = now.Add(time.Second)
		require.Zero(t, g.shed(now))
		require.True(t, gone(g, c))
	}
	require.Equal(t, g.shedAge(), g.shed(now.Add(time.Second)), "none left to shed: try again in a while, as states change")
	require.EqualValues(t, 4, g.shedN.Load())
}

// A connection younger than shedAge is not shed: shed tells how long
// until it may be. And shedding is budgeted, MaxConns per
// PressureIdleTimeout with a burst of a quarter of MaxConns, so
// reconnecting attackers cannot cycle the slots faster than that.
func TestShedSparesYoungConnectionsAndKeepsToItsBudget(t *testing.T) {
	t.Parallel()
	base := time.Now()
	addrs := []string{"192.0.2.1:1", "192.0.2.2:1", "192.0.2.3:1", "192.0.2.4:1", "192.0.2.5:1", "192.0.2.6:1", "192.0.2.7:1", "192.0.2.8:1"}
	g, _, _, cs := shedGuard(t, base, addrs...)
	young := base.Add(-g.shedAge() + 100*time.Millisecond)
	g.mu.Lock()
	for _, c := range cs {
		c.accepted = young
	}
	g.mu.Unlock()
	require.Equal(t, 100*time.Millisecond, g.shed(base), "the oldest may be shed in 100 ms")
	require.Zero(t, g.shedN.Load())

	later := base.Add(100 * time.Millisecond)
	require.Zero(t, g.shed(later))
	require.Zero(t, g.shed(later), "a burst of a quarter of MaxConns (2)")
	require.Equal(t, time.Second/8, g.shed(later), "then one every PressureIdleTimeout/MaxConns (125 ms)")
	require.EqualValues(t, 2, g.shedN.Load())
	require.Zero(t, g.shed(later.Add(time.Second/8)))
	require.EqualValues(t, 3, g.shedN.Load())
}

// Accept, while every slot is held, closes a connection past its
// client's share at once (it sheds no one for it, and does not wait for a
// slot), and lets another client in by shedding.
func TestAcceptWithEverySlotHeldRefusesPastTheShareAndShedsForAnother(t *testing.T) {
	t.Parallel()
	base := time.Now()
	g, ln, fl, cs := shedGuard(t, base, "192.0.2.1:1", "192.0.2.1:2", "192.0.2.1:3", "192.0.2.1:4",
		"192.0.2.2:1", "192.0.2.2:2", "192.0.2.2:3", "192.0.2.2:4")
	g.cfg.MaxConnsPerClient = 4 // both at their share; set before any Accept runs concurrently
	fl.addrs <- net.TCPAddrFromAddrPort(netip.MustParseAddrPort("192.0.2.1:5"))
	fl.addrs <- net.TCPAddrFromAddrPort(netip.MustParseAddrPort("192.0.2.3:1"))
	conn, err := ln.Accept()
	require.NoError(t, err)
	require.Equal(t, "192.0.2.3:1", conn.RemoteAddr().String())
	require.EqualValues(t, 1, g.refused.Load(), "192.0.2.1's fifth is past its share")
	require.EqualValues(t, 1, g.shedN.Load())
	require.True(t, gone(g, cs[0]), "a tie: the oldest is shed")
}

// The heaviest client's oldest connection, too young yet, is waited for:
// a lighter client's older one is not shed in its place.
func TestShedWaitsForTheHeaviestClientsConnectionRatherThanShedALighterOne(t *testing.T) {
	t.Parallel()
	base := time.Now()
	g, _, _, cs := shedGuard(t, base, "192.0.2.1:1", "192.0.2.2:1", "192.0.2.2:2")
	young := base.Add(-g.shedAge() + 50*time.Millisecond)
	g.mu.Lock()
	cs[1].accepted, cs[2].accepted = young, young.Add(time.Millisecond)
	g.mu.Unlock()
	require.Equal(t, 50*time.Millisecond, g.shed(base))
	require.False(t, gone(g, cs[0]), "the lighter client's older connection stays")
	require.Zero(t, g.shed(base.Add(50*time.Millisecond)))
	require.True(t, gone(g, cs[1]), "the heavier client's oldest goes once old enough")
	require.False(t, gone(g, cs[0]))
}
