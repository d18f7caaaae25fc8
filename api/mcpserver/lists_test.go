package mcpserver_test

import (
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/mcpserver"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
)

// Issue 19 item 14: agents could not discover ids. The list verbs answer
// exactly what the endpoint may name: the queues claim takes, its scope's
// webhooks with their rules, its scope's connections; never a secret.
func TestListVerbsDiscoverIds(t *testing.T) {
	t.Parallel()
	w := rulesWorld(t)
	human, scope := w.person()
	other, otherScope := w.person()
	team := hostid.Team(w.F.Team(""))
	w.F.Member(hostid.Number(team.ID), human, "member")
	p, theirP := engine.HumanPrincipal(hostid.String(human)), engine.HumanPrincipal(hostid.String(other))

	mine := w.F.Queue(scope, "forge")
	teamQueue := w.F.Queue(team, "team-forge")
	w.F.Todo(hosttest.TodoOpts{Queue: mine, Title: "build 812"})
	w.F.Queue(otherScope, "theirs")

	canary := "canary" + rand.Text()
	conn := func(p engine.Principal, owner notifytype.OwnerScope, kind, name string) int64 {
		t.Helper()
		c, err := w.eng.CreateConnection(w.Ctx, p, engine.ConnectionInput{
			Owner: owner, Kind: kind, Name: name, BaseURL: "https://push.example.net", Secret: notifytype.NewSecret(canary + name),
		})
		require.NoError(t, err)
		return c.ID
	}
	gotify := conn(p, scope, engine.KindGotify, "phone")
	cairn := conn(p, scope, engine.KindCairn, "artifacts")
	conn(theirP, otherScope, engine.KindGotify, "theirs")

	hook, hookSecret, err := w.deps.Webhooks.Create(w.Ctx, p, host.WebhookInput{Owner: scope, Name: "forge", TrustedSenders: []string{"octocat"}})
	require.NoError(t, err)
	_, err = w.deps.Webhooks.SetRules(w.Ctx, p, hook.ID, []host.RuleInput{
		{Name: "inbox", Expr: ".issue != null", Action: host.RuleAction{Queue: mine}},
		{Name: "bots", Expr: `.sender.login == "dependabot"`, Action: host.RuleAction{Drop: true}},
	})
	require.NoError(t, err)
	_, _, err = w.deps.Webhooks.Create(w.Ctx, theirP, host.WebhookInput{Owner: otherScope, Name: "theirs"})
	require.NoError(t, err)

	_, cred := w.vend(t, human, scope, notifytype.Grants...)
	cs := w.connect(t, cred)

	queues := succeeds[mcpserver.ListQueuesOut](t, cs, mcpserver.ToolListQueues, map[string]any{})
	require.Equal(t, []mcpserver.QueueOut{
		{ID: mine, Owner: scope.String(), Name: "forge", Pending: 1},
		{ID: teamQueue, Owner: team.String(), Name: "team-forge"},
	}, queues.Queues, "its scope's queues first, then its human's teams'; no other")
	for _, q := range queues.Queues {
		succeeds[mcpserver.ClaimOut](t, cs, mcpserver.ToolClaim, map[string]any{"queue_id": q.ID}) // every listed id is claimable
	}

	hooks := succeeds[mcpserver.ListWebhooksOut](t, cs, mcpserver.ToolListWebhooks, map[string]any{})
	require.Len(t, hooks.Webhooks, 1, "its scope's webhooks only")
	got := hooks.Webhooks[0]
	require.Equal(t, hook.ID, got.ID)
	require.Equal(t, []string{"octocat"}, got.TrustedSenders)
	require.Len(t, got.Rules, 2)
	require.Equal(t, "inbox", got.Rules[0].Name)
	require.Equal(t, mine, got.Rules[0].Action.Queue)
	require.True(t, got.Rules[1].Action.Drop)

	conns := succeeds[mcpserver.ListConnectionsOut](t, cs, mcpserver.ToolListConnections, map[string]any{})
	var ids []int64
	for _, c := range conns.Connections {
		ids = append(ids, c.ID)
		require.True(t, c.HasSecret)
		require.Equal(t, scope.String(), c.Owner)
	}
	require.ElementsMatch(t, []int64{gotify, cairn}, ids, "its scope's connections only")
	// The listed ids are the ones set_sink takes.
	succeeds[mcpserver.SinkOut](t, cs, mcpserver.ToolSetSink, map[string]any{"name": "phone", "kind": "gotify", "connection_id": gotify})

	// No secret is ever listed, nor logged.
	for _, tool := range []string{mcpserver.ToolListQueues, mcpserver.ToolListWebhooks, mcpserver.ToolListConnections, mcpserver.ToolListSinks} {
		out := text(call(t, cs, tool, map[string]any{}))
		require.NotContains(t, out, canary, tool)
		require.NotContains(t, out, hookSecret.Reveal(), tool)
	}
	require.NotContains(t, w.Logs.String(), canary)
	require.NotContains(t, w.Logs.String(), hookSecret.Reveal())
}

// The list verbs follow the endpoint's scope and grant as the other verbs
// of their family do.
func TestListVerbsFollowScopeAndGrant(t *testing.T) {
	t.Parallel()
	w := rulesWorld(t)
	human, personal := w.person()
	team := hostid.Team(w.F.Team(""))
	w.F.Member(hostid.Number(team.ID), human, "member")
	w.F.Queue(personal, "mine")
	teamQueue := w.F.Queue(team, "ours")
	personalHook, _, err := w.deps.Webhooks.Create(w.Ctx, engine.HumanPrincipal(hostid.String(human)), host.WebhookInput{Owner: personal, Name: "mine"})
	require.NoError(t, err)

	// A team endpoint lists its team's queues only, and a member may read.
	_, cred := w.endpointAs(t, team, human, string(notifytype.GrantTodos), string(notifytype.GrantRules), string(notifytype.GrantNotifications))
	cs := w.connect(t, cred)
	queues := succeeds[mcpserver.ListQueuesOut](t, cs, mcpserver.ToolListQueues, map[string]any{})
	require.Len(t, queues.Queues, 1)
	require.Equal(t, teamQueue, queues.Queues[0].ID)
	hooks := succeeds[mcpserver.ListWebhooksOut](t, cs, mcpserver.ToolListWebhooks, map[string]any{})
	require.Empty(t, hooks.Webhooks, "the human's personal webhook %d is not the team endpoint's", personalHook.ID)
	conns := succeeds[mcpserver.ListConnectionsOut](t, cs, mcpserver.ToolListConnections, map[string]any{})
	require.Empty(t, conns.Connections)

	// Outside the grant, forbidden.
	_, cred = w.vend(t, human, personal, notifytype.GrantNotifyOwner)
	cs = w.connect(t, cred)
	for _, tool := range []string{mcpserver.ToolListQueues, mcpserver.ToolListWebhooks, mcpserver.ToolListConnections} {
		require.Equal(t, notifytype.CodeForbidden, refused(t, cs, tool, map[string]any{}).Code, tool)
	}
}
