package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/internal/enginecore"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// Limits of the management actions.
const (
	// SendTestsPerMinute is how many test messages one sink may send a
	// minute (the spec's Rate Limiting).
	SendTestsPerMinute = 6
	// agentPageWindow is how long an agent's page (pages.NotifyOwner)
	// counts against its limit; the janitor removes older ones.
	agentPageWindow = enginecore.AgentPageWindow
)

// TestMessageResult is what a send test reports: success or the error class.
type TestMessageResult struct {
	Delivered bool                  `json:"delivered"`
	Class     notifytype.ErrorClass `json:"error_class,omitempty"`
	Status    int                   `json:"http_status,omitempty"`
}

// SendTestMessage delivers one message titled as a test through the sink, now
// (REQ-5): it bypasses subscriptions and the budget, but not the SSRF
// guard, the HTTPS rule or the connection checks. At most
// SendTestsPerMinute a minute per sink. It needs write access to the sink.
func (e *Engine) SendTestMessage(ctx context.Context, p Principal, sinkID int64) (TestMessageResult, error) {
	res, err := e.sendTest(ctx, p, sinkID)
	return res, wrapErr(err, "sending test message")
}

func (e *Engine) sendTest(ctx context.Context, p Principal, sinkID int64) (TestMessageResult, error) {
	if _, err := e.readSink(ctx, p, sinkID, true); err != nil {
		return TestMessageResult{}, err
	}
	now, err := e.now(ctx)
	if err != nil {
		return TestMessageResult{}, err
	}
	var (
		adapter  sinks.Adapter
		owner    string
		recordID int64
	)
	err = pgx.BeginFunc(ctx, e.cfg.Pool, func(tx pgx.Tx) error {
		s, err := store.LockSinkForDelivery(ctx, tx, sinkID)
		if err != nil {
			return notFoundIfNoRows(err, "sink")
		}
		n, first, err := store.CountTestsSince(ctx, tx, sinkID, now.Add(-time.Minute))
		if err != nil {
			return err
		}
		if n >= SendTestsPerMinute {
			return notifytype.RateLimitedFor(fmt.Sprintf("at most %d test messages a minute per sink", SendTestsPerMinute),
				first.Add(time.Minute).Sub(now))
		}
		// A disabled sink may be tested: that is how an owner checks it
		// before enabling it.
		s.Enabled = true
		a, _, refusal := e.adapterFor(s)
		if refusal != "" {
			return notifytype.Forbidden(refusal)
		}
		adapter, owner = a, s.Owner
		recordID, err = store.InsertDeliveryRecord(ctx, tx, store.DeliveryRecord{
			SinkID: s.ID, Owner: s.Owner, EventType: "test", IsTest: true, CountsBudget: false, SentAt: now,
		})
		if err != nil {
			return err
		}
		scope, err := notifytype.ParseOwnerScope(s.Owner)
		if err != nil {
			return fmt.Errorf("error reading sink %d owner: %w", s.ID, err)
		}
		return recordWrite(ctx, tx, p, scope, writeSinkTest, objectSink, s.ID)
	})
	if err != nil {
		return TestMessageResult{}, err
	}
	result := e.send(ctx, adapter, sinks.RenderTest())
	status := "delivered"
	if !result.OK() {
		status = "undeliverable"
		e.log.Warn("test message failed", "sink_id", sinkID, "owner_scope", owner, "class", result.Class,
			"http_status", result.Status, "error", result.Err)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := store.FinishDeliveryRecord(rctx, e.cfg.Pool, recordID, status, string(result.Class), result.Status, e.nowOrLocal(rctx)); err != nil {
		return TestMessageResult{}, err
	}
	return TestMessageResult{Delivered: result.OK(), Class: result.Class, Status: result.Status}, nil
}

// DeliveryRecord is one recorded attempt or test message, as surfaces show
// it: never a body, header, URL or secret.
type DeliveryRecord struct {
	ID            int64                 `json:"id"`
	SinkID        int64                 `json:"sink_id"`
	EventType     string                `json:"event_type"`
	Attempt       int                   `json:"attempt"`
	Test          bool                  `json:"test"`
	CoalescedRows int                   `json:"coalesced_rows"`
	Status        string                `json:"status"`
	Class         notifytype.ErrorClass `json:"error_class,omitempty"`
	HTTPStatus    int                   `json:"http_status,omitempty"`
	SentAt        time.Time             `json:"sent_at"`
}

// ListDeliveries returns a sink's latest delivery records, newest first
// (at most limit, 1..200; default 50).
func (e *Engine) ListDeliveries(ctx context.Context, p Principal, sinkID int64, limit int) ([]DeliveryRecord, error) {
	if _, err := e.readSink(ctx, p, sinkID, false); err != nil {
		return nil, wrapErr(err, "listing deliveries")
	}
	if limit <= 0 || limit > 200 {
		limit = 50
	}
	rows, err := store.ListDeliveryRecords(ctx, e.cfg.Pool, sinkID, limit)
	if err != nil {
		return nil, wrapErr(err, "listing deliveries")
	}
	out := make([]DeliveryRecord, len(rows))
	for i, r := range rows {
		out[i] = DeliveryRecord{
			ID: r.ID, SinkID: r.SinkID, EventType: r.EventType, Attempt: r.Attempt, Test: r.IsTest,
			CoalescedRows: r.CoalescedRows, Status: r.Status, Class: notifytype.ErrorClass(r.Class),
			HTTPStatus: r.HTTPStatus, SentAt: r.SentAt,
		}
	}
	return out, nil
}

// UnsavedSinkSettings is a sink not saved yet, for TrySinkSettings: its
// owner scope and kind, its options, and either a saved connection of the
// scope and kind (ConnectionID) or a connection not saved yet (BaseURL and
// Secret, as ConnectionInput's BaseURL and Secret).
type UnsavedSinkSettings struct {
	Owner        notifytype.OwnerScope
	Kind         string
	ConnectionID int64
	BaseURL      string
	Secret       notifytype.Secret
	Options      json.RawMessage
}

// TrySinkSettings delivers the test message through a sink that is not
// saved yet (the web UI's guided start: try the destination before saving
// it), storing nothing: no connection, sink or delivery record. It passes
// every check a save would (owner scope and role, kind, the connection's
// scope and kind or a new connection's base URL and secret, the options,
// the Apprise scheme allowlist) and the same guarded client as every
// delivery (SSRF guard, HTTPS unless opted out, no redirects, 10 s). Only a
// human may use it, at most SendTestsPerMinute a minute each. The secret
// is never returned or logged.
func (e *Engine) TrySinkSettings(ctx context.Context, p Principal, in UnsavedSinkSettings) (TestMessageResult, error) {
	r, err := e.sendTestSettings(ctx, p, in)
	return r, wrapErr(err, "sending a test message")
}

func (e *Engine) sendTestSettings(ctx context.Context, p Principal, in UnsavedSinkSettings) (TestMessageResult, error) {
	if err := rejectEndpoint(p, "test unsaved settings"); err != nil {
		return TestMessageResult{}, err
	}
	if err := e.authorizeTarget(ctx, p, in.Owner); err != nil {
		return TestMessageResult{}, err
	}
	if in.Kind != KindGotify && in.Kind != KindApprise {
		return TestMessageResult{}, notifytype.InvalidArgument("kind", "must be gotify or apprise")
	}
	base, secret := in.BaseURL, in.Secret
	connID := in.ConnectionID
	if connID > 0 {
		c, s, err := e.openConnection(ctx, e.cfg.Pool, connID, in.Owner, in.Kind)
		if err != nil {
			return TestMessageResult{}, err
		}
		base, secret = c.AccountKey, s
	} else {
		if err := e.checkBaseURL(base); err != nil {
			return TestMessageResult{}, err
		}
		plaintext, err := e.connectionSecret(in.Kind, secret)
		if err != nil {
			return TestMessageResult{}, err
		}
		secret = notifytype.NewSecret(plaintext)
	}
	opts, err := e.checkOptions(in.Kind, in.Options, secret, connID)
	if err != nil {
		return TestMessageResult{}, err
	}
	if !e.unsavedTests.allow(p.HumanID, e.cfg.Clock.Now()) {
		return TestMessageResult{}, notifytype.RateLimited(fmt.Sprintf("at most %d test messages a minute", SendTestsPerMinute))
	}
	adapter, refusal := e.newAdapter(in.Kind, base, secret, opts)
	if refusal != "" {
		return TestMessageResult{}, notifytype.Forbidden(refusal)
	}
	result := e.send(ctx, adapter, sinks.RenderTest())
	if !result.OK() {
		e.log.Warn("test message of unsaved settings failed", "owner_scope", in.Owner.String(), "kind", in.Kind,
			"class", result.Class, "http_status", result.Status)
	}
	return TestMessageResult{Delivered: result.OK(), Class: result.Class, Status: result.Status}, nil
}

// testWindow counts a human's test messages of unsaved settings in the
// last minute, in this instance (nothing is stored to count them by).
type testWindow struct {
	mu   sync.Mutex
	sent map[string][]time.Time
}

// allow records a test at now for human and reports whether it is within
// SendTestsPerMinute of the last minute.
func (w *testWindow) allow(human string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent == nil {
		w.sent = map[string][]time.Time{}
	}
	recent := w.sent[human][:0]
	for _, t := range w.sent[human] {
		if now.Sub(t) < time.Minute {
			recent = append(recent, t)
		}
	}
	if len(recent) >= SendTestsPerMinute {
		w.sent[human] = recent
		return false
	}
	w.sent[human] = append(recent, now)
	return true
}
