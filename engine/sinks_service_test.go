package engine_test

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/apprise"
)

func TestCreateSinkStoresNormalisedOptions(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, p := b.human()
	owner := hostid.Human(h)
	conn := b.gotifyConnection(t, p, owner)

	s, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{
		Owner: owner, Name: "phone", Kind: engine.KindGotify, ConnectionID: conn,
		Options: raw(`{"priorities":{"high":10}}`),
	})
	require.NoError(t, err)
	require.True(t, s.Enabled)
	require.Equal(t, engine.BudgetPerHourDefault, s.BudgetPerHour)
	require.Equal(t, engine.BudgetBurstDefault, s.BudgetBurst)
	require.JSONEq(t, `{"priorities":{"low":2,"normal":5,"high":10}}`, string(s.Options))
	require.Equal(t, hostid.String(h), s.UpdatedByHumanID)
	require.Zero(t, s.UpdatedByEndpointID)

	got, err := b.eng.GetSink(b.ctx, p, s.ID)
	require.NoError(t, err)
	require.JSONEq(t, string(s.Options), string(got.Options))
	list, err := b.eng.ListSinks(b.ctx, p, owner)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, s.ID, list[0].ID)
}

func TestStatefulAppriseSink(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, p := b.human()
	owner := hostid.Human(h)
	stateful := b.appriseConnection(t, b.eng, p, owner, `{"authorization":"Basic eA=="}`)
	stateless := b.appriseConnection(t, b.eng, p, owner, `{"urls":["tgram://bot/chat"]}`)

	s, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{
		Owner: owner, Name: "ops", Kind: engine.KindApprise, ConnectionID: stateful, Options: raw(`{"config_key":"ops"}`),
	})
	require.NoError(t, err)
	require.JSONEq(t, `{"config_key":"ops","types":{"low":"info","normal":"warning","high":"failure"}}`, string(s.Options))

	_, err = b.eng.CreateSink(b.ctx, p, engine.SinkInput{
		Owner: owner, Name: "both", Kind: engine.KindApprise, ConnectionID: stateless, Options: raw(`{"config_key":"ops"}`),
	})
	requireRefusal(t, err, notifytype.CodeInvalidArgument, "options.config_key")
	_, err = b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: owner, Name: "neither", Kind: engine.KindApprise, ConnectionID: stateful})
	requireRefusal(t, err, notifytype.CodeInvalidArgument, "options.config_key")

	s2, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: owner, Name: "urls", Kind: engine.KindApprise, ConnectionID: stateless})
	require.NoError(t, err)
	require.JSONEq(t, `{"types":{"low":"info","normal":"warning","high":"failure"}}`, string(s2.Options))
	require.Equal(t, 2, b.count(t, "sinks"))
}

func TestGenericHTTPSchemeRefused(t *testing.T) {
	t.Parallel()
	// Scenario: Generic HTTP scheme refused
	b := setupService(t)
	h, p := b.human()
	owner := hostid.Human(h)
	const url = "json://hooks.example.net/collect?token=leak-me"

	_, err := b.eng.CreateConnection(b.ctx, p, engine.ConnectionInput{
		Owner: owner, Kind: engine.KindApprise, Name: "apprise", BaseURL: "https://apprise.example.net",
		Secret: notifytype.NewSecret(`{"urls":["tgram://bot/chat","` + url + `"]}`),
	})
	e := requireRefusal(t, err, notifytype.CodeForbiddenScheme, "")
	require.Equal(t, "json", e.Scheme)
	require.Contains(t, err.Error(), "json")
	require.NotContains(t, err.Error(), "hooks.example.net")
	require.NotContains(t, err.Error(), "leak-me")
	require.Zero(t, b.count(t, "connections"))
	require.Zero(t, b.count(t, "sinks"))

	// The sink's save checks again: a connection stored while the operator
	// allowed json is refused under the default allowlist, and no sink is
	// stored.
	lax := b.engine(t, func(c *engine.Config) {
		c.AppriseSchemesAllowed = append(slices.Clone(apprise.DefaultAllowedSchemes), "json", "form")
	})
	conn := b.appriseConnection(t, lax, p, owner, `{"urls":["`+url+`"]}`)
	_, err = b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: owner, Name: "hooks", Kind: engine.KindApprise, ConnectionID: conn})
	e = requireRefusal(t, err, notifytype.CodeForbiddenScheme, "")
	require.Equal(t, "json", e.Scheme)
	require.NotContains(t, err.Error(), "hooks.example.net")
	require.Zero(t, b.count(t, "sinks"))
}

func TestCrossScopeConnection(t *testing.T) {
	t.Parallel()
	// Scenario: Cross-scope connection
	b := setupService(t)
	admin, p := b.human()
	team := b.f.Team("")
	b.f.Member(team, admin, "admin")
	personal := b.gotifyConnection(t, p, hostid.Human(admin))

	_, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{
		Owner: hostid.Team(team), Name: "team-phone", Kind: engine.KindGotify, ConnectionID: personal,
	})
	requireRefusal(t, err, notifytype.CodeForbidden, "connection_id")
	require.ErrorIs(t, err, notifytype.ErrForbidden)
	require.Zero(t, b.count(t, "sinks"))

	// A connection of the right scope but another kind, or none at all, is
	// refused the same way.
	teamApprise := b.appriseConnection(t, b.eng, p, hostid.Team(team), "")
	for _, conn := range []int64{teamApprise, 1 << 40} {
		_, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{
			Owner: hostid.Team(team), Name: "team-phone", Kind: engine.KindGotify, ConnectionID: conn,
		})
		requireRefusal(t, err, notifytype.CodeForbidden, "connection_id")
	}

	// Moving a team sink onto the personal connection is refused too.
	teamConn := b.gotifyConnection(t, p, hostid.Team(team))
	s := b.gotifySink(t, p, hostid.Team(team), teamConn, "team-phone")
	_, err = b.eng.UpdateSink(b.ctx, p, s.ID, engine.SinkPatch{ConnectionID: &personal})
	requireRefusal(t, err, notifytype.CodeForbidden, "connection_id")
	got, err := b.eng.GetSink(b.ctx, p, s.ID)
	require.NoError(t, err)
	require.Equal(t, teamConn, got.ConnectionID)
}

func TestSinkBadInput(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, p := b.human()
	owner := hostid.Human(h)
	conn := b.gotifyConnection(t, p, owner)
	apprise := b.appriseConnection(t, b.eng, p, owner, "")
	existing := b.gotifySink(t, p, owner, conn, "taken")

	good := engine.SinkInput{Owner: owner, Name: "phone", Kind: engine.KindGotify, ConnectionID: conn}
	for _, tc := range []struct {
		name  string
		edit  func(*engine.SinkInput)
		field string
	}{
		{"owner missing", func(in *engine.SinkInput) { in.Owner = notifytype.OwnerScope{} }, "owner"},
		{"name empty", func(in *engine.SinkInput) { in.Name = "" }, "name"},
		{"name too long", func(in *engine.SinkInput) { in.Name = strings.Repeat("é", engine.NameMaxLen+1) }, "name"},
		{"name with a control character", func(in *engine.SinkInput) { in.Name = "pho\x07ne" }, "name"},
		{"name with surrounding space", func(in *engine.SinkInput) { in.Name = " phone" }, "name"},
		{"name not UTF-8", func(in *engine.SinkInput) { in.Name = "ph\xffne" }, "name"},
		{"name taken", func(in *engine.SinkInput) { in.Name = "taken" }, "name"},
		{"kind unknown", func(in *engine.SinkInput) { in.Kind = "slack" }, "kind"},
		{"connection missing", func(in *engine.SinkInput) { in.ConnectionID = 0 }, "connection_id"},
		{"options not an object", func(in *engine.SinkInput) { in.Options = raw(`[1]`) }, "options"},
		{"options unknown key", func(in *engine.SinkInput) { in.Options = raw(`{"nope":1}`) }, "options.nope"},
		{"gotify priority out of range", func(in *engine.SinkInput) { in.Options = raw(`{"priorities":{"high":11}}`) }, "options.priorities.high"},
		{"apprise config key malformed", func(in *engine.SinkInput) {
			in.Kind, in.ConnectionID, in.Options = engine.KindApprise, apprise, raw(`{"config_key":"no spaces"}`)
		}, "options.config_key"},
		{"apprise type unknown", func(in *engine.SinkInput) {
			in.Kind, in.ConnectionID, in.Options = engine.KindApprise, apprise, raw(`{"config_key":"ops","types":{"high":"panic"}}`)
		}, "options.types.high"},
		{"budget per hour below the bound", func(in *engine.SinkInput) { in.BudgetPerHour = -1 }, "budget_per_hour"},
		{"budget per hour above the bound", func(in *engine.SinkInput) { in.BudgetPerHour = engine.BudgetPerHourMaxDefault + 1 }, "budget_per_hour"},
		{"budget burst above the bound", func(in *engine.SinkInput) { in.BudgetBurst = engine.BudgetBurstMaxDefault + 1 }, "budget_burst"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := good
			tc.edit(&in)
			_, err := b.eng.CreateSink(b.ctx, p, in)
			requireRefusal(t, err, notifytype.CodeInvalidArgument, tc.field)
			require.Equal(t, 1, b.count(t, "sinks"))
		})
	}

	before, err := b.eng.GetSink(b.ctx, p, existing.ID)
	require.NoError(t, err)
	other := b.gotifySink(t, p, owner, conn, "other")
	for _, tc := range []struct {
		name  string
		patch engine.SinkPatch
		field string
	}{
		{"rename empty", engine.SinkPatch{Name: ptr("")}, "name"},
		{"rename taken", engine.SinkPatch{Name: ptr("other")}, "name"},
		{"connection zero", engine.SinkPatch{ConnectionID: ptr(int64(0))}, "connection_id"},
		{"options invalid", engine.SinkPatch{Options: ptr(raw(`{"priorities":{"urgent":3}}`))}, "options.priorities.urgent"},
		{"budget per hour zero", engine.SinkPatch{BudgetPerHour: ptr(0)}, "budget_per_hour"},
		{"budget burst zero", engine.SinkPatch{BudgetBurst: ptr(0)}, "budget_burst"},
	} {
		t.Run("update "+tc.name, func(t *testing.T) {
			_, err := b.eng.UpdateSink(b.ctx, p, existing.ID, tc.patch)
			requireRefusal(t, err, notifytype.CodeInvalidArgument, tc.field)
			after, err := b.eng.GetSink(b.ctx, p, existing.ID)
			require.NoError(t, err)
			require.Equal(t, before, after)
		})
	}
	require.NotZero(t, other.ID)
}

func TestUpdateSink(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, p := b.human()
	owner := hostid.Human(h)
	conn := b.gotifyConnection(t, p, owner)
	conn2 := b.gotifyConnection(t, p, owner)
	s := b.gotifySink(t, p, owner, conn, "phone")

	u, err := b.eng.UpdateSink(b.ctx, p, s.ID, engine.SinkPatch{
		Name: ptr("pager"), ConnectionID: &conn2, Options: ptr(raw(`{"priorities":{"low":0}}`)),
		BudgetPerHour: ptr(60), BudgetBurst: ptr(20),
	})
	require.NoError(t, err)
	require.Equal(t, "pager", u.Name)
	require.Equal(t, conn2, u.ConnectionID)
	require.JSONEq(t, `{"priorities":{"low":0,"normal":5,"high":8}}`, string(u.Options))
	require.Equal(t, 60, u.BudgetPerHour)
	require.Equal(t, 20, u.BudgetBurst)
	require.False(t, u.UpdatedAt.Before(s.UpdatedAt))

	u, err = b.eng.SetSinkEnabled(b.ctx, p, s.ID, false)
	require.NoError(t, err)
	require.False(t, u.Enabled)
	require.Equal(t, "pager", u.Name)
	u, err = b.eng.SetSinkEnabled(b.ctx, p, s.ID, true)
	require.NoError(t, err)
	require.True(t, u.Enabled)
	require.JSONEq(t, `{"priorities":{"low":0,"normal":5,"high":8}}`, string(u.Options))
}

func TestDisablingAlwaysWorksButEnablingRechecksSchemes(t *testing.T) {
	t.Parallel()
	b := setupService(t, func(c *engine.Config) {
		c.AppriseSchemesAllowed = append(slices.Clone(apprise.DefaultAllowedSchemes), "json", "form")
	})
	h, p := b.human()
	owner := hostid.Human(h)
	conn := b.appriseConnection(t, b.eng, p, owner, `{"urls":["form://hooks.example.net"]}`)
	s, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: owner, Name: "hooks", Kind: engine.KindApprise, ConnectionID: conn})
	require.NoError(t, err)

	// The operator tightens the allowlist: the sink can be switched off,
	// renamed while off, but not switched back on.
	strict := b.engine(t)
	_, err = strict.SetSinkEnabled(b.ctx, p, s.ID, false)
	require.NoError(t, err)
	_, err = strict.UpdateSink(b.ctx, p, s.ID, engine.SinkPatch{Name: ptr("old-hooks")})
	require.NoError(t, err)
	_, err = strict.SetSinkEnabled(b.ctx, p, s.ID, true)
	e := requireRefusal(t, err, notifytype.CodeForbiddenScheme, "")
	require.Equal(t, "form", e.Scheme)
	got, err := strict.GetSink(b.ctx, p, s.ID)
	require.NoError(t, err)
	require.False(t, got.Enabled)
}

func TestTeamRoles(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	team := b.f.Team("")
	scope := hostid.Team(team)
	principals := map[string]engine.Principal{}
	for _, role := range []string{"owner", "admin", "member"} {
		h, p := b.human()
		b.f.Member(team, h, role)
		principals[role] = p
	}
	_, outsider := b.human()
	conn := b.gotifyConnection(t, principals["owner"], scope)
	queue := b.f.Queue(scope, "")

	for _, role := range []string{"owner", "admin"} {
		p := principals[role]
		s := b.gotifySink(t, p, scope, conn, role+"-phone")
		_, err := b.eng.UpdateSink(b.ctx, p, s.ID, engine.SinkPatch{Name: ptr(role + "-pager")})
		require.NoError(t, err)
		_, err = b.eng.AddSubscription(b.ctx, p, s.ID, engine.SubscriptionInput{
			EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}, Queues: []int64{queue},
		})
		require.NoError(t, err)
	}
	sinks, err := b.eng.ListSinks(b.ctx, principals["owner"], scope)
	require.NoError(t, err)
	require.Len(t, sinks, 2)
	sink := sinks[0].ID
	subs, err := b.eng.ListSubscriptions(b.ctx, principals["owner"], sink)
	require.NoError(t, err)
	require.Len(t, subs, 1)

	sub := engine.SubscriptionInput{EventTypes: []notifytype.EventType{engine.EventDigest}}
	writes := map[string]func(engine.Principal) error{
		"create sink": func(p engine.Principal) error {
			_, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: scope, Name: "x", Kind: engine.KindGotify, ConnectionID: conn})
			return err
		},
		"update sink": func(p engine.Principal) error {
			_, err := b.eng.UpdateSink(b.ctx, p, sink, engine.SinkPatch{Name: ptr("y")})
			return err
		},
		"disable sink": func(p engine.Principal) error { _, err := b.eng.SetSinkEnabled(b.ctx, p, sink, false); return err },
		"delete sink":  func(p engine.Principal) error { return b.eng.DeleteSink(b.ctx, p, sink) },
		"set subscriptions": func(p engine.Principal) error {
			_, err := b.eng.SetSubscriptions(b.ctx, p, sink, []engine.SubscriptionInput{sub})
			return err
		},
		"add subscription": func(p engine.Principal) error { _, err := b.eng.AddSubscription(b.ctx, p, sink, sub); return err },
		"delete subscription": func(p engine.Principal) error {
			return b.eng.DeleteSubscription(b.ctx, p, sink, subs[0].ID)
		},
		"create connection": func(p engine.Principal) error {
			_, err := b.eng.CreateConnection(b.ctx, p, engine.ConnectionInput{
				Owner: scope, Kind: engine.KindGotify, Name: "z", BaseURL: "https://g.example.net", Secret: notifytype.NewSecret("t"),
			})
			return err
		},
		"delete connection": func(p engine.Principal) error { return b.eng.DeleteConnection(b.ctx, p, conn) },
	}
	reads := map[string]func(engine.Principal) error{
		"list sinks":         func(p engine.Principal) error { _, err := b.eng.ListSinks(b.ctx, p, scope); return err },
		"get sink":           func(p engine.Principal) error { _, err := b.eng.GetSink(b.ctx, p, sink); return err },
		"list subscriptions": func(p engine.Principal) error { _, err := b.eng.ListSubscriptions(b.ctx, p, sink); return err },
		"list connections":   func(p engine.Principal) error { _, err := b.eng.ListConnections(b.ctx, p, scope); return err },
	}
	for name, write := range writes {
		t.Run("member "+name, func(t *testing.T) {
			requireRefusal(t, write(principals["member"]), notifytype.CodeForbidden, "")
		})
		t.Run("outsider "+name, func(t *testing.T) {
			requireRefusal(t, write(outsider), notifytype.CodeNotFound, "")
		})
	}
	for name, read := range reads {
		t.Run("member "+name, func(t *testing.T) { require.NoError(t, read(principals["member"])) })
		t.Run("outsider "+name, func(t *testing.T) {
			requireRefusal(t, read(outsider), notifytype.CodeNotFound, "")
		})
	}
	require.Equal(t, 2, b.count(t, "sinks"))
	require.Equal(t, 2, b.count(t, "subscriptions"))
	require.Equal(t, 1, b.count(t, "connections"))
}

func TestAnotherOwnersSinkIsNotFound(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	a, pa := b.human()
	_, pb := b.human()
	conn := b.gotifyConnection(t, pa, hostid.Human(a))
	s := b.gotifySink(t, pa, hostid.Human(a), conn, "phone")

	_, err := b.eng.GetSink(b.ctx, pb, s.ID)
	e := requireRefusal(t, err, notifytype.CodeNotFound, "")
	_, errMissing := b.eng.GetSink(b.ctx, pb, s.ID+1000)
	missing := requireRefusal(t, errMissing, notifytype.CodeNotFound, "")
	require.Equal(t, missing.Error(), e.Error(), "another's sink and no sink must read the same")

	_, err = b.eng.ListSinks(b.ctx, pb, hostid.Human(a))
	requireRefusal(t, err, notifytype.CodeNotFound, "")
	_, err = b.eng.CreateSink(b.ctx, pb, engine.SinkInput{Owner: hostid.Human(a), Name: "x", Kind: engine.KindGotify, ConnectionID: conn})
	requireRefusal(t, err, notifytype.CodeNotFound, "")
}

func TestSinkCeiling(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, p := b.human()
	owner := hostid.Human(h)
	conn := b.gotifyConnection(t, p, owner)
	for i := range engine.MaxSinksPerScopeDefault {
		b.gotifySink(t, p, owner, conn, "sink-"+string(rune('a'+i)))
	}
	_, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: owner, Name: "eleventh", Kind: engine.KindGotify, ConnectionID: conn})
	e := requireRefusal(t, err, notifytype.CodeInvalidArgument, "sinks")
	require.Contains(t, e.Message, "10")
	require.Equal(t, engine.MaxSinksPerScopeDefault, b.count(t, "sinks"))

	// Another scope has its own ceiling.
	h2, p2 := b.human()
	b.gotifySink(t, p2, hostid.Human(h2), b.gotifyConnection(t, p2, hostid.Human(h2)), "phone")
}

func TestSinkCeilingUnderConcurrentCreates(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, p := b.human()
	owner := hostid.Human(h)
	conn := b.gotifyConnection(t, p, owner)

	const creators = 12
	errs := make([]error, creators)
	var wg sync.WaitGroup
	for i := range creators {
		wg.Go(func() {
			_, errs[i] = b.eng.CreateSink(b.ctx, p, engine.SinkInput{
				Owner: owner, Name: "sink-" + string(rune('a'+i)), Kind: engine.KindGotify, ConnectionID: conn,
			})
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		requireRefusal(t, err, notifytype.CodeInvalidArgument, "sinks")
	}
	require.Equal(t, engine.MaxSinksPerScopeDefault, ok)
	require.Equal(t, engine.MaxSinksPerScopeDefault, b.count(t, "sinks"))
}

func TestDeleteSinkKeepsDeliveryRecords(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, p := b.human()
	owner := hostid.Human(h)
	s := b.gotifySink(t, p, owner, b.gotifyConnection(t, p, owner), "phone")
	_, err := b.eng.SetSubscriptions(b.ctx, p, s.ID, []engine.SubscriptionInput{
		{EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}},
		{EventTypes: []notifytype.EventType{engine.EventDigest}},
	})
	require.NoError(t, err)
	_, err = b.pool.Exec(b.ctx, `INSERT INTO switchboard.delivery_records (sink_id, owner, event_type, status, class, sent_at)
		VALUES ($1, $2, 'todo.dead_lettered', 'delivered', NULL, now())`, s.ID, owner.String())
	require.NoError(t, err)

	require.NoError(t, b.eng.DeleteSink(b.ctx, p, s.ID))
	require.Zero(t, b.count(t, "sinks"))
	require.Zero(t, b.count(t, "subscriptions"))
	require.Equal(t, 1, b.f.Count(`SELECT count(*) FROM switchboard.delivery_records WHERE sink_id = $1`, s.ID))

	_, err = b.eng.GetSink(b.ctx, p, s.ID)
	requireRefusal(t, err, notifytype.CodeNotFound, "")
	requireRefusal(t, b.eng.DeleteSink(b.ctx, p, s.ID), notifytype.CodeNotFound, "")
}

func TestEndpointPrincipal(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, human := b.human()
	owner := hostid.Human(h)
	endpoint := b.f.Endpoint(hosttest.EndpointOpts{Owner: owner, Human: h, Grants: []string{"notifications"}})
	p := engine.EndpointPrincipal(endpoint, hostid.String(h), owner, notifytype.GrantNotifications)
	conn := b.gotifyConnection(t, human, owner)
	queue := b.f.Queue(owner, "forge")

	// Without the notifications grant (the default), every verb is
	// forbidden (REQ-5).
	ungranted := engine.EndpointPrincipal(endpoint, hostid.String(h), owner, notifytype.DefaultGrants...)
	_, err := b.eng.ListSinks(b.ctx, ungranted, owner)
	require.ErrorIs(t, err, notifytype.ErrForbidden)
	_, err = b.eng.CreateSink(b.ctx, ungranted, engine.SinkInput{Owner: owner, Name: "phone", Kind: engine.KindGotify, ConnectionID: conn})
	require.ErrorIs(t, err, notifytype.ErrForbidden)
	require.Zero(t, b.f.Count(`SELECT count(*) FROM switchboard.sinks`))

	s, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: owner, Name: "phone", Kind: engine.KindGotify, ConnectionID: conn})
	require.NoError(t, err)
	require.Equal(t, hostid.String(h), s.UpdatedByHumanID)
	require.Equal(t, endpoint, s.UpdatedByEndpointID)
	require.Equal(t, 1, b.f.Count(`SELECT count(*) FROM switchboard.sinks WHERE id = $1 AND updated_by_human_id = $2 AND updated_by_endpoint_id = $3`, s.ID, hostid.String(h), endpoint))

	subs, err := b.eng.SetSubscriptions(b.ctx, p, s.ID, []engine.SubscriptionInput{{
		EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}, Queues: []int64{queue},
	}})
	require.NoError(t, err)
	require.Len(t, subs, 1)
	require.Equal(t, hostid.String(h), subs[0].CreatedByHumanID)
	require.Equal(t, endpoint, subs[0].CreatedByEndpointID)
	require.Equal(t, 1, b.f.Count(`SELECT count(*) FROM switchboard.subscriptions WHERE id = $1 AND created_by_human_id = $2 AND created_by_endpoint_id = $3`, subs[0].ID, hostid.String(h), endpoint))

	// A human's later write clears the endpoint from the record.
	u, err := b.eng.SetSinkEnabled(b.ctx, human, s.ID, false)
	require.NoError(t, err)
	require.Zero(t, u.UpdatedByEndpointID)

	// Another owner's sink, and any scope but its own, is not_found, even a
	// team where its human is an admin.
	o, po := b.human()
	theirs := b.gotifySink(t, po, hostid.Human(o), b.gotifyConnection(t, po, hostid.Human(o)), "theirs")
	team := b.f.Team("")
	b.f.Member(team, h, "admin")
	_, err = b.eng.SetSubscriptions(b.ctx, p, theirs.ID, []engine.SubscriptionInput{{EventTypes: []notifytype.EventType{engine.EventDigest}}})
	requireRefusal(t, err, notifytype.CodeNotFound, "")
	_, err = b.eng.GetSink(b.ctx, p, theirs.ID)
	requireRefusal(t, err, notifytype.CodeNotFound, "")
	for _, scope := range []notifytype.OwnerScope{hostid.Human(o), hostid.Team(team)} {
		_, err = b.eng.ListSinks(b.ctx, p, scope)
		requireRefusal(t, err, notifytype.CodeNotFound, "")
		_, err = b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: scope, Name: "x", Kind: engine.KindGotify, ConnectionID: conn})
		requireRefusal(t, err, notifytype.CodeNotFound, "")
	}

	// It lists connections to reference them, but creates and deletes none.
	conns, err := b.eng.ListConnections(b.ctx, p, owner)
	require.NoError(t, err)
	require.Len(t, conns, 1)
	_, err = b.eng.CreateConnection(b.ctx, p, engine.ConnectionInput{
		Owner: owner, Kind: engine.KindGotify, Name: "mine", BaseURL: "https://g.example.net", Secret: notifytype.NewSecret("t"),
	})
	requireRefusal(t, err, notifytype.CodeForbidden, "")
	requireRefusal(t, b.eng.DeleteConnection(b.ctx, p, conn), notifytype.CodeForbidden, "")

	// A team endpoint acts with its human's role in the team.
	member, _ := b.human()
	b.f.Member(team, member, "member")
	teamScope := hostid.Team(team)
	teamConn := b.gotifyConnection(t, engine.HumanPrincipal(hostid.String(h)), teamScope)
	asMember := engine.EndpointPrincipal(b.f.Endpoint(hosttest.EndpointOpts{Owner: teamScope, Human: member}), hostid.String(member), teamScope, notifytype.GrantNotifications)
	asAdmin := engine.EndpointPrincipal(b.f.Endpoint(hosttest.EndpointOpts{Owner: teamScope, Human: h}), hostid.String(h), teamScope, notifytype.GrantNotifications)
	_, err = b.eng.CreateSink(b.ctx, asMember, engine.SinkInput{Owner: teamScope, Name: "x", Kind: engine.KindGotify, ConnectionID: teamConn})
	requireRefusal(t, err, notifytype.CodeForbidden, "")
	_, err = b.eng.ListSinks(b.ctx, asMember, teamScope)
	require.NoError(t, err)
	_, err = b.eng.CreateSink(b.ctx, asAdmin, engine.SinkInput{Owner: teamScope, Name: "x", Kind: engine.KindGotify, ConnectionID: teamConn})
	require.NoError(t, err)
}

func TestSinkOutputsCarryNoSecret(t *testing.T) {
	t.Parallel()
	b := setupService(t)
	h, p := b.human()
	owner := hostid.Human(h)
	conn := b.appriseConnection(t, b.eng, p, owner, `{"urls":["tgram://SECRETBOT/SECRETCHAT"],"authorization":"Bearer SECRETAUTH"}`)
	s, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: owner, Name: "tg", Kind: engine.KindApprise, ConnectionID: conn})
	require.NoError(t, err)
	out, err := json.Marshal(s)
	require.NoError(t, err)
	require.NotContains(t, string(out), "SECRET")
}
