package rest_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/apprise"
)

// refusal is a request and the refusal it must get.
type refusal struct {
	name         string
	method, path string
	body         any
	status       int
	code         string
	field        string // invalid_argument
	scheme       string // forbidden_scheme
}

func (b *bundle) requireRefusals(t *testing.T, token string, cases []refusal) {
	t.Helper()
	for _, c := range cases {
		e := b.refused(t, c.status, c.code, token, c.method, c.path, c.body)
		require.Equal(t, c.field, e.Field, "%s: %+v", c.name, e)
		require.Equal(t, c.scheme, e.Scheme, "%s: %+v", c.name, e)
	}
}

// TestBadSinkInput refuses every field of a sink, on create and on
// change, with its code and field, and stores nothing.
func TestBadSinkInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newGotify(t, http.StatusOK)
	a, tokA := b.human(t)
	_, tokB := b.human(t)
	b2, _ := b.human(t)
	gc := b.connection(t, tokA, "", g.URL)
	other := b.connection(t, tokB, "", g.URL)
	stateful := idOf(t, b.ok(t, http.StatusCreated, tokA, "POST", "/api/v1/connections",
		map[string]any{"kind": "apprise", "name": "apprise", "base_url": g.URL}))
	// A stateless Apprise connection with a json:// URL, stored by an
	// engine whose operator allows every scheme; this API's engine does not.
	lax := b.w.Engine(func(c *engine.Config) {
		c.AppriseSchemesAllowed = append(slices.Clone(apprise.DefaultAllowedSchemes), "json", "form")
	})
	jsonConn, err := lax.CreateConnection(b.w.Ctx, engine.HumanPrincipal(hostid.String(a)), engine.ConnectionInput{
		Owner: hostid.Human(a), Kind: engine.KindApprise, Name: "lax", BaseURL: g.URL,
		Secret: notifytype.NewSecret(`{"urls": ["json://hooks.example.net/x"]}`),
	})
	require.NoError(t, err)
	sink := b.sink(t, tokA, "", gc)
	b.ok(t, http.StatusCreated, tokA, "POST", "/api/v1/sinks", map[string]any{"name": "taken", "kind": "gotify", "connection_id": gc})
	counts := b.counts(t)
	before := b.ok(t, http.StatusOK, tokA, "GET", sinkPath(sink, ""), nil).body

	create := func(mod map[string]any) map[string]any {
		body := map[string]any{"name": "new", "kind": "gotify", "connection_id": gc}
		for k, v := range mod {
			if v == nil {
				delete(body, k)
			} else {
				body[k] = v
			}
		}
		return body
	}
	post := func(name string, mod map[string]any, status int, code, field string) refusal {
		return refusal{name: name, method: "POST", path: "/api/v1/sinks", body: create(mod), status: status, code: code, field: field}
	}
	patch := func(name string, body any, status int, code, field string) refusal {
		return refusal{name: name, method: "PATCH", path: sinkPath(sink, ""), body: body, status: status, code: code, field: field}
	}
	const bad, forbidden, invalid = http.StatusBadRequest, http.StatusForbidden, "invalid_argument"
	b.requireRefusals(t, tokA, []refusal{
		post("owner malformed", map[string]any{"owner": "nobody"}, bad, invalid, "owner"),
		post("owner of another", map[string]any{"owner": human(b2)}, http.StatusNotFound, "not_found", ""),
		post("name missing", map[string]any{"name": nil}, bad, invalid, "name"),
		post("name too long", map[string]any{"name": strings.Repeat("n", 65)}, bad, invalid, "name"),
		post("name control", map[string]any{"name": "a\x07b"}, bad, invalid, "name"),
		post("name taken", map[string]any{"name": "taken"}, bad, invalid, "name"),
		post("kind missing", map[string]any{"kind": nil}, bad, invalid, "kind"),
		post("kind unknown", map[string]any{"kind": "slack"}, bad, invalid, "kind"),
		post("connection missing", map[string]any{"connection_id": nil}, bad, invalid, "connection_id"),
		post("connection of another scope", map[string]any{"connection_id": other}, forbidden, "forbidden", "connection_id"),
		post("connection of another kind", map[string]any{"connection_id": stateful}, forbidden, "forbidden", "connection_id"),
		post("connection unknown", map[string]any{"connection_id": 1 << 40}, forbidden, "forbidden", "connection_id"),
		post("enabled not a boolean", map[string]any{"enabled": "yes"}, bad, invalid, "body"),
		post("options not an object", map[string]any{"options": []int{1}}, bad, invalid, "options"),
		post("options unknown key", map[string]any{"options": map[string]any{"colour": "red"}}, bad, invalid, "options.colour"),
		post("priority out of range", map[string]any{"options": map[string]any{"priorities": map[string]any{"high": 11}}}, bad, invalid, "options.priorities.high"),
		post("priority of no severity", map[string]any{"options": map[string]any{"priorities": map[string]any{"urgent": 1}}}, bad, invalid, "options.priorities.urgent"),
		post("budget per hour over the bound", map[string]any{"budget_per_hour": 1000}, bad, invalid, "budget_per_hour"),
		post("budget per hour negative", map[string]any{"budget_per_hour": -1}, bad, invalid, "budget_per_hour"),
		post("budget burst over the bound", map[string]any{"budget_burst": 31}, bad, invalid, "budget_burst"),
		post("unknown field", map[string]any{"colour": "red"}, bad, invalid, "body"),
		post("apprise type unknown", map[string]any{"kind": "apprise", "connection_id": stateful,
			"options": map[string]any{"config_key": "ops", "types": map[string]any{"low": "loud"}}}, bad, invalid, "options.types.low"),
		post("apprise config key malformed", map[string]any{"kind": "apprise", "connection_id": stateful,
			"options": map[string]any{"config_key": "a/b"}}, bad, invalid, "options.config_key"),
		post("apprise neither config key nor urls", map[string]any{"kind": "apprise", "connection_id": stateful}, bad, invalid, "options.config_key"),
		{name: "apprise json:// URL", method: "POST", path: "/api/v1/sinks", status: bad, code: "forbidden_scheme", scheme: "json",
			body: create(map[string]any{"kind": "apprise", "connection_id": jsonConn.ID})},
		{name: "malformed JSON", method: "POST", path: "/api/v1/sinks", body: `{"name": `, status: bad, code: invalid, field: "body"},
		{name: "empty body", method: "POST", path: "/api/v1/sinks", status: bad, code: invalid, field: "body"},

		patch("name empty", map[string]any{"name": ""}, bad, invalid, "name"),
		patch("name taken", map[string]any{"name": "taken"}, bad, invalid, "name"),
		patch("connection zero", map[string]any{"connection_id": 0}, bad, invalid, "connection_id"),
		patch("connection of another scope", map[string]any{"connection_id": other}, forbidden, "forbidden", "connection_id"),
		patch("enabled not a boolean", map[string]any{"enabled": 1}, bad, invalid, "body"),
		patch("options unknown key", map[string]any{"options": map[string]any{"colour": "red"}}, bad, invalid, "options.colour"),
		patch("budget per hour zero", map[string]any{"budget_per_hour": 0}, bad, invalid, "budget_per_hour"),
		patch("budget burst over the bound", map[string]any{"budget_burst": 100}, bad, invalid, "budget_burst"),
		patch("kind is not changeable", map[string]any{"kind": "apprise"}, bad, invalid, "body"),
	})
	require.Equal(t, counts, b.counts(t), "nothing stored")
	require.JSONEq(t, string(before), string(b.ok(t, http.StatusOK, tokA, "GET", sinkPath(sink, ""), nil).body), "nothing changed")
}

// TestBadSubscriptionInput refuses every field of a subscription, added or
// replacing, and stores nothing: a replace with one bad subscription keeps
// the old ones.
func TestBadSubscriptionInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newGotify(t, http.StatusOK)
	a, tokA := b.human(t)
	other, _ := b.human(t)
	sink := b.sink(t, tokA, "", b.connection(t, tokA, "", g.URL))
	b.subscription(t, tokA, sink)
	mine, theirs := hostid.Human(a), hostid.Human(other)
	queue, otherQueue := b.w.F.Queue(mine, ""), b.w.F.Queue(theirs, "")
	otherEndpoint := b.w.F.Endpoint(hosttest.EndpointOpts{Owner: theirs, Human: other})
	otherWebhook := b.w.F.Webhook(theirs, "")
	counts := b.counts(t)
	before := b.ok(t, http.StatusOK, tokA, "GET", sinkPath(sink, "/subscriptions"), nil).body

	good := map[string]any{"event_types": []string{"todo.dead_lettered"}, "queues": []int64{queue}}
	cases := []struct {
		name  string
		sub   map[string]any
		field string
	}{
		{"event types missing", map[string]any{}, "event_types"},
		{"event types empty", map[string]any{"event_types": []string{}}, "event_types"},
		{"event type unknown", map[string]any{"event_types": []string{"todo.done"}}, "event_types"},
		{"queue of another scope", map[string]any{"event_types": []string{"digest"}, "queues": []int64{queue, otherQueue}}, "queues"},
		{"queue id not positive", map[string]any{"event_types": []string{"digest"}, "queues": []int64{-1}}, "queues"},
		{"endpoint of another scope", map[string]any{"event_types": []string{"digest"}, "endpoints": []int64{otherEndpoint}}, "endpoints"},
		{"webhook of another scope", map[string]any{"event_types": []string{"digest"}, "webhooks": []int64{otherWebhook}}, "webhooks"},
		{"severity unknown", map[string]any{"event_types": []string{"digest"}, "min_severity": "urgent"}, "min_severity"},
		{"excerpt not a boolean", map[string]any{"event_types": []string{"digest"}, "include_excerpt": "yes"}, "body"},
		{"queues not ids", map[string]any{"event_types": []string{"digest"}, "queues": []string{"forge"}}, "body"},
		{"unknown field", map[string]any{"event_types": []string{"digest"}, "channel": "x"}, "body"},
	}
	var refusals []refusal
	for _, c := range cases {
		refusals = append(refusals,
			refusal{name: "add: " + c.name, method: "POST", path: sinkPath(sink, "/subscriptions"), body: c.sub,
				status: http.StatusBadRequest, code: "invalid_argument", field: c.field},
			refusal{name: "replace: " + c.name, method: "PUT", path: sinkPath(sink, "/subscriptions"),
				body:   map[string]any{"subscriptions": []any{good, c.sub}},
				status: http.StatusBadRequest, code: "invalid_argument", field: c.field})
	}
	refusals = append(refusals, refusal{name: "replace: not a list", method: "PUT", path: sinkPath(sink, "/subscriptions"),
		body: []any{good}, status: http.StatusBadRequest, code: "invalid_argument", field: "body"})
	b.requireRefusals(t, tokA, refusals)
	require.Equal(t, counts, b.counts(t), "nothing stored")
	require.JSONEq(t, string(before), string(b.ok(t, http.StatusOK, tokA, "GET", sinkPath(sink, "/subscriptions"), nil).body))
}

// TestBadConnectionInput refuses a connection's fields with this API's
// field names, a json:// Apprise URL with forbidden_scheme naming json
// (never the URL), and stores nothing.
func TestBadConnectionInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, tok := b.human(t)
	other, _ := b.human(t)
	b.ok(t, http.StatusCreated, tok, "POST", "/api/v1/connections",
		map[string]any{"kind": "gotify", "name": "taken", "base_url": "https://g.example.net", "token": "gtfya.x"})
	counts := b.counts(t)

	conn := func(mod map[string]any) map[string]any {
		body := map[string]any{"kind": "gotify", "name": "new", "base_url": "https://g.example.net", "token": "gtfya.x"}
		for k, v := range mod {
			if v == nil {
				delete(body, k)
			} else {
				body[k] = v
			}
		}
		return body
	}
	apprise := func(mod map[string]any) map[string]any {
		m := map[string]any{"kind": "apprise", "token": nil}
		for k, v := range mod {
			m[k] = v
		}
		return conn(m)
	}
	post := func(name string, body map[string]any, status int, code, field string) refusal {
		return refusal{name: name, method: "POST", path: "/api/v1/connections", body: body, status: status, code: code, field: field}
	}
	const bad, invalid = http.StatusBadRequest, "invalid_argument"
	b.requireRefusals(t, tok, []refusal{
		post("owner malformed", conn(map[string]any{"owner": "human:not an id"}), bad, invalid, "owner"),
		post("owner of another", conn(map[string]any{"owner": human(other)}), http.StatusNotFound, "not_found", ""),
		post("kind unknown", conn(map[string]any{"kind": "slack"}), bad, invalid, "kind"),
		post("name taken", conn(map[string]any{"name": "taken"}), bad, invalid, "name"),
		post("base url missing", conn(map[string]any{"base_url": nil}), bad, invalid, "account_key"),
		post("base url not http", conn(map[string]any{"base_url": "ftp://g.example.net"}), bad, invalid, "account_key"),
		post("base url and account key differ", conn(map[string]any{"account_key": "https://h.example.net"}), bad, invalid, "base_url"),
		post("gotify token missing", conn(map[string]any{"token": nil}), bad, invalid, "token"),
		post("gotify token with a space", conn(map[string]any{"token": "gtfya x"}), bad, invalid, "token"),
		post("gotify given urls", conn(map[string]any{"urls": []string{"tgram://x/y"}}), bad, invalid, "urls"),
		post("gotify given authorization", conn(map[string]any{"authorization": "Basic x"}), bad, invalid, "authorization"),
		post("apprise given a token", apprise(map[string]any{"token": "x"}), bad, invalid, "token"),
		post("apprise url without scheme", apprise(map[string]any{"urls": []string{"nowhere"}}), bad, invalid, "urls"),
		post("apprise authorization two lines", apprise(map[string]any{"authorization": "Basic x\r\nX-Evil: 1"}), bad, invalid, "authorization"),
		{name: "apprise json:// URL", method: "POST", path: "/api/v1/connections", status: bad, code: "forbidden_scheme", scheme: "json",
			body: apprise(map[string]any{"urls": []string{"tgram://bot/chat", "json://hooks.example.net/secret-path"}})},
		{name: "apprise json:// smuggled behind a comma", method: "POST", path: "/api/v1/connections", status: bad, code: "forbidden_scheme", scheme: "json",
			body: apprise(map[string]any{"urls": []string{"mailto://u:p@example.com,json://169.254.169.254/latest/meta-data/"}})},
	})
	require.Equal(t, counts, b.counts(t), "nothing stored")
	require.NotContains(t, b.allBodies(), "hooks.example.net", "a refused URL is never echoed")
}

// TestEncryptionRequired: without an operator key a connection with a
// secret is refused with encryption_required (409) and nothing is stored;
// one without a secret (a stateful Apprise server) is stored.
func TestEncryptionRequired(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) {
		o.configure = append(o.configure, func(c *engine.Config) { c.SecretKey = nil })
	})
	_, tok := b.human(t)
	for _, body := range []map[string]any{
		{"kind": "gotify", "name": "g", "base_url": "https://g.example.net", "token": "gtfya.x"},
		{"kind": "cairn", "name": "c", "base_url": "https://c.example.net", "token": "cairn-x"},
		{"kind": "apprise", "name": "a", "base_url": "https://a.example.net", "urls": []string{"tgram://bot/chat"}},
		{"kind": "apprise", "name": "a", "base_url": "https://a.example.net", "authorization": "Basic eA=="},
	} {
		b.refused(t, http.StatusConflict, "encryption_required", tok, "POST", "/api/v1/connections", body)
	}
	require.Equal(t, 0, b.count(t, "connections"))
	var c struct {
		HasSecret bool `json:"has_secret"`
	}
	b.ok(t, http.StatusCreated, tok, "POST", "/api/v1/connections",
		map[string]any{"kind": "apprise", "name": "a", "base_url": "https://a.example.net"}).into(t, &c)
	require.False(t, c.HasSecret)
}
