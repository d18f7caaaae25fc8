package notifytest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/notifytype"
)

// DBTX is where the kit reads: your pgx.Tx (what it emitted is visible
// before it commits), a *pgxpool.Pool or a *pgx.Conn.
type DBTX interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Emitted is one event on its way to its sinks: an event row not fanned
// out yet (SinkIDs are the sinks its subscriptions matched), or, once an
// engine fanned it out, an outbox row of one sink.
type Emitted struct {
	Type     notifytype.EventType
	Owner    string // the owner scope, as "human:1"
	Severity notifytype.Severity
	DedupKey string // "" when the event has none
	SinkIDs  []int64
	Payload  json.RawMessage
}

// EmittedOpts narrows what an assertion looks for; its zero value (or
// nil) matches every event of the type.
type EmittedOpts struct {
	// Owner, when set, is the owner scope the event must have ("team:3").
	Owner string
	// DedupKey, when set, is the dedup key the event must have.
	DedupKey string
}

func (o *EmittedOpts) matches(e Emitted) bool {
	return o == nil || (o.Owner == "" || o.Owner == e.Owner) && (o.DedupKey == "" || o.DedupKey == e.DedupKey)
}

// emittedSQL reads events not fanned out yet and outbox rows not finished.
const emittedSQL = `
	SELECT event_type, owner, severity, coalesce(dedup_key, ''), sink_ids, payload
	FROM switchboard.outbox_events WHERE event_type = $1
	UNION ALL
	SELECT event_type, owner::text, severity, coalesce(dedup_key, ''), ARRAY[sink_id], payload
	FROM switchboard.outbox WHERE event_type = $1 AND finished_at IS NULL
	ORDER BY 1, 2`

// Emitted lists the events of type t that db sees on their way to sinks.
func ListEmitted(ctx context.Context, db DBTX, t notifytype.EventType) ([]Emitted, error) {
	rows, err := db.Query(ctx, emittedSQL, string(t))
	if err != nil {
		return nil, fmt.Errorf("error reading emitted events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Emitted, error) {
		var e Emitted
		var typ, sev string
		err := r.Scan(&typ, &e.Owner, &sev, &e.DedupKey, &e.SinkIDs, &e.Payload)
		e.Type, e.Severity = notifytype.EventType(typ), notifytype.Severity(sev)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading emitted events: %w", err)
	}
	return out, nil
}

// RequireEmittedTx fails tb unless db sees an event of type t matching
// opts, and returns the first such event. Called with your transaction, it
// sees what that transaction emitted before it commits.
func RequireEmittedTx(ctx context.Context, tb testing.TB, db DBTX, t notifytype.EventType, opts *EmittedOpts) Emitted {
	tb.Helper()
	all, err := ListEmitted(ctx, db, t)
	if err != nil {
		tb.Fatalf("notifytest: %v", err)
	}
	for _, e := range all {
		if opts.matches(e) {
			return e
		}
	}
	tb.Fatalf("notifytest: no %s event was emitted%s; emitted of that type: %s", t, describe(opts), list(all))
	return Emitted{}
}

// RequireNotEmittedTx fails tb if db sees an event of type t matching opts.
func RequireNotEmittedTx(ctx context.Context, tb testing.TB, db DBTX, t notifytype.EventType, opts *EmittedOpts) {
	tb.Helper()
	all, err := ListEmitted(ctx, db, t)
	if err != nil {
		tb.Fatalf("notifytest: %v", err)
	}
	for _, e := range all {
		if opts.matches(e) {
			tb.Fatalf("notifytest: a %s event was emitted%s: %s", t, describe(opts), list([]Emitted{e}))
		}
	}
}

func describe(o *EmittedOpts) string {
	var parts []string
	if o != nil && o.Owner != "" {
		parts = append(parts, "owner "+o.Owner)
	}
	if o != nil && o.DedupKey != "" {
		parts = append(parts, "dedup key "+o.DedupKey)
	}
	if len(parts) == 0 {
		return ""
	}
	return " with " + strings.Join(parts, " and ")
}

func list(es []Emitted) string {
	if len(es) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "owner %s, dedup key %q, sinks %v", e.Owner, e.DedupKey, e.SinkIDs)
	}
	return b.String()
}
