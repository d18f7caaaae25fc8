package rest_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host/hostid"
)

// TestSinkLifecycle creates, reads, lists, changes, tests, and deletes a
// sink and its subscriptions through the API.
func TestSinkLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newGotify(t, http.StatusOK)
	a, tok := b.human(t)
	conn := b.connection(t, tok, "", g.URL)

	r := b.ok(t, http.StatusCreated, tok, "POST", "/api/v1/sinks", map[string]any{
		"name": "phone", "kind": "gotify", "connection_id": conn,
		"options": map[string]any{"priorities": map[string]int{"high": 9}}, "budget_per_hour": 60, "budget_burst": 5,
	})
	requireHeaders(t, r)
	var sink struct {
		ID            int64          `json:"id"`
		Owner         string         `json:"owner"`
		Name          string         `json:"name"`
		Enabled       bool           `json:"enabled"`
		Options       map[string]any `json:"options"`
		BudgetPerHour int            `json:"budget_per_hour"`
		BudgetBurst   int            `json:"budget_burst"`
	}
	r.into(t, &sink)
	require.Equal(t, human(a), sink.Owner)
	require.Equal(t, "phone", sink.Name)
	require.True(t, sink.Enabled)
	require.Equal(t, map[string]any{"priorities": map[string]any{"low": 2.0, "normal": 5.0, "high": 9.0}}, sink.Options)
	require.Equal(t, 60, sink.BudgetPerHour)
	require.Equal(t, 5, sink.BudgetBurst)
	path := sinkPath(sink.ID, "")

	var list struct {
		Sinks []struct {
			ID int64 `json:"id"`
		} `json:"sinks"`
	}
	b.ok(t, http.StatusOK, tok, "GET", "/api/v1/sinks", nil).into(t, &list)
	require.Len(t, list.Sinks, 1)
	b.ok(t, http.StatusOK, tok, "GET", "/api/v1/sinks?owner="+human(a), nil).into(t, &list)
	require.Len(t, list.Sinks, 1)
	require.Equal(t, sink.ID, list.Sinks[0].ID)

	b.ok(t, http.StatusOK, tok, "PATCH", path, map[string]any{"enabled": false, "name": "pager"}).into(t, &sink)
	require.False(t, sink.Enabled)
	require.Equal(t, "pager", sink.Name)
	require.Equal(t, 60, sink.BudgetPerHour, "an absent field keeps its value")
	b.ok(t, http.StatusOK, tok, "PATCH", path, map[string]any{"options": nil}).into(t, &sink)
	require.Equal(t, map[string]any{"priorities": map[string]any{"low": 2.0, "normal": 5.0, "high": 8.0}}, sink.Options,
		"options null resets them to the defaults")

	sub := b.subscription(t, tok, sink.ID)
	var subs struct {
		Subscriptions []struct {
			ID          int64    `json:"id"`
			EventTypes  []string `json:"event_types"`
			Queues      []int64  `json:"queues"`
			MinSeverity string   `json:"min_severity"`
		} `json:"subscriptions"`
	}
	b.ok(t, http.StatusOK, tok, "GET", sinkPath(sink.ID, "/subscriptions"), nil).into(t, &subs)
	require.Len(t, subs.Subscriptions, 1)
	require.Equal(t, sub, subs.Subscriptions[0].ID)
	require.Equal(t, []int64{}, subs.Subscriptions[0].Queues)
	require.Equal(t, "low", subs.Subscriptions[0].MinSeverity)

	q := b.w.F.Queue(hostid.Human(a), "forge")
	b.ok(t, http.StatusOK, tok, "PUT", sinkPath(sink.ID, "/subscriptions"), map[string]any{"subscriptions": []any{
		map[string]any{"event_types": []string{"relay.exhausted", "todo.dead_lettered"}, "queues": []int64{q}, "min_severity": "high"},
		map[string]any{"event_types": []string{"digest"}},
	}}).into(t, &subs)
	require.Len(t, subs.Subscriptions, 2)
	require.Equal(t, []int64{q}, subs.Subscriptions[0].Queues)
	require.Equal(t, 2, b.count(t, "subscriptions"), "PUT replaces")
	b.ok(t, http.StatusNoContent, tok, "DELETE", sinkPath(sink.ID, "/subscriptions/"+strconv.FormatInt(subs.Subscriptions[1].ID, 10)), nil)
	b.refused(t, http.StatusNotFound, "not_found", tok, "DELETE", sinkPath(sink.ID, "/subscriptions/"+strconv.FormatInt(subs.Subscriptions[1].ID, 10)), nil)
	require.Equal(t, 1, b.count(t, "subscriptions"))

	b.ok(t, http.StatusOK, tok, "POST", path+"/test", nil)
	var deliveries struct {
		Deliveries []struct {
			Test   bool   `json:"test"`
			Status string `json:"status"`
		} `json:"deliveries"`
	}
	b.ok(t, http.StatusOK, tok, "GET", path+"/deliveries?limit=10", nil).into(t, &deliveries)
	require.Len(t, deliveries.Deliveries, 1)
	require.True(t, deliveries.Deliveries[0].Test)
	require.Equal(t, "delivered", deliveries.Deliveries[0].Status)
	require.Equal(t, "limit", b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "GET", path+"/deliveries?limit=0", nil).Field)

	require.Equal(t, "connection", b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "DELETE",
		"/api/v1/connections/"+strconv.FormatInt(conn, 10), nil).Field, "a connection in use stays")
	b.ok(t, http.StatusNoContent, tok, "DELETE", path, nil)
	b.refused(t, http.StatusNotFound, "not_found", tok, "GET", path, nil)
	require.Equal(t, 0, b.count(t, "subscriptions"), "deleting a sink deletes its subscriptions")
	require.Equal(t, 1, b.count(t, "delivery_records"), "and keeps its delivery records")
	b.ok(t, http.StatusNoContent, tok, "DELETE", "/api/v1/connections/"+strconv.FormatInt(conn, 10), nil)
}

// Scenario: Another owner's sink
func TestAnotherOwnersSink(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newGotify(t, http.StatusOK)
	a, tokA := b.human(t)
	_, tokB := b.human(t)
	conn := b.connection(t, tokA, "", g.URL)
	sink := b.sink(t, tokA, "", conn)
	sub := b.subscription(t, tokA, sink)
	before := b.ok(t, http.StatusOK, tokA, "GET", sinkPath(sink, ""), nil).body
	counts := b.counts(t)

	subPath := sinkPath(sink, "/subscriptions/"+strconv.FormatInt(sub, 10))
	for _, req := range []struct {
		method, path string
		body         any
	}{
		{"GET", sinkPath(sink, ""), nil},
		{"PATCH", sinkPath(sink, ""), map[string]any{"name": "stolen", "enabled": false}},
		{"DELETE", sinkPath(sink, ""), nil},
		{"POST", sinkPath(sink, "/test"), nil},
		{"GET", sinkPath(sink, "/deliveries"), nil},
		{"GET", sinkPath(sink, "/subscriptions"), nil},
		{"POST", sinkPath(sink, "/subscriptions"), map[string]any{"event_types": []string{"digest"}}},
		{"PUT", sinkPath(sink, "/subscriptions"), map[string]any{"subscriptions": []any{}}},
		{"DELETE", subPath, nil},
		{"GET", "/api/v1/sinks?owner=" + human(a), nil},
		{"GET", "/api/v1/connections?owner=" + human(a), nil},
		{"GET", "/api/v1/endpoints?owner=" + human(a), nil},
		{"DELETE", "/api/v1/connections/" + strconv.FormatInt(conn, 10), nil},
		{"POST", "/api/v1/sinks", map[string]any{"owner": human(a), "name": "mine", "kind": "gotify", "connection_id": conn}},
	} {
		b.refused(t, http.StatusNotFound, "not_found", tokB, req.method, req.path, req.body)
	}

	require.Equal(t, counts, b.counts(t), "nothing changed")
	require.JSONEq(t, string(before), string(b.ok(t, http.StatusOK, tokA, "GET", sinkPath(sink, ""), nil).body))
	require.Empty(t, g.received(), "no test message was sent")
}

// TestTeamMemberReadsOnly: a team member who is not owner or admin lists
// and reads the team's sinks, and every write answers 403 forbidden with
// nothing changed; an outsider gets 404.
func TestTeamMemberReadsOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newGotify(t, http.StatusOK)
	owner, tokOwner := b.human(t)
	member, tokMember := b.human(t)
	_, tokOutsider := b.human(t)
	tm := b.w.F.Team("")
	b.w.F.Member(tm, owner, "owner")
	b.w.F.Member(tm, member, "member")
	conn := b.connection(t, tokOwner, team(tm), g.URL)
	sink := b.sink(t, tokOwner, team(tm), conn)
	sub := b.subscription(t, tokOwner, sink)
	endpoint, _ := b.vend(t, tokOwner, team(tm), nil)
	counts := b.counts(t)

	var sinks struct {
		Sinks []struct {
			ID int64 `json:"id"`
		} `json:"sinks"`
	}
	b.ok(t, http.StatusOK, tokMember, "GET", "/api/v1/sinks?owner="+team(tm), nil).into(t, &sinks)
	require.Len(t, sinks.Sinks, 1)
	for _, path := range []string{
		sinkPath(sink, ""), sinkPath(sink, "/subscriptions"), sinkPath(sink, "/deliveries"),
		"/api/v1/connections?owner=" + team(tm), "/api/v1/endpoints?owner=" + team(tm),
	} {
		b.ok(t, http.StatusOK, tokMember, "GET", path, nil)
	}

	for _, req := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/api/v1/sinks", map[string]any{"owner": team(tm), "name": "mine", "kind": "gotify", "connection_id": conn}},
		{"PATCH", sinkPath(sink, ""), map[string]any{"enabled": false}},
		{"DELETE", sinkPath(sink, ""), nil},
		{"POST", sinkPath(sink, "/test"), nil},
		{"POST", sinkPath(sink, "/subscriptions"), map[string]any{"event_types": []string{"digest"}}},
		{"PUT", sinkPath(sink, "/subscriptions"), map[string]any{"subscriptions": []any{}}},
		{"DELETE", sinkPath(sink, "/subscriptions/"+strconv.FormatInt(sub, 10)), nil},
		{"POST", "/api/v1/connections", map[string]any{"owner": team(tm), "kind": "gotify", "name": "x", "base_url": g.URL, "token": "gtfya.x"}},
		{"DELETE", "/api/v1/connections/" + strconv.FormatInt(conn, 10), nil},
		{"POST", "/api/v1/endpoints", map[string]any{"owner": team(tm), "name": "mine"}},
		{"DELETE", "/api/v1/endpoints/" + strconv.FormatInt(endpoint, 10), nil},
	} {
		b.refused(t, http.StatusForbidden, "forbidden", tokMember, req.method, req.path, req.body)
	}
	require.Equal(t, counts, b.counts(t), "nothing changed")
	require.Empty(t, g.received())

	b.refused(t, http.StatusNotFound, "not_found", tokOutsider, "GET", "/api/v1/sinks?owner="+team(tm), nil)
	b.refused(t, http.StatusNotFound, "not_found", tokOutsider, "GET", sinkPath(sink, ""), nil)
}
