package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/notifytype"
)

// The outcomes of a request's log line.
const (
	outcomeOK              = "ok"               // answered, a tool call included
	outcomeToolError       = "tool_error"       // a tool call refused with a code (code says which)
	outcomeInternal        = "internal"         // a tool call that failed on the server (logged at ERROR)
	outcomeProtocolError   = "protocol_error"   // a JSON-RPC or HTTP-level mistake of the client
	outcomeUnauthenticated = "unauthenticated"  // no valid endpoint credential (401)
	outcomeForbiddenOrigin = "forbidden_origin" // an Origin that may not use /mcp (403)
)

// requestRecord is what one HTTP request to /mcp did, filled in by the
// layers it passes and logged once when it ends (logRequests). Tool calls
// run on the SDK's goroutines, hence the lock.
type requestRecord struct {
	mu         sync.Mutex
	method     string
	tool       string
	endpointID int64
	outcome    string
	code       string
	err        error
}

type recordKey struct{}

// recordOf is the request's record; nil (whose methods do nothing) outside
// logRequests.
func recordOf(ctx context.Context) *requestRecord {
	rec, _ := ctx.Value(recordKey{}).(*requestRecord)
	return rec
}

func (r *requestRecord) set(outcome, code string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcome, r.code = outcome, code
}

func (r *requestRecord) setEndpoint(id int64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endpointID = id
}

// setCall notes the JSON-RPC method and tool the SDK decoded.
func (r *requestRecord) setCall(method, tool string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.method = method
	if tool != "" {
		r.tool = tool
	}
}

// toolError notes a refused tool call, unless it failed on the server.
func (r *requestRecord) toolError(code notifytype.Code) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.outcome != outcomeInternal {
		r.outcome, r.code = outcomeToolError, string(code)
	}
}

// fail notes a tool call that failed on the server, with its error for the
// log line (never for the client).
func (r *requestRecord) fail(err error) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcome, r.err = outcomeInternal, err
}

// finish notes how the SDK answered a method: ok, or a protocol error with
// its JSON-RPC code.
func (r *requestRecord) finish(err error) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.outcome != "" {
		return
	}
	if err == nil {
		r.outcome = outcomeOK
		return
	}
	r.outcome = outcomeProtocolError
	var wire *jsonrpc.Error
	if errors.As(err, &wire) {
		r.code = strconv.FormatInt(wire.Code, 10)
	}
}

// methodName keeps a JSON-RPC method name fit for a log line: what a
// client sends is logged only if it looks like a method.
var methodName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_/.\-]{0,63}$`)

// peekCall reads the JSON-RPC method and tool name from a request body, and
// gives back a body that reads the same. A tool is named only if it is one
// this package serves, so no client text reaches the log.
func peekCall(r *http.Request) (method, tool string) {
	if r.Method != http.MethodPost || r.Body == nil {
		return "", ""
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, httpx.MaxBody+1))
	rest := r.Body
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), rest), rest}
	if err != nil {
		return "", ""
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || !methodName.MatchString(msg.Method) {
		return "", ""
	}
	if _, known := verbFamily[msg.Params.Name]; known {
		tool = msg.Params.Name
	}
	return msg.Method, tool
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// logRequests logs one line per request to /mcp, when it ends: the
// JSON-RPC method, the tool, the endpoint, the outcome (and its code), the
// HTTP status and the duration. It is INFO for an answered request, a tool
// error included (a refusal is the tool's answer); WARN for a client's
// mistake (no credential, a foreign Origin, a malformed or unknown
// message); ERROR, with the error, for a tool call that failed on the
// server. Never a header, a credential, an argument or a body.
func (s *surface) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &requestRecord{}
		rec.method, rec.tool = peekCall(r)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), recordKey{}, rec)))

		rec.mu.Lock()
		defer rec.mu.Unlock()
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		outcome := rec.outcome
		switch {
		case status >= 500 && outcome != outcomeInternal:
			outcome = outcomeInternal
		case status >= 400 && (outcome == "" || outcome == outcomeOK):
			outcome = outcomeProtocolError
		case outcome == "":
			outcome = outcomeOK
		}
		level := slog.LevelInfo
		switch outcome {
		case outcomeProtocolError, outcomeUnauthenticated, outcomeForbiddenOrigin:
			level = slog.LevelWarn
		case outcomeInternal:
			level = slog.LevelError
		}
		attrs := make([]slog.Attr, 0, 9)
		if rec.method != "" {
			attrs = append(attrs, slog.String("method", rec.method))
		}
		if rec.tool != "" {
			attrs = append(attrs, slog.String("tool", rec.tool))
		}
		if rec.endpointID != 0 {
			attrs = append(attrs, slog.Int64("endpoint_id", rec.endpointID))
		}
		attrs = append(attrs, slog.String("outcome", outcome))
		if rec.code != "" {
			attrs = append(attrs, slog.String("code", rec.code))
		}
		attrs = append(attrs, slog.Int("status", status), slog.Duration("duration", time.Since(start)))
		if rec.err != nil {
			attrs = append(attrs, slog.String("error", rec.err.Error()))
		}
		s.log.LogAttrs(r.Context(), level, "mcp request", attrs...)
	})
}

// sdkLogHandler is the handler of the SDK's own logger: its lines (session
// connected, initialized, disconnected, with an empty session id on a
// stateless server, and its view of a client's mistakes) go to DEBUG, since
// logRequests says what each request did in one line at the right level.
// An empty session_id is dropped.
type sdkLogHandler struct{ slog.Handler }

func (h sdkLogHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return h.Handler.Enabled(ctx, slog.LevelDebug)
}

func (h sdkLogHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, slog.LevelDebug, "mcp sdk: "+r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "session_id" && a.Value.String() == "" {
			return true
		}
		out.AddAttrs(a)
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h sdkLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return sdkLogHandler{h.Handler.WithAttrs(attrs)}
}

func (h sdkLogHandler) WithGroup(name string) slog.Handler {
	return sdkLogHandler{h.Handler.WithGroup(name)}
}
