package api

import (
	"net"
	"net/netip"
	"testing"

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
