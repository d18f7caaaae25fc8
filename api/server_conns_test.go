package api_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api"
)

// dialFrom dials addr from a local IP of its own (127.0.0.0/8 is all
// loopback on Linux), so the server sees another client.
func dialFrom(t *testing.T, ip, addr string) (net.Conn, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: safety}
	conn, err := d.Dial("tcp", addr)
	if err == nil {
		t.Cleanup(func() { _ = conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(safety))
	}
	return conn, err
}

// get sends one keep-alive GET on conn and reports whether it was served.
func get(conn net.Conn) (*bufio.Reader, bool) {
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return nil, false
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return br, resp.StatusCode == http.StatusOK
}

// One client holding many idle keep-alive connections does not lock the
// others out (issue 18 item 10): it gets its share of the cap, the rest of
// its connections are closed at accept, and another client is served.
// Scaled down: a cap of 64 and 200 connections instead of 1,000 and 1,000.
func TestOneClientCannotHoldEveryConnection(t *testing.T) {
	t.Parallel()
	c := api.ServerConfig{MaxConns: 64, IdleTimeout: time.Minute, PressureConns: 64}
	addr := serve(t, okHandler, c)
	share := c.WithDefaults().MaxConnsPerClient
	require.Equal(t, 8, share, "an eighth of the cap by default")

	var mu sync.Mutex
	served := 0
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			conn, err := dialFrom(t, "127.0.0.1", addr)
			if err != nil {
				return
			}
			if _, ok := get(conn); ok {
				mu.Lock()
				served++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, share, served, "the client holds its share, idle, and no more")

	other, err := dialFrom(t, "127.0.0.2", addr)
	require.NoError(t, err)
	_, ok := get(other)
	require.True(t, ok, "another client is served while the first holds its connections")

	// The first client gets a connection again only when it gives one back.
	again, err := dialFrom(t, "127.0.0.1", addr)
	require.NoError(t, err)
	_, ok = get(again)
	require.False(t, ok, "past its share, the client's connection is closed")
}

// Under pressure, idle keep-alive connections are closed after the short
// PressureIdleTimeout instead of the IdleTimeout (a minute here); below it
// they are kept.
func TestIdleConnectionsAreReapedUnderPressure(t *testing.T) {
	t.Parallel()
	c := api.ServerConfig{MaxConns: 20, MaxConnsPerClient: 20, PressureConns: 10,
		PressureIdleTimeout: 100 * time.Millisecond, IdleTimeout: time.Minute}
	srv, addr := serveServer(t, okHandler, c)

	// Below pressure: an idle connection outlives several pressure timeouts.
	calm, err := dialFrom(t, "127.0.0.1", addr)
	require.NoError(t, err)
	br, ok := get(calm)
	require.True(t, ok)
	require.NoError(t, calm.SetReadDeadline(time.Now().Add(5*c.PressureIdleTimeout)))
	_, err = br.ReadByte()
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "below pressure the idle connection stays open: %v", err)
	require.NoError(t, calm.SetReadDeadline(time.Now().Add(safety)))
	require.Zero(t, srv.ConnsReaped())

	// Pressure: 12 open. The server closes idle ones until it is below
	// pressure again (fewer than 10 open: at least 3 closed, however the
	// reaper's ticks fall between the dials on a busy machine), the calm
	// one, idle longest, first of all.
	for range 11 {
		conn, err := dialFrom(t, "127.0.0.1", addr)
		require.NoError(t, err)
		_, ok := get(conn)
		require.True(t, ok)
	}
	requireClosedByServer(t, br)
	deadline := time.Now().Add(safety)
	for srv.ConnsReaped() < 3 {
		require.True(t, time.Now().Before(deadline), "the server reaped %d idle connections of 12, not enough to leave pressure", srv.ConnsReaped())
		time.Sleep(10 * time.Millisecond) // polling a counter: the condition is the loop's
	}
	// And the server serves again.
	conn, err := dialFrom(t, "127.0.0.1", addr)
	require.NoError(t, err)
	_, ok = get(conn)
	require.True(t, ok)
}
