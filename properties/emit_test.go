package properties

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store/storetest"
)

type nopDirectory struct{}

func (nopDirectory) TeamRole(context.Context, string, string) (engine.Role, error) {
	return engine.RoleNone, nil
}

func (nopDirectory) Owned(context.Context, notifytype.OwnerScope, engine.Resource, []int64) ([]int64, error) {
	return nil, nil
}

func (nopDirectory) KnownActor(context.Context, string, int64) (bool, error) { return true, nil }

// The world each check draws: three owner scopes, each with queues and
// webhooks of its own, and sinks with random subscriptions.
var scopes = []notifytype.OwnerScope{notifytype.Human("1"), notifytype.Human("2"), notifytype.Team("1")}

const (
	queuesPerScope   = 2
	webhooksPerScope = 2
	todosPerScope    = 3
)

// object ids are derived from the scope index so that each todo, queue and
// webhook belongs to exactly one scope, as in a real host.
func objectID(scope, n int) int64 { return int64(scope*10 + n + 1) }

type sub struct {
	types    []notifytype.EventType
	queues   []int64
	webhooks []int64
	min      notifytype.Severity
}

type sinkModel struct {
	id      int64
	scope   int
	enabled bool
	subs    []sub
}

func (s sinkModel) matches(scope int, ev engine.Event) bool {
	if !s.enabled || s.scope != scope {
		return false
	}
	types := []notifytype.EventType{ev.Type}
	if ev.Type == host.EventRelayExhausted {
		types = append(types, host.EventTodoDeadLettered)
	}
	for _, sb := range s.subs {
		if !slices.ContainsFunc(sb.types, func(t notifytype.EventType) bool { return slices.Contains(types, t) }) {
			continue
		}
		sev := ev.Severity
		if sev == "" {
			sev = notifytype.SeverityNormal
			if k, ok := host.KindOf(ev.Type); ok {
				sev = k.Severity
			}
		}
		if !sev.AtLeast(sb.min) {
			continue
		}
		if len(sb.queues) > 0 && !slices.Contains(sb.queues, ev.QueueID) {
			continue
		}
		if len(sb.webhooks) > 0 && !slices.Contains(sb.webhooks, ev.WebhookID) {
			continue
		}
		return true
	}
	return false
}

type emitted struct {
	scope int
	ev    engine.Event
}

func drawEvent(t *rapid.T, label string) emitted {
	scope := rapid.IntRange(0, len(scopes)-1).Draw(t, label+".scope")
	ev := engine.Event{
		Owner:    scopes[scope],
		Type:     rapid.SampledFrom([]notifytype.EventType{host.EventTodoDeadLettered, host.EventRelayExhausted, host.EventDeliveryQuarantined, engine.EventAgentNotify}).Draw(t, label+".type"),
		Severity: rapid.SampledFrom(append([]notifytype.Severity{""}, notifytype.Severities...)).Draw(t, label+".severity"),
		Content:  sinks.Content{Title: "t"},
	}
	switch ev.Type {
	case host.EventTodoDeadLettered, host.EventRelayExhausted:
		ev.QueueID = objectID(scope, rapid.IntRange(0, queuesPerScope-1).Draw(t, label+".queue"))
		ev.OccurrenceKey = host.DeadLetterKey(objectID(scope, rapid.IntRange(0, todosPerScope-1).Draw(t, label+".todo")),
			rapid.IntRange(1, 2).Draw(t, label+".dlc"))
	case host.EventDeliveryQuarantined:
		ev.WebhookID = objectID(scope, rapid.IntRange(0, webhooksPerScope-1).Draw(t, label+".webhook"))
		ev.Subject = host.QuarantineSubject(ev.WebhookID)
	}
	return emitted{scope: scope, ev: ev}
}

// key is how the model names a row's identity for a sink.
func key(e emitted) string {
	switch e.ev.Type {
	case host.EventTodoDeadLettered, host.EventRelayExhausted:
		return "todo:" + e.ev.OccurrenceKey
	case host.EventDeliveryQuarantined:
		return fmt.Sprintf("webhook:%d", e.ev.WebhookID)
	default:
		return "" // no key: each emit is its own row
	}
}

// TestEmitProperties runs random transactions concurrently, each emitting
// random events and then committing or rolling back, while two claimers
// fan the committed events out, and checks the outbox against a model
// built from the committed transactions only:
//   - a row exists exactly for what committed (rolled-back emits leave none);
//   - per sink and dedup key there is at most one open row, and its count
//     (1 + repeats) equals the committed windowed emits of that key;
//   - a relay.exhausted and a todo.dead_lettered of the same dead letter are
//     one row, of type relay.exhausted;
//   - every row's sink is of the event's owner scope.
func TestEmitProperties(t *testing.T) {
	pool := hosttest.New(t)
	f := hosttest.NewFactory(t, pool)
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(time.Now().UTC().Truncate(time.Second))
	eng, err := engine.New(testhooks.WithDatabaseClock(engine.Config{Pool: pool, Events: host.Events(), Links: host.Links(), Directory: nopDirectory{}, Clock: clock}, clock))
	require.NoError(t, err)

	rapid.Check(t, func(rt *rapid.T) {
		_, err := pool.Exec(ctx, `TRUNCATE switchboard.outbox, switchboard.outbox_events, switchboard.subscriptions, switchboard.sinks, switchboard.connections CASCADE`)
		require.NoError(rt, err)

		// Sinks and subscriptions.
		var world []sinkModel
		for i := range rapid.IntRange(1, 6).Draw(rt, "sinks") {
			scope := rapid.IntRange(0, len(scopes)-1).Draw(rt, fmt.Sprintf("sink%d.scope", i))
			s := sinkModel{scope: scope, enabled: rapid.Float64Range(0, 1).Draw(rt, fmt.Sprintf("sink%d.enabled", i)) < 0.85}
			s.id = f.Sink(storetest.SinkOpts{Owner: scopes[scope], Disabled: !s.enabled})
			for j := range rapid.IntRange(1, 2).Draw(rt, fmt.Sprintf("sink%d.subs", i)) {
				label := fmt.Sprintf("sink%d.sub%d", i, j)
				sb := sub{
					types: rapid.SliceOfNDistinct(rapid.SampledFrom(host.EventTypes), 1, 3, rapid.ID).Draw(rt, label+".types"),
					min:   rapid.SampledFrom(notifytype.Severities).Draw(rt, label+".min"),
				}
				// A filter may name an object of another scope: the filter then
				// never matches, and nothing leaks across.
				if rapid.Bool().Draw(rt, label+".filterQueue") {
					sb.queues = []int64{objectID(rapid.IntRange(0, len(scopes)-1).Draw(rt, label+".qscope"), rapid.IntRange(0, queuesPerScope-1).Draw(rt, label+".q"))}
				}
				if rapid.Bool().Draw(rt, label+".filterWebhook") {
					sb.webhooks = []int64{objectID(scope, rapid.IntRange(0, webhooksPerScope-1).Draw(rt, label+".w"))}
				}
				f.Subscription(storetest.SubscriptionOpts{Sink: s.id, EventTypes: sb.types, Queues: sb.queues, Webhooks: sb.webhooks, MinSeverity: sb.min})
				s.subs = append(s.subs, sb)
			}
			world = append(world, s)
		}

		// Transactions, run concurrently.
		type txPlan struct {
			events []emitted
			commit bool
		}
		plans := make([]txPlan, rapid.IntRange(1, 6).Draw(rt, "txs"))
		for i := range plans {
			plans[i].commit = rapid.Float64Range(0, 1).Draw(rt, fmt.Sprintf("tx%d.commit", i)) < 0.7
			for j := range rapid.IntRange(1, 5).Draw(rt, fmt.Sprintf("tx%d.events", i)) {
				plans[i].events = append(plans[i].events, drawEvent(rt, fmt.Sprintf("tx%d.ev%d", i, j)))
			}
		}
		var wg sync.WaitGroup
		errs := make([]error, len(plans))
		for i, p := range plans {
			wg.Go(func() {
				tx, err := pool.Begin(ctx)
				if err != nil {
					errs[i] = err
					return
				}
				defer tx.Rollback(ctx) //nolint:errcheck // a no-op after commit
				for _, e := range p.events {
					if err := eng.Emit(ctx, tx, e.ev); err != nil {
						errs[i] = err
						return
					}
				}
				if p.commit {
					errs[i] = tx.Commit(ctx)
				}
			})
		}
		// Claimers of two instances fan out while the transactions run.
		stop := make(chan struct{})
		var fanners sync.WaitGroup
		fanErrs := make([]error, 2)
		for i := range fanErrs {
			fanners.Go(func() {
				for {
					if _, err := testhooks.FanOut(ctx, eng); err != nil {
						fanErrs[i] = err
						return
					}
					select {
					case <-stop:
						return
					default:
					}
				}
			})
		}
		wg.Wait()
		close(stop)
		fanners.Wait()
		for _, err := range append(errs, fanErrs...) {
			require.NoError(rt, err)
		}
		_, err = testhooks.FanOut(ctx, eng)
		require.NoError(rt, err)

		// The model: per sink, per key, the committed emits that match.
		type cell struct {
			count int
			relay bool
			typ   notifytype.EventType
		}
		want := map[string]*cell{}
		wantUnkeyed := map[string]int{} // sink/type: rows
		for _, p := range plans {
			if !p.commit {
				continue
			}
			for _, e := range p.events {
				for _, s := range world {
					if !s.matches(e.scope, e.ev) {
						continue
					}
					if key(e) == "" {
						wantUnkeyed[fmt.Sprintf("%d/%s", s.id, e.ev.Type)]++
						continue
					}
					k := fmt.Sprintf("%d/%s", s.id, key(e))
					c := want[k]
					if c == nil {
						c = &cell{typ: e.ev.Type}
						want[k] = c
					}
					c.count++
					c.relay = c.relay || e.ev.Type == host.EventRelayExhausted
				}
			}
		}

		rows, err := pool.Query(ctx, `
			SELECT o.id, o.sink_id, o.dedup_key, o.event_type, o.owner, k.owner,
			       o.count
			FROM switchboard.outbox o JOIN switchboard.sinks k ON k.id = o.sink_id ORDER BY o.id`)
		require.NoError(rt, err)
		got := map[string]bool{}
		gotUnkeyed := map[string]int{}
		for rows.Next() {
			var (
				id, sinkID        int64
				dedup             *string
				typ, owner, sinkO string
				count             int
			)
			require.NoError(rt, rows.Scan(&id, &sinkID, &dedup, &typ, &owner, &sinkO, &count))
			require.Equal(rt, owner, sinkO, "row %d landed on another scope's sink", id)
			k := fmt.Sprintf("%d/", sinkID)
			if dedup == nil {
				gotUnkeyed[fmt.Sprintf("%d/%s", sinkID, typ)]++
				continue
			}
			k += *dedup
			c, ok := want[k]
			require.True(rt, ok, "row %d for %s that no committed emit explains", id, k)
			require.False(rt, got[k], "a second open row for %s", k)
			got[k] = true
			switch {
			case c.relay:
				require.Equal(rt, string(host.EventRelayExhausted), typ, k)
				require.Equal(rt, 1, count, k)
			case c.typ == host.EventTodoDeadLettered:
				require.Equal(rt, 1, count, "the same dead letter counts once: %s", k)
			default:
				require.Equal(rt, c.count, count, "repeats of %s", k)
			}
		}
		require.NoError(rt, rows.Err())
		for k := range want {
			require.True(rt, got[k], "committed emit for %s has no row", k)
		}
		require.Equal(rt, wantUnkeyed, gotUnkeyed, "unkeyed rows per sink and type")
	})
}
