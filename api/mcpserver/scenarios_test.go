package mcpserver_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/mcpserver"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/pages"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/sinktest"
)

func TestSinkVerbsOffUntilGranted(t *testing.T) {
	t.Parallel()
	// Scenario: Sink verbs are off until granted
	w := newWorld(t)
	human, scope := w.person()
	w.sink(human, scope, "https://push.example.net")
	_, cred := w.vend(t, human, scope) // the default grant: todos and rules
	cs := w.connect(t, cred)

	names := toolNames(t, cs)
	require.Equal(t, []string{"add_webhook_rule", "claim", "complete", "fail", "heartbeat", "list_queues", "list_webhooks",
		"set_webhook_rules", "test_webhook_rules", "update_webhook_rule"}, names, "todos and rules")
	require.NotContains(t, names, mcpserver.ToolListSinks)

	e := refused(t, cs, mcpserver.ToolListSinks, map[string]any{})
	require.Equal(t, notifytype.CodeForbidden, e.Code)
	require.Contains(t, e.Message, "notifications")

	// Every other verb of the family is refused the same way, and nothing
	// is written.
	for name, args := range map[string]any{
		mcpserver.ToolSetSink:              map[string]any{"name": "phone", "kind": "gotify", "connection_id": 1},
		mcpserver.ToolDeleteSink:           map[string]any{"id": 1},
		mcpserver.ToolTestSink:             map[string]any{"id": 1},
		mcpserver.ToolSetSinkSubscriptions: map[string]any{"sink_id": 1, "subscriptions": []any{}},
	} {
		require.Equal(t, notifytype.CodeForbidden, refused(t, cs, name, args).Code, name)
	}
	require.Equal(t, 1, w.count(t, `SELECT count(*) FROM switchboard.sinks`))
	require.Equal(t, 1, w.count(t, `SELECT count(*) FROM switchboard.subscriptions`))
}

func TestGrantedEndpointAddsSubscription(t *testing.T) {
	t.Parallel()
	// Scenario: Granted endpoint adds a subscription
	w := newWorld(t)
	human, scope := w.person()
	forge := w.F.Queue(scope, "forge")
	sink := w.sink(human, scope, "https://push.example.net", engine.EventAgentNotify)
	endpoint, cred := w.vend(t, human, scope, notifytype.GrantTodos, notifytype.GrantNotifications)
	cs := w.connect(t, cred)

	out := succeeds[mcpserver.SetSinkSubscriptionsOut](t, cs, mcpserver.ToolSetSinkSubscriptions, map[string]any{
		"sink_id":       sink,
		"subscriptions": []any{map[string]any{"event_types": []string{"todo.dead_lettered"}, "queues": []int64{forge}}},
	})
	require.Len(t, out.Subscriptions, 1)
	got := out.Subscriptions[0]
	require.Equal(t, []string{"todo.dead_lettered"}, got.EventTypes)
	require.Equal(t, []int64{forge}, got.Queues)
	require.Equal(t, endpoint, got.CreatedByEndpointID)
	require.Equal(t, human, got.CreatedByHumanID)

	// The stored row records the endpoint and its accountable human, and
	// replaced the sink's earlier subscription.
	var (
		types   []string
		queues  []int64
		byHuman string
		byEndpt int64
	)
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `
		SELECT event_types, queue_ids, created_by_human_id, created_by_endpoint_id
		FROM switchboard.subscriptions WHERE sink_id = $1`, sink).Scan(&types, &queues, &byHuman, &byEndpt))
	require.Equal(t, []string{"todo.dead_lettered"}, types)
	require.Equal(t, []int64{forge}, queues)
	require.Equal(t, hostid.String(human), byHuman)
	require.Equal(t, endpoint, byEndpt)

	// Another owner's sink is not_found, and is left as it was.
	other, otherScope := w.person()
	theirs := w.sink(other, otherScope, "https://push.example.org")
	before := w.TableJSON("subscriptions")
	e := refused(t, cs, mcpserver.ToolSetSinkSubscriptions, map[string]any{
		"sink_id":       theirs,
		"subscriptions": []any{map[string]any{"event_types": []string{"todo.dead_lettered"}}},
	})
	require.Equal(t, notifytype.CodeNotFound, e.Code)
	require.Equal(t, before, w.TableJSON("subscriptions"))

	// So is every other verb naming it.
	for _, name := range []string{mcpserver.ToolDeleteSink, mcpserver.ToolTestSink} {
		require.Equal(t, notifytype.CodeNotFound, refused(t, cs, name, map[string]any{"id": theirs}).Code, name)
	}
	require.Equal(t, notifytype.CodeNotFound,
		refused(t, cs, mcpserver.ToolSetSink, map[string]any{"id": theirs, "enabled": false}).Code)
	listed := succeeds[mcpserver.ListSinksOut](t, cs, mcpserver.ToolListSinks, map[string]any{})
	require.Len(t, listed.Sinks, 1)
	require.Equal(t, sink, listed.Sinks[0].ID)
}

func TestAgentPagingOffByDefault(t *testing.T) {
	t.Parallel()
	// Scenario: Agent paging is off by default
	w := newWorld(t)
	human, scope := w.person()
	w.sink(human, scope, "https://push.example.net", engine.EventAgentNotify)

	for _, grants := range [][]notifytype.Grant{
		nil, // the default grant
		{notifytype.GrantTodos, notifytype.GrantRules, notifytype.GrantNotifications},
	} {
		_, cred := w.vend(t, human, scope, grants...)
		cs := w.connect(t, cred)
		require.NotContains(t, toolNames(t, cs), mcpserver.ToolNotifyOwner)
		e := refused(t, cs, mcpserver.ToolNotifyOwner, map[string]any{"title": "device QA needed on build 812"})
		require.Equal(t, notifytype.CodeForbidden, e.Code)
		require.Contains(t, e.Message, "notify_owner")
	}
	require.Zero(t, w.count(t, `SELECT count(*) FROM switchboard.outbox`))
}

func TestGrantedAgentPagesOwner(t *testing.T) {
	t.Parallel()
	// Scenario: Granted agent pages its owner
	w := newWorld(t)
	gotify := sinktest.NewServer(t, nil)
	w.Serve()
	human, scope := w.person()
	sink := w.sink(human, scope, gotify.URL, engine.EventAgentNotify)

	// The owner has todos in flight: one claimed by another endpoint, one
	// pending.
	queue := w.F.Queue(scope, "builds")
	w.F.Todo(hosttest.TodoOpts{Queue: queue, Title: "build 812"})
	w.F.Todo(hosttest.TodoOpts{Queue: queue, Title: "build 813"})
	worker, _ := w.vend(t, human, scope)
	_, ok, err := w.deps.Todos.Claim(w.Ctx, worker, queue)
	require.NoError(t, err)
	require.True(t, ok)
	before := w.TableJSON("todos")

	_, cred := w.vend(t, human, scope, notifytype.GrantTodos, notifytype.GrantNotifyOwner)
	cs := w.connect(t, cred)
	require.Contains(t, toolNames(t, cs), mcpserver.ToolNotifyOwner)
	out := succeeds[mcpserver.NotifyOwnerOut](t, cs, mcpserver.ToolNotifyOwner, map[string]any{"title": "device QA needed on build 812"})
	require.True(t, out.Accepted)

	a := w.Wait()
	require.Equal(t, sink, a.SinkID)
	require.Equal(t, engine.EventAgentNotify, a.EventType)
	require.Equal(t, "delivered", a.State)
	_, err = w.Settle()
	require.NoError(t, err)

	reqs := gotify.Requests()
	require.Len(t, reqs, 1, "one message arrives")
	require.Equal(t, "/message", reqs[0].Path)
	var msg struct {
		Title string `json:"title"`
	}
	require.NoError(t, json.Unmarshal(reqs[0].Body, &msg))
	require.Equal(t, "Agent page: device QA needed on build 812", msg.Title)

	require.Equal(t, before, w.TableJSON("todos"), "no todo changed state")
}

func TestSetSinkRefusalsMatchTheHumanSurfaces(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	admin, personal := w.person()
	team := hostid.Team(w.F.Team(""))
	w.F.Member(hostid.Number(team.ID), admin, "admin")
	asAdmin := engine.HumanPrincipal(hostid.String(admin))
	personalConn, err := w.eng.CreateConnection(w.Ctx, asAdmin, engine.ConnectionInput{
		Owner: personal, Kind: engine.KindGotify, Name: "mine", BaseURL: "https://push.example.net",
		Secret: notifytype.NewSecret(gotifyToken),
	})
	require.NoError(t, err)
	teamConn, err := w.eng.CreateConnection(w.Ctx, asAdmin, engine.ConnectionInput{
		Owner: team, Kind: engine.KindGotify, Name: "ours", BaseURL: "https://push.example.org",
		Secret: notifytype.NewSecret(gotifyToken),
	})
	require.NoError(t, err)
	_, cred := w.vend(t, admin, team, notifytype.GrantNotifications)
	cs := w.connect(t, cred)

	cases := []struct {
		name   string
		args   map[string]any
		human  engine.SinkInput // the same input through the service the web UI and REST API call
		code   notifytype.Code
		field  string
		scheme string
		// agentField, when set, is the agent's refusal where it differs
		// from the human's: invalid_argument on that field.
		agentField string
	}{
		{
			name:  "cross-scope connection",
			args:  map[string]any{"name": "phone", "kind": "gotify", "connection_id": personalConn.ID},
			human: engine.SinkInput{Owner: team, Name: "phone", Kind: "gotify", ConnectionID: personalConn.ID},
			code:  notifytype.CodeForbidden, field: "connection_id",
			// REQ-2's scenario answers a human forbidden; an agent named
			// the id, so its argument is wrong (issue 19 item 14).
			agentField: "connection_id",
		},
		{
			name: "bad option",
			args: map[string]any{"name": "phone", "kind": "gotify", "connection_id": teamConn.ID,
				"options": map[string]any{"priorities": map[string]any{"low": 99}}},
			human: engine.SinkInput{Owner: team, Name: "phone", Kind: "gotify", ConnectionID: teamConn.ID,
				Options: json.RawMessage(`{"priorities":{"low":99}}`)},
			code: notifytype.CodeInvalidArgument, field: "options.priorities.low",
		},
		{
			name:  "unknown kind",
			args:  map[string]any{"name": "phone", "kind": "pager", "connection_id": teamConn.ID},
			human: engine.SinkInput{Owner: team, Name: "phone", Kind: "pager", ConnectionID: teamConn.ID},
			code:  notifytype.CodeInvalidArgument, field: "kind",
		},
		{
			name:  "budget out of bounds",
			args:  map[string]any{"name": "phone", "kind": "gotify", "connection_id": teamConn.ID, "budget_per_hour": 100000},
			human: engine.SinkInput{Owner: team, Name: "phone", Kind: "gotify", ConnectionID: teamConn.ID, BudgetPerHour: 100000},
			code:  notifytype.CodeInvalidArgument, field: "budget_per_hour",
		},
	}
	for _, tc := range cases {
		e := refused(t, cs, mcpserver.ToolSetSink, tc.args)
		_, err := w.eng.CreateSink(w.Ctx, asAdmin, tc.human)
		he, ok := notifytype.AsError(err)
		require.True(t, ok, tc.name)
		require.Equal(t, tc.code, he.Code, tc.name)
		require.Equal(t, tc.field, he.Field, tc.name)
		if tc.agentField != "" {
			require.Equal(t, notifytype.CodeInvalidArgument, e.Code, tc.name)
			require.Equal(t, tc.agentField, e.Field, tc.name)
			continue
		}
		require.Equal(t, he.Code, e.Code, tc.name)
		require.Equal(t, he.Field, e.Field, tc.name)
	}

	// Arguments outside the tool's schema are refused before the engine.
	e := refused(t, cs, mcpserver.ToolSetSink, map[string]any{"nmae": "phone"})
	require.Equal(t, notifytype.CodeInvalidArgument, e.Code)
	require.Equal(t, "nmae", e.Field)

	require.Zero(t, w.count(t, `SELECT count(*) FROM switchboard.sinks`), "nothing stored")

	// A good sink saves in the team's scope, recording the endpoint; a bad
	// change to it stores nothing.
	created := succeeds[mcpserver.SinkOut](t, cs, mcpserver.ToolSetSink,
		map[string]any{"name": "phone", "kind": "gotify", "connection_id": teamConn.ID})
	require.Equal(t, team.String(), created.Owner)
	require.Equal(t, admin, created.UpdatedByHumanID)
	require.NotZero(t, created.UpdatedByEndpointID)
	require.Equal(t, map[string]any{"priorities": map[string]any{"low": 2.0, "normal": 5.0, "high": 8.0}}, created.Options)
	before := w.TableJSON("sinks")
	e = refused(t, cs, mcpserver.ToolSetSink, map[string]any{"id": created.ID, "connection_id": personalConn.ID})
	require.Equal(t, notifytype.CodeInvalidArgument, e.Code)
	require.Equal(t, "connection_id", e.Field)
	e = refused(t, cs, mcpserver.ToolSetSink, map[string]any{"id": created.ID, "kind": "apprise"})
	require.Equal(t, notifytype.CodeInvalidArgument, e.Code)
	require.Equal(t, "kind", e.Field)
	require.Equal(t, before, w.TableJSON("sinks"))

	// Disable, test and delete go through the same service.
	changed := succeeds[mcpserver.SinkOut](t, cs, mcpserver.ToolSetSink, map[string]any{"id": created.ID, "enabled": false})
	require.False(t, changed.Enabled)
	deleted := succeeds[mcpserver.DeleteSinkOut](t, cs, mcpserver.ToolDeleteSink, map[string]any{"id": created.ID})
	require.True(t, deleted.Deleted)
	require.Zero(t, w.count(t, `SELECT count(*) FROM switchboard.sinks`))
	require.NotContains(t, w.Logs.String(), gotifyToken)
}

func TestTeamMemberEndpointCannotWrite(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	owner, _ := w.person()
	member, _ := w.person()
	team := hostid.Team(w.F.Team(""))
	w.F.Member(hostid.Number(team.ID), owner, "owner")
	w.F.Member(hostid.Number(team.ID), member, "member")
	sink := w.sink(owner, team, "https://push.example.net")
	_, cred := w.endpointAs(t, team, member, "notifications")
	cs := w.connect(t, cred)

	listed := succeeds[mcpserver.ListSinksOut](t, cs, mcpserver.ToolListSinks, map[string]any{})
	require.Len(t, listed.Sinks, 1, "a member may list")

	before := w.TableJSON("sinks") + w.TableJSON("subscriptions")
	for name, args := range map[string]any{
		mcpserver.ToolSetSink:              map[string]any{"id": sink, "enabled": false},
		mcpserver.ToolDeleteSink:           map[string]any{"id": sink},
		mcpserver.ToolTestSink:             map[string]any{"id": sink},
		mcpserver.ToolSetSinkSubscriptions: map[string]any{"sink_id": sink, "subscriptions": []any{}},
	} {
		require.Equal(t, notifytype.CodeForbidden, refused(t, cs, name, args).Code, name)
	}
	e := refused(t, cs, mcpserver.ToolSetSink, map[string]any{"name": "mine", "kind": "gotify", "connection_id": 1})
	require.Equal(t, notifytype.CodeForbidden, e.Code)
	require.Equal(t, before, w.TableJSON("sinks")+w.TableJSON("subscriptions"))
}

func TestNotifyOwnerSixthCallRateLimited(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	w.sink(human, scope, "https://push.example.net", engine.EventAgentNotify)
	_, cred := w.vend(t, human, scope, notifytype.GrantNotifyOwner)
	cs := w.connect(t, cred)

	for i := range pages.AgentPagesPerHour {
		succeeds[mcpserver.NotifyOwnerOut](t, cs, mcpserver.ToolNotifyOwner, map[string]any{"title": "page", "severity": "high"})
		require.Equal(t, i+1, w.count(t, `SELECT count(*) FROM switchboard.outbox WHERE event_type = 'agent.notify'`))
		if i == 0 {
			w.Clock.Advance(10 * time.Minute)
		}
	}
	e := refused(t, cs, mcpserver.ToolNotifyOwner, map[string]any{"title": "one too many"})
	require.Equal(t, notifytype.CodeRateLimited, e.Code)
	require.Equal(t, 5, w.count(t, `SELECT count(*) FROM switchboard.outbox`), "no extra outbox row")
	// Issue 19 item 14: the refusal says when to retry: when the first
	// page, 10 minutes ago, leaves the hour.
	require.Equal(t, 50*60+1, e.RetryAfterSeconds)
	require.Contains(t, e.Message, "try again in 3001 s")

	// Bad input is refused by the engine, naming the field.
	w.Clock.Advance(50*time.Minute + time.Second)
	e = refused(t, cs, mcpserver.ToolNotifyOwner, map[string]any{"title": "page", "severity": "urgent"})
	require.Equal(t, notifytype.CodeInvalidArgument, e.Code)
	require.Equal(t, "severity", e.Field)
	e = refused(t, cs, mcpserver.ToolNotifyOwner, map[string]any{"title": "page", "todo_id": 999999})
	require.Equal(t, notifytype.CodeNotFound, e.Code)

	// An hour on, the endpoint may page again.
	succeeds[mcpserver.NotifyOwnerOut](t, cs, mcpserver.ToolNotifyOwner, map[string]any{"title": "page"})
	require.Equal(t, 6, w.count(t, `SELECT count(*) FROM switchboard.outbox`))
}

func TestTodosVerbsDeadLetterEndToEnd(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	gotify := sinktest.NewServer(t, nil)
	w.Serve()
	human, scope := w.person()
	sink := w.sink(human, scope, gotify.URL, host.EventTodoDeadLettered)
	queue := w.F.Queue(scope, "forge")
	todo := w.F.Todo(hosttest.TodoOpts{Queue: queue, Title: "fix the flaky test", AttemptCap: 1})
	_, cred := w.vend(t, human, scope)
	cs := w.connect(t, cred)

	claimed := succeeds[mcpserver.ClaimOut](t, cs, mcpserver.ToolClaim, map[string]any{"queue_id": queue})
	require.True(t, claimed.Claimed)
	require.Equal(t, todo, claimed.Todo.ID)
	require.Equal(t, string(host.TodoClaimed), claimed.Todo.State)
	require.NotNil(t, claimed.Todo.LeaseExpiresAt)

	empty := succeeds[mcpserver.ClaimOut](t, cs, mcpserver.ToolClaim, map[string]any{"queue_id": queue})
	require.False(t, empty.Claimed)
	require.Nil(t, empty.Todo)

	beat := succeeds[mcpserver.TodoOut](t, cs, mcpserver.ToolHeartbeat, map[string]any{"todo_id": todo})
	require.Equal(t, string(host.TodoClaimed), beat.State)

	failed := succeeds[mcpserver.TodoOut](t, cs, mcpserver.ToolFail, map[string]any{"todo_id": todo, "summary": "gave up"})
	require.Equal(t, string(host.TodoDead), failed.State)
	require.Equal(t, string(host.CauseFailAtCap), failed.DeadReason)
	// The serving engine fans the event out and delivers it; count once it
	// has (a fan-out of this test's own could find the event taken by the
	// engine's, not yet committed).
	a := w.Wait()
	require.Equal(t, sink, a.SinkID)
	require.Equal(t, "delivered", a.State)
	require.Equal(t, 1, w.count(t, `SELECT count(*) FROM switchboard.outbox WHERE sink_id = $1 AND event_type = 'todo.dead_lettered'`, sink))
	require.Len(t, gotify.Requests(), 1)
	require.Contains(t, string(gotify.Requests()[0].Body), "fix the flaky test")

	// The claim is over: the verbs answer not_found for it.
	e := refused(t, cs, mcpserver.ToolHeartbeat, map[string]any{"todo_id": todo})
	require.Equal(t, notifytype.CodeNotFound, e.Code)

	// complete ends another todo as done; another owner's queue is not_found.
	next := w.F.Todo(hosttest.TodoOpts{Queue: queue, Title: "next"})
	claimed = succeeds[mcpserver.ClaimOut](t, cs, mcpserver.ToolClaim, map[string]any{"queue_id": queue})
	require.Equal(t, next, claimed.Todo.ID)
	done := succeeds[mcpserver.TodoOut](t, cs, mcpserver.ToolComplete, map[string]any{"todo_id": next, "summary": "fixed"})
	require.Equal(t, string(host.TodoDone), done.State)
	_, otherScope := w.person()
	theirs := w.F.Queue(otherScope, "forge")
	require.Equal(t, notifytype.CodeNotFound, refused(t, cs, mcpserver.ToolClaim, map[string]any{"queue_id": theirs}).Code)
}

// Issue 19 item 14: test_sink's limit (6 a minute per sink) says when to
// retry: when the first test of the minute leaves it.
func TestTestSinkLimitSaysWhenToRetry(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	// A loopback destination the guard refuses at once: a test is
	// recorded, and counted, whatever its outcome.
	sink := w.sink(human, scope, "https://127.0.0.1:1")
	_, cred := w.vend(t, human, scope, notifytype.GrantNotifications)
	cs := w.connect(t, cred)
	for i := range engine.SendTestsPerMinute {
		succeeds[mcpserver.TestSinkOut](t, cs, mcpserver.ToolTestSink, map[string]any{"id": sink})
		if i == 0 {
			w.Clock.Advance(20 * time.Second)
		}
	}
	e := refused(t, cs, mcpserver.ToolTestSink, map[string]any{"id": sink})
	require.Equal(t, notifytype.CodeRateLimited, e.Code)
	require.Equal(t, 41, e.RetryAfterSeconds, "the minute counts its first instant: the next test is allowed just after 40 s")
	require.Contains(t, e.Message, "try again in 41 s")
	w.Clock.Advance(40 * time.Second)
	require.Equal(t, notifytype.CodeRateLimited, refused(t, cs, mcpserver.ToolTestSink, map[string]any{"id": sink}).Code, "not before")
	w.Clock.Advance(time.Second)
	succeeds[mcpserver.TestSinkOut](t, cs, mcpserver.ToolTestSink, map[string]any{"id": sink})
}
