package api_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api"
)

// safety bounds how long a test waits for the server to do what it must;
// reaching it fails the test (the server never cut the client off).
const safety = 10 * time.Second

// serve runs handler behind api.NewServer and api.LimitListener with c,
// and returns its address.
func serve(t *testing.T, handler http.Handler, c api.ServerConfig) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := api.NewServer(handler, c)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(safety)))
	return conn
}

// requireClosedByServer reads until the server closes the connection: EOF
// or a reset is the server's doing; our own deadline is a failure.
func requireClosedByServer(t *testing.T, r io.Reader) {
	t.Helper()
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %s", safety)
	}
	if err != nil {
		require.ErrorContains(t, err, "reset", "the server ends the connection")
	}
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	_, _ = io.WriteString(w, "ok")
})

func TestIdleKeepAliveConnectionIsClosed(t *testing.T) {
	t.Parallel()
	addr := serve(t, okHandler, api.ServerConfig{IdleTimeout: 200 * time.Millisecond, ReadTimeout: 5 * time.Second})

	conn := dial(t, addr)
	_, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, resp.Close, "the connection is kept alive after the request")
	_, _ = io.Copy(io.Discard, resp.Body)

	// Idle now: the server must close it.
	requireClosedByServer(t, br)

	// And a connection that never sends a request at all.
	requireClosedByServer(t, dial(t, addr))
}

func TestSlowBodyClientIsCutOff(t *testing.T) {
	t.Parallel()
	addr := serve(t, okHandler, api.ServerConfig{ReadTimeout: 300 * time.Millisecond})

	conn := dial(t, addr)
	// A body promised at 100 bytes, sent one byte and then nothing more.
	_, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nx")
	require.NoError(t, err)
	requireClosedByServer(t, conn)

	// Slow headers are cut off too.
	slow := dial(t, addr)
	_, err = io.WriteString(slow, "GET / HTTP/1.1\r\nHo")
	require.NoError(t, err)
	requireClosedByServer(t, slow)
}

// TestStreamingRouteOutlivesTheWriteTimeout streams on two routes with the
// same handler: the plain route is cut by the write timeout, the streaming
// route (MCP's) keeps going past it, its context alive, and ends itself.
func TestStreamingRouteOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	plainCut := make(chan struct{})
	ticker := func(w http.ResponseWriter, r *http.Request, until <-chan struct{}) error {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		rc := http.NewResponseController(w)
		for {
			if _, err := io.WriteString(w, "tick\n"); err != nil {
				return err
			}
			if err := rc.Flush(); err != nil {
				return err
			}
			select {
			case <-until:
				return nil
			case <-tick.C:
			}
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/plain", func(w http.ResponseWriter, r *http.Request) {
		if err := ticker(w, r, nil); err != nil {
			close(plainCut)
		}
	})
	mux.Handle("/mcp", api.StreamingRoute(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		require.Equal(t, "hello", string(body))
		if err := ticker(w, r, plainCut); err != nil {
			return
		}
		if r.Context().Err() != nil {
			_, _ = io.WriteString(w, "cancelled\n")
			return
		}
		_, _ = io.WriteString(w, "done\n")
	})))
	addr := serve(t, mux, api.ServerConfig{ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})

	plain := dial(t, addr)
	_, err := io.WriteString(plain, "GET /plain HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	stream := dial(t, addr)
	_, err = io.WriteString(stream, "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
	require.NoError(t, err)

	requireClosedByServer(t, plain)
	resp, err := http.ReadResponse(bufio.NewReader(stream), nil)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(string(got), "done\n"), "the stream ran past the write and read timeouts: %q", got[max(0, len(got)-40):])
}

func TestConnectionsAreBounded(t *testing.T) {
	t.Parallel()
	// A share of 2: the second connection is within it (a connection past
	// its client's share is closed at accept, even while the cap is full).
	addr := serve(t, okHandler, api.ServerConfig{MaxConns: 1, MaxConnsPerClient: 2, IdleTimeout: time.Minute})

	first := dial(t, addr)
	_, err := io.WriteString(first, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(first), nil)
	require.NoError(t, err)
	_ = resp.Body.Close()

	second := dial(t, addr)
	_, err = io.WriteString(second, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	require.NoError(t, err)
	// While the first connection is open the second is not served.
	require.NoError(t, second.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
	_, err = second.Read(make([]byte, 1))
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "the second connection was served: %v", err)

	require.NoError(t, first.Close())
	require.NoError(t, second.SetReadDeadline(time.Now().Add(safety)))
	resp, err = http.ReadResponse(bufio.NewReader(second), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestServerConfigDefaults(t *testing.T) {
	t.Parallel()
	srv := api.NewServer(okHandler, api.ServerConfig{})
	require.Equal(t, api.ReadTimeoutDefault, srv.ReadTimeout)
	require.Equal(t, api.WriteTimeoutDefault, srv.WriteTimeout)
	require.Equal(t, api.IdleTimeoutDefault, srv.IdleTimeout)
	require.Equal(t, api.ReadHeaderTimeoutMax, srv.ReadHeaderTimeout)
}
