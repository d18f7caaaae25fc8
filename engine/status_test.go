package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
)

// sinkIDs is the sink ids of a status table, in its order.
func sinkIDs(st []engine.SinkStatus) []int64 {
	ids := make([]int64, len(st))
	for i, s := range st {
		ids[i] = s.SinkID
	}
	return ids
}

// statusWorld is four sinks whose actors are alive: alice's own, her
// team's, bob's own, and one of a team neither is in.
type statusWorld struct {
	w                                   *hosttest.World
	eng                                 *engine.Engine
	alice, bob                          int64
	aliceSink, teamSink, bobSink, other int64
	team                                notifytype.OwnerScope
}

func newStatusWorld(t *testing.T, configure ...func(*engine.Config)) *statusWorld {
	t.Helper()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	s := &statusWorld{w: w, eng: w.Serve(configure...)}
	var ap, bp engine.Principal
	var aliceScope, bobScope notifytype.OwnerScope
	s.alice, ap, aliceScope = w.Human()
	s.bob, bp, bobScope = w.Human()
	outsider, op, _ := w.Human()
	team := w.F.Team("")
	s.team = hostid.Team(team)
	w.F.Member(team, s.alice, "member")
	w.F.Member(team, s.bob, "owner") // the team's sink is made by its owner
	strangers := w.F.Team("")
	w.F.Member(strangers, outsider, "owner")

	opts := enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.status"}
	s.aliceSink = w.Sink(s.eng, ap, aliceScope, opts)
	s.teamSink = w.Sink(s.eng, bp, s.team, opts)
	s.bobSink = w.Sink(s.eng, bp, bobScope, opts)
	s.other = w.Sink(s.eng, op, hostid.Team(strangers), opts)
	for i, scope := range []notifytype.OwnerScope{aliceScope, s.team, bobScope, hostid.Team(strangers)} {
		w.Emit(s.eng, deadLetterOf(scope, int64(i+1)))
	}
	for range 4 {
		require.Equal(t, "delivered", w.Wait().State)
	}
	// The actors live on for ActorIdleAfter (a minute of wall time).
	require.Equal(t, []int64{s.aliceSink, s.teamSink, s.bobSink, s.other}, sinkIDs(s.eng.AllSinkStatuses()))
	return s
}

// TestStatusOfReturnsOnlyTheAskedSinks: StatusOf reads the named sinks'
// actors, each once, in sink id order, and leaves out ids with no actor.
func TestStatusOfReturnsOnlyTheAskedSinks(t *testing.T) {
	t.Parallel()
	s := newStatusWorld(t)
	require.Equal(t, []int64{s.aliceSink, s.bobSink}, sinkIDs(s.eng.SinkStatusesOfForTest(s.bobSink, 1<<40, s.aliceSink, s.bobSink)))
	require.Empty(t, s.eng.SinkStatusesOfForTest())
	require.Empty(t, s.eng.SinkStatusesOfForTest(1<<40))
	require.Equal(t, []int64{s.teamSink, s.other}, sinkIDs(s.eng.SinkStatusesOfForTest(s.other, s.teamSink)))
}

// TestStatusForIsScoped: a human sees the actors of their own scope's and
// their teams' sinks only (D26), an endpoint those of its own scope when
// its grant has the notifications verbs; with a Directory that cannot
// list teams (the filtering path) the answers are the same.
func TestStatusForIsScoped(t *testing.T) {
	t.Parallel()
	for name, configure := range map[string]func(*engine.Config){
		"team lister": func(*engine.Config) {},
		// Embedding hides MemberTeams: the engine filters every actor.
		"plain directory": func(c *engine.Config) {
			c.Directory = struct{ engine.Directory }{host.NewDirectory(c.Pool)}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStatusWorld(t, configure)
			statusFor := func(p engine.Principal) []int64 {
				t.Helper()
				st, err := s.eng.SinkStatuses(s.w.Ctx, p)
				require.NoError(t, err)
				require.NotNil(t, st, "an empty table, not null")
				return sinkIDs(st)
			}
			require.Equal(t, []int64{s.aliceSink, s.teamSink}, statusFor(engine.HumanPrincipal(hostid.String(s.alice))))
			require.Equal(t, []int64{s.teamSink, s.bobSink}, statusFor(engine.HumanPrincipal(hostid.String(s.bob))))
			loner, _, _ := s.w.Human()
			require.Empty(t, statusFor(engine.HumanPrincipal(hostid.String(loner))), "no sinks, no teams: nothing")
			require.Empty(t, statusFor(engine.Principal{}), "no acting human: nothing")

			ep := s.w.F.Endpoint(hosttest.EndpointOpts{Owner: s.team, Human: s.alice})
			require.Equal(t, []int64{s.teamSink}, statusFor(engine.EndpointPrincipal(ep, hostid.String(s.alice), s.team, notifytype.GrantNotifications)),
				"an endpoint sees its own scope only")
			require.Empty(t, statusFor(engine.EndpointPrincipal(ep, hostid.String(s.alice), s.team, notifytype.GrantTodos)),
				"an endpoint without the notifications verbs sees nothing")
		})
	}
}
