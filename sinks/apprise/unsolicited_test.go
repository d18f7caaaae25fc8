package apprise_test

import (
	"bufio"
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/apprise"
	"github.com/switchboard/notify/sinks/sinktest"
)

// The Apprise API's 204 carries a JSON body. This body is what it wrote in
// the "Observed from the real servers" notes' shape.
const body204 = `{"error": "There was no configuration found.", "details": []}`

// rawApprise is a TCP server speaking just enough HTTP/1.1: its first
// answer is a 204 with a body (as the Apprise API sends), every later one
// a 200. It keeps a connection alive unless the request asks to close it,
// and counts connections and requests.
type rawApprise struct {
	l        net.Listener
	conns    atomic.Int32
	requests atomic.Int32
	wg       sync.WaitGroup
}

func newRawApprise(t *testing.T) *rawApprise {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &rawApprise{l: l}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		_ = l.Close()
		s.wg.Wait()
	})
	return s
}

func (s *rawApprise) URL() string { return "http://" + s.l.Addr().String() }

func (s *rawApprise) accept() {
	defer s.wg.Done()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		conns = append(conns, c)
		s.conns.Add(1)
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *rawApprise) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() { _ = c.Close() }()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		var answer string
		if s.requests.Add(1) == 1 {
			answer = "HTTP/1.1 204 No Content\r\nContent-Type: application/json\r\n\r\n" + body204
		} else {
			answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
		}
		if _, err := io.WriteString(c, answer); err != nil || req.Close {
			return
		}
	}
}

// stdLog captures the standard logger's output and signals each write.
type stdLog struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func (l *stdLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return l.buf.Write(p)
}

func (l *stdLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// captureStdLog sends the standard logger to a buffer for the rest of the
// test. The standard logger is process-wide, which is why the tests using
// this do not call t.Parallel: Go runs every parallel test only after the
// sequential ones are done, so nothing else logs meanwhile.
func captureStdLog(t *testing.T) *stdLog {
	l := &stdLog{wrote: make(chan struct{}, 1)}
	prevOut, prevFlags := log.Writer(), log.Flags()
	log.SetOutput(l)
	t.Cleanup(func() {
		log.SetOutput(prevOut)
		log.SetFlags(prevFlags)
	})
	return l
}

// The control: with a kept-alive connection, Go's transport does log the
// Apprise 204's body as an unsolicited response. This proves the harness
// below sees the noise when it happens.
func TestUnsolicited204BodyIsLoggedOnAKeptAliveConnection(t *testing.T) { //nolint:paralleltest // swaps the standard logger
	logged := captureStdLog(t)
	srv := newRawApprise(t)
	client := sinktest.Client(t, sinktest.Guard())

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/notify/ops", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	sinks.Drain(resp.Body)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	select {
	case <-logged.wrote:
	case <-time.After(10 * time.Second): // a bound, not a synchronisation
		t.Fatal("the transport never logged the unsolicited body; the test below proves nothing")
	}
	require.Contains(t, logged.String(), "Unsolicited response received on idle HTTP channel")
	require.Contains(t, logged.String(), "no configuration found")
}

// The adapter's answer: a 204 with a body is recorded as a configuration
// error, the next delivery through the same client still works, and
// nothing reaches the standard logger.
func TestApprise204WithBodyLeavesNoNoise(t *testing.T) { //nolint:paralleltest // swaps the standard logger
	logged := captureStdLog(t)
	srv := newRawApprise(t)
	client := sinktest.Client(t, sinktest.Guard())
	a := apprise.New(apprise.Config{BaseURL: srv.URL(), Options: apprise.Options{ConfigKey: "ops"}}, client)

	r := a.Deliver(t.Context(), sinks.RenderTest())
	require.Equal(t, notifytype.ClassConfig, r.Class)
	require.Equal(t, http.StatusNoContent, r.Status)
	require.NotContains(t, r.Err.Error(), "no configuration found", "the body is not repeated")

	r = a.Deliver(t.Context(), sinks.RenderTest())
	require.True(t, r.OK(), "%v", r.Err)
	require.Equal(t, int32(2), srv.requests.Load())
	require.Equal(t, int32(2), srv.conns.Load(), "each request had its own connection")

	client.CloseIdleConnections()
	require.Empty(t, logged.String(), "the standard logger was written to")
}
