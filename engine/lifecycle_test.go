package engine_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// Start runs the engine in the background and Stop drains it: a clean
// stop returns nil; a stop whose deadline passes while a delivery is still
// under way says so, and a later Stop waits for the rest. The delivery
// under way finishes and is recorded.
func TestStartAndStopWithADrainDeadline(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	gotify := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	t.Cleanup(gotify.Close)
	_, p, scope := w.Human()

	clean := w.Engine()
	require.NoError(t, clean.Start(w.Ctx))
	require.ErrorContains(t, clean.Start(w.Ctx), "already started")
	require.NoError(t, clean.Stop(w.Ctx), "a clean stop returns nil")
	require.NoError(t, clean.Stop(w.Ctx), "and so does a second")

	eng := w.Engine()
	w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: gotify.URL, Secret: "gtfya.token-stop"})
	require.NoError(t, eng.Start(w.Ctx))
	w.Emit(eng, deadLetterOf(scope, 1))
	<-arrived // the delivery is under way

	short, cancel := context.WithTimeout(w.Ctx, 100*time.Millisecond)
	defer cancel()
	err := eng.Stop(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the drain deadline passed with a delivery under way")
	close(release)
	require.NoError(t, eng.Stop(w.Ctx), "waiting longer, the stop is clean")
	a := w.Wait()
	require.Equal(t, "delivered", a.State, "the delivery under way finished and was recorded")
	require.Equal(t, map[string]int{"delivered": 1}, w.RowStates())
}

// Cancelling Serve's context ends the context every part of the engine
// works under in the same call, before the caller's next statement: no
// actor takes another step after it (Serve's own Stop, on the goroutine
// that waited for ctx, came later, and an actor whose send returned
// meanwhile sent the row queued behind it).
func TestCancellingServeEndsTheRunInTheSameCall(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	eng := w.Engine()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { return eng.RunContextForTest() != nil },
		enginetest.WaitTimeout, time.Millisecond, "Serve started")
	run := eng.RunContextForTest()
	require.NoError(t, run.Err(), "running")
	cancel()
	require.ErrorIs(t, run.Err(), context.Canceled, "the run ended with the cancel")
}

// An engine started on a database without its tables says what to do.
func TestStartRefusesAnUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), storetest.EmptyURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	eng, err := engine.New(engine.Config{Pool: pool})
	require.NoError(t, err)
	require.ErrorContains(t, eng.Start(context.Background()), "run enginemigrate.Up first")
	require.NoError(t, eng.Stop(context.Background()), "never started: nothing to stop")
}

// A row recorded undeliverable logs a warning naming its sink, the row and
// the error class, never the sink's secret or the message.
func TestUndeliverableRowLogsAWarning(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	gotify := newGotify(t)
	_, p, scope := w.Human()
	// No private-host allowance: the guard refuses the loopback receiver,
	// a final class, so the row is undeliverable at its first attempt.
	eng := w.Serve(func(c *engine.Config) { c.PrivateHosts = nil })
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: gotify.URL, Secret: "gtfya.token-undeliverable"})
	w.Emit(eng, deadLetterOf(scope, 7))
	a := w.Wait()
	require.Equal(t, "undeliverable", a.State)
	require.Equal(t, notifytype.ClassBlocked, a.Class)

	var warned bool
	for line := range strings.SplitSeq(w.Logs.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || l["msg"] != "outbox row undeliverable" {
			continue
		}
		warned = true
		require.Equal(t, "WARN", l["level"])
		require.EqualValues(t, sink, l["sink_id"])
		require.EqualValues(t, a.Rows[0], l["row_id"])
		require.Equal(t, "blocked", l["class"])
	}
	require.True(t, warned, "no warning for the undeliverable row:\n%s", w.Logs.String())
	require.NotContains(t, w.Logs.String(), "gtfya.token-undeliverable")
	require.NotContains(t, w.Logs.String(), "nightly build")
	require.Empty(t, gotify.received())
}

// Without a Directory the engine has one owner, SoleOwner, and no teams:
// the owner configures and receives; anyone else, any team and any
// endpoint are not_found.
func TestNilDirectoryMeansOneOwnerNoTeams(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := hosttest.New(t)
	gotify := newGotify(t)
	eng, err := engine.New(engine.Config{
		Pool: pool, Events: host.Events(), SecretKey: make([]byte, 32), PushAllowHTTP: true,
		PrivateHosts: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	require.NoError(t, err)

	owner := engine.HumanPrincipal(engine.SoleOwner.ID)
	c, err := eng.CreateConnection(ctx, owner, engine.ConnectionInput{
		Owner: engine.SoleOwner, Kind: engine.KindGotify, Name: "phone", BaseURL: gotify.URL,
		Secret: notifytype.NewSecret("gtfya.sole"),
	})
	require.NoError(t, err)
	s, err := eng.CreateSink(ctx, owner, engine.SinkInput{Owner: engine.SoleOwner, Name: "phone", Kind: engine.KindGotify, ConnectionID: c.ID})
	require.NoError(t, err)
	_, err = eng.AddSubscription(ctx, owner, s.ID, engine.SubscriptionInput{
		EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}, Queues: []int64{5, 3},
	})
	require.NoError(t, err, "every queue id is the sole owner's")

	for _, refused := range []struct {
		p     engine.Principal
		scope notifytype.OwnerScope
	}{
		{engine.HumanPrincipal("2"), notifytype.Human("2")},
		{owner, notifytype.Team("1")},
		{engine.EndpointPrincipal(1, engine.SoleOwner.ID, engine.SoleOwner, notifytype.GrantNotifications), engine.SoleOwner},
	} {
		_, err := eng.ListSinks(ctx, refused.p, refused.scope)
		require.ErrorIs(t, err, notifytype.ErrNotFound, "%+v", refused)
	}

	require.NoError(t, eng.Start(ctx))
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		ev := deadLetterOf(engine.SoleOwner, 9)
		ev.QueueID = 3
		return eng.Emit(ctx, tx, ev)
	}))
	require.Eventually(t, func() bool { return len(gotify.received()) == 1 }, enginetest.WaitTimeout, 10*time.Millisecond)
	require.Equal(t, "gtfya.sole", gotify.received()[0].Token)
	require.NoError(t, eng.Stop(ctx))
}
