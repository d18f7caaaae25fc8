package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/sinktest"
)

// leakEcho answers status with a body and headers repeating the request
// (its URL, headers and body), as a verbose or hostile server might:
// nothing of it may reach a log, a record or an attempt. 503 asks for a
// retry in two minutes.
func leakEcho(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Echo", fmt.Sprint(r.Header))
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "120")
		}
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `{"error": "echo", "url": %q, "headers": %q, "body": %q}`, r.URL.String(), r.Header, body)
	}
}

// TestDeliveryNeverLeaksSecrets plants a canary Gotify token, Apprise URLs
// and an authorization value in sinks of both kinds, and a canary message
// body in the event, then drives every delivery path: success, each
// failure class (401, 403, 404, 424, 204, 500, 503 with Retry-After, a 301,
// a blocked destination, a refused connection, a timeout) and an adapter
// panic. No secret may appear in any log line, attempt, status or stored
// column (the sealed secret aside, whose raw bytes must not carry it
// either); the body may appear only in the opted-in outbox payload.
func TestDeliveryNeverLeaksSecrets(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	c := sinktest.NewCanaries()
	_, p, scope := w.Human()

	var (
		timeoutSink, panicSink atomic.Int64
		panicked               = make(chan struct{}, 8)
	)
	eng := w.ServeWith(func(e *engine.Engine) {
		testhooks.WrapAdapters(e, func(sinkID int64, a sinks.Adapter) sinks.Adapter {
			switch sinkID {
			case timeoutSink.Load():
				// The engine's own deadline is 10 s; a shorter one takes the
				// same path (the guarded client's request gives up).
				return adapterFunc(func(ctx context.Context, m sinks.Message) sinks.Result {
					ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
					defer cancel()
					return a.Deliver(ctx, m)
				})
			case panicSink.Load():
				return adapterFunc(func(context.Context, sinks.Message) sinks.Result {
					panicked <- struct{}{}
					panic(fmt.Sprintf("adapter exploded: %v", a))
				})
			}
			return a
		})
	}, func(cfg *engine.Config) { cfg.MaxSinksPerScope = 32 })

	secretJSON := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}
	stateless := secretJSON(map[string]any{"urls": c.AppriseURLs, "authorization": c.Authorization})
	authOnly := secretJSON(map[string]any{"authorization": c.Authorization})
	ops := map[string]any{"config_key": "ops"}
	target := sinktest.NewServer(t, nil)
	redirect := func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/elsewhere?key="+r.Header.Get("X-Gotify-Key"), http.StatusMovedPermanently)
	}
	hang := func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

	type path struct {
		name    string
		kind    string
		handler http.HandlerFunc // nil: base is used as is
		base    string
		secret  string
		options any
		class   notifytype.ErrorClass
		status  int
		state   string // after the first attempt
		timeout bool
		panics  bool

		srv  *sinktest.Server
		sink int64
	}
	g, a := engine.KindGotify, engine.KindApprise
	paths := []*path{
		{name: "gotify delivered", kind: g, handler: leakEcho(200), status: 200, state: "delivered"},
		{name: "gotify 401", kind: g, handler: leakEcho(401), class: notifytype.ClassAuth, status: 401, state: "pending"},
		{name: "gotify 403", kind: g, handler: leakEcho(403), class: notifytype.ClassAuth, status: 403, state: "pending"},
		{name: "gotify 404", kind: g, handler: leakEcho(404), class: notifytype.ClassRejected, status: 404, state: "pending"},
		{name: "gotify 500", kind: g, handler: leakEcho(500), class: notifytype.ClassServer, status: 500, state: "pending"},
		{name: "gotify 503", kind: g, handler: leakEcho(503), class: notifytype.ClassServer, status: 503, state: "pending"},
		{name: "gotify 301", kind: g, handler: redirect, class: notifytype.ClassRedirect, status: 301, state: "pending"},
		{name: "gotify blocked", kind: g, base: "http://169.254.169.254/gotify", class: notifytype.ClassBlocked, state: "undeliverable"},
		{name: "gotify refused", kind: g, base: sinktest.RefusedURL(t), class: notifytype.ClassNetwork, state: "pending"},
		{name: "gotify timeout", kind: g, handler: hang, class: notifytype.ClassTimeout, state: "pending", timeout: true},
		{name: "gotify panic", kind: g, handler: leakEcho(200), class: notifytype.ClassAbandoned, state: "pending", panics: true},
		{name: "apprise delivered", kind: a, handler: leakEcho(200), secret: stateless, status: 200, state: "delivered"},
		{name: "apprise 424", kind: a, handler: leakEcho(424), secret: stateless, class: notifytype.ClassPartial, status: 424, state: "pending"},
		{name: "apprise 204", kind: a, handler: leakEcho(204), secret: stateless, class: notifytype.ClassConfig, status: 204, state: "undeliverable"},
		{name: "apprise 401", kind: a, handler: leakEcho(401), secret: stateless, class: notifytype.ClassAuth, status: 401, state: "pending"},
		{name: "apprise blocked", kind: a, base: "http://10.0.0.1:8000", secret: stateless, class: notifytype.ClassBlocked, state: "undeliverable"},
		{name: "apprise stateful delivered", kind: a, handler: leakEcho(200), secret: authOnly, options: ops, status: 200, state: "delivered"},
		{name: "apprise stateful 500", kind: a, handler: leakEcho(500), secret: authOnly, options: ops, class: notifytype.ClassServer, status: 500, state: "pending"},
	}
	bySink := map[int64]*path{}
	for _, pa := range paths {
		base := pa.base
		if pa.handler != nil {
			pa.srv = sinktest.NewServer(t, pa.handler)
			base = pa.srv.URL
		}
		secret := pa.secret
		if pa.kind == g {
			secret = c.GotifyToken
		}
		pa.sink = w.Sink(eng, p, scope, enginetest.SinkOpts{
			Kind: pa.kind, BaseURL: base, Secret: secret, Options: pa.options, IncludeExcerpt: true,
		})
		bySink[pa.sink] = pa
		switch {
		case pa.timeout:
			timeoutSink.Store(pa.sink)
		case pa.panics:
			panicSink.Store(pa.sink)
		}
	}

	var attempts []engine.Attempt
	w.Emit(eng, todoDead(scope, 1, sinks.Content{Title: "leak check", Body: c.MessageBody}))
	for _, at := range w.WaitN(len(paths)) {
		pa := bySink[at.SinkID]
		require.NotNil(t, pa, "%+v", at)
		require.Equal(t, pa.class, at.Class, pa.name)
		require.Equal(t, pa.status, at.Status, pa.name)
		require.Equal(t, pa.state, at.State, pa.name)
		attempts = append(attempts, at)
	}
	select {
	case <-panicked:
	case <-time.After(enginetest.WaitTimeout):
		t.Fatal("the panicking adapter never ran")
	}
	// A panic is a recovered, classified failure: its actor goes on.
	for _, st := range eng.AllSinkStatuses() {
		require.Zero(t, st.Restarts, "%+v", st)
	}

	// The retries due within 30 s, among them the 424's second and last.
	retryAt := w.Clock.Now().Add(engine.RetryDelay(2))
	retries := w.F.Count(`SELECT count(*) FROM switchboard.outbox WHERE state = 'pending' AND due_at <= $1`, retryAt)
	require.Equal(t, 11, retries, "401, 403, 404, 500, 301, refused, timeout, panic, 424, apprise 401, stateful 500")
	w.Clock.Advance(engine.RetryDelay(2))
	for _, at := range w.WaitN(retries) {
		require.Equal(t, 2, at.Attempt)
		if bySink[at.SinkID].class == notifytype.ClassPartial {
			require.Equal(t, "partial", at.State)
		}
		attempts = append(attempts, at)
	}

	// The canaries were planted for real: the servers that answered
	// received them.
	requests := func(name string) []sinktest.Request {
		i := slices.IndexFunc(paths, func(pa *path) bool { return pa.name == name })
		require.GreaterOrEqual(t, i, 0, name)
		return paths[i].srv.Requests()
	}
	gotifyOK, appriseOK, statefulOK := requests("gotify delivered"), requests("apprise delivered"), requests("apprise stateful delivered")
	require.Equal(t, c.GotifyToken, gotifyOK[0].Header.Get("X-Gotify-Key"))
	require.Contains(t, string(gotifyOK[0].Body), c.MessageBody)
	for _, u := range c.AppriseURLs {
		require.Contains(t, decodeApprise(t, appriseOK[0])["urls"], u)
	}
	require.Equal(t, c.Authorization, appriseOK[0].Header.Get("Authorization"))
	require.Equal(t, c.Authorization, statefulOK[0].Header.Get("Authorization"))
	require.Empty(t, target.Requests(), "a redirect was followed")

	// Every class was met, and logged.
	logs := w.Logs.String()
	seen := map[notifytype.ErrorClass]bool{}
	for _, at := range attempts {
		seen[at.Class] = true
	}
	for _, class := range []notifytype.ErrorClass{
		notifytype.ClassNone, notifytype.ClassAuth, notifytype.ClassRejected, notifytype.ClassServer,
		notifytype.ClassRedirect, notifytype.ClassBlocked, notifytype.ClassNetwork, notifytype.ClassTimeout,
		notifytype.ClassPartial, notifytype.ClassConfig, notifytype.ClassAbandoned,
	} {
		require.True(t, seen[class], "class %q never met", class)
		if class != notifytype.ClassNone {
			require.Contains(t, logs, `"class":"`+string(class)+`"`)
		}
	}
	require.Contains(t, logs, "the sink adapter panicked", "the panic was logged")

	// Nothing anywhere carries a canary.
	var body, secrets []string
	for _, v := range c.Values() {
		if strings.Contains(c.MessageBody, v) {
			body = append(body, v)
		} else {
			secrets = append(secrets, v)
		}
	}
	require.NotEmpty(t, body)
	require.GreaterOrEqual(t, len(secrets), 5)
	status, err := json.Marshal(eng.AllSinkStatuses())
	require.NoError(t, err)
	var capture sinktest.Capture
	_, _ = capture.Write([]byte(logs))
	_, _ = capture.Write(status)
	for _, at := range attempts {
		capture.Record(at)
	}
	sinktest.RequireNoLeak(t, c, &capture)

	tables := w.Tables()
	for _, table := range []string{"connections", "sinks", "subscriptions", "outbox", "delivery_records"} {
		require.Contains(t, tables, table)
	}
	for _, table := range tables {
		dump := w.TableJSON(table, "secret")
		for _, v := range secrets {
			require.NotContains(t, dump, v, "table %s stores a secret in the clear", table)
		}
		if table == "outbox" {
			// The opted-in excerpt is the one place the body is kept.
			continue
		}
		for _, v := range body {
			require.NotContains(t, dump, v, "table %s stores the message body", table)
		}
	}
	var sealed [][]byte
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT array_agg(secret) FROM switchboard.connections WHERE secret IS NOT NULL`).Scan(&sealed))
	require.Len(t, sealed, len(paths))
	for _, s := range sealed {
		for _, v := range c.Values() {
			require.False(t, bytes.Contains(s, []byte(v)), "a sealed secret carries a canary in the clear")
		}
	}
}
