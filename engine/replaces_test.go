package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store/storetest"
)

// jobKinds are an embedder's own pair of occurrence types: an abandoned
// job replaces its failure when replaces is true, as the reference host's
// relay.exhausted replaces todo.dead_lettered.
func jobKinds(replaces bool) []engine.EventKind {
	word := func(m engine.EventMessage) sinks.Draft { return sinks.Draft{Title: m.Content.Title} }
	occurrence := engine.Dedup{By: engine.DedupOccurrence, KeySpace: "job"}
	abandoned := engine.EventKind{Type: "job.abandoned", Words: "A job was abandoned", Severity: notifytype.SeverityHigh,
		Dedup: occurrence, AlsoMatches: []notifytype.EventType{"job.failed"}, Message: word}
	if replaces {
		abandoned.Replaces = "job.failed"
	}
	return []engine.EventKind{
		{Type: "job.failed", Words: "A job failed", Severity: notifytype.SeverityNormal, Dedup: occurrence, Message: word},
		abandoned,
	}
}

// An embedder's declared replacement does what the reference host's does,
// on a database without the host's tables or types: the replacing event
// takes over the open row of its occurrence (type, severity, content), and
// a repeat of the replaced type adds nothing. Without the declaration, the
// same two emits leave the first type's row as it was.
func TestEmbedderDeclaredReplacementTakesOverTheOpenRow(t *testing.T) {
	t.Parallel()
	for _, declared := range []bool{true, false} {
		pool := storetest.New(t) // the engine's tables alone
		now := time.Now().UTC().Truncate(time.Second)
		clock := clockwork.NewFakeClockAt(now)
		eng, err := engine.New(testhooks.WithDatabaseClock(engine.Config{Pool: pool, Events: jobKinds(declared), Clock: clock}, clock))
		require.NoError(t, err)
		f := storetest.NewFactory(t, pool)
		sink := f.Sink(storetest.SinkOpts{Owner: engine.SoleOwner})
		f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: []notifytype.EventType{"job.failed"}})

		emit := func(typ notifytype.EventType, title string) {
			t.Helper()
			require.NoError(t, pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
				return eng.Emit(context.Background(), tx, engine.Event{Type: typ, Owner: engine.SoleOwner, OccurrenceKey: "42:1",
					Content: sinks.Content{Title: title}})
			}))
			_, err := testhooks.FanOut(context.Background(), eng)
			require.NoError(t, err)
		}
		emit("job.failed", "failed")
		emit("job.abandoned", "abandoned")
		emit("job.failed", "failed again")

		var typ, severity, title string
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT event_type, severity, payload->>'title', (SELECT count(*) FROM switchboard.outbox)
			FROM switchboard.outbox WHERE sink_id = $1`, sink).Scan(&typ, &severity, &title, &n))
		require.Equal(t, 1, n, "one occurrence, one row")
		if declared {
			require.Equal(t, []string{"job.abandoned", "high", "abandoned"}, []string{typ, severity, title})
		} else {
			require.Equal(t, []string{"job.failed", "normal", "failed"}, []string{typ, severity, title})
		}
	}
}

// A replacement must name a declared type of the same occurrence key
// space: otherwise the two could never meet, and New says so.
func TestReplacesMustNameADeclaredTypeOfTheSameKeySpace(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/unused") // never connected: New fails first
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	for name, edit := range map[string]func([]engine.EventKind){
		"undeclared":        func(k []engine.EventKind) { k[1].Replaces = "job.lost" },
		"itself":            func(k []engine.EventKind) { k[1].Replaces = "job.abandoned" },
		"another key space": func(k []engine.EventKind) { k[0].Dedup.KeySpace = "other" },
		"not an occurrence": func(k []engine.EventKind) { k[0].Dedup = engine.Dedup{By: engine.DedupSubject, KeySpace: "job"} },
	} {
		kinds := jobKinds(true)
		edit(kinds)
		_, err := engine.New(engine.Config{Pool: pool, Events: kinds})
		require.ErrorContains(t, err, "Replaces", name)
	}
}
