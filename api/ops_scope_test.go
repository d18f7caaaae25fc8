package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// TestOpsViewsAreScopedToTheirHumans: two humans each with a sink whose
// actor is running; through /ops/actors, the /ops page and /metrics,
// neither learns that the other's sink exists (D3, D26). An operator sees
// the instance: every actor, and the metrics.
func TestOpsViewsAreScopedToTheirHumans(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	gotify := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"id": 1}`)
	}))
	t.Cleanup(gotify.Close)

	accounts := host.NewAccounts(s.w.Pool)
	type person struct {
		id    int64
		email string
		token string
		sink  int64
	}
	people := make([]person, 2)
	for i := range people {
		email := fmt.Sprintf("person-%d@example.net", i)
		h, err := accounts.CreateHuman(s.w.Ctx, "Person", email)
		require.NoError(t, err)
		tok, err := accounts.MintAPIToken(s.w.Ctx, h.ID)
		require.NoError(t, err)
		scope := hostid.Human(h.ID)
		sink := s.w.Sink(s.eng, engine.HumanPrincipal(hostid.String(h.ID)), scope, enginetest.SinkOpts{BaseURL: gotify.URL, Secret: "gtfya.token"})
		people[i] = person{id: h.ID, email: email, token: tok.Reveal(), sink: sink}
		s.w.Emit(s.eng, engine.Event{
			Type: host.EventTodoDeadLettered, Owner: scope, OccurrenceKey: host.DeadLetterKey(int64(100+i), 1),
			Content: sinks.Content{Title: "build failed", Place: "forge"},
		})
	}
	for range people {
		s.w.WaitFor(func(a engine.Attempt) bool { return a.State == "delivered" })
	}

	actorsOf := func(token string) []int64 {
		t.Helper()
		resp, body := s.get(t, "/ops/actors", token)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		var v struct{ Actors []engine.SinkStatus }
		require.NoError(t, json.Unmarshal([]byte(body), &v))
		var ids []int64
		for _, a := range v.Actors {
			ids = append(ids, a.SinkID)
		}
		slices.Sort(ids)
		return ids
	}
	opsPageOf := func(humanID int64) []int64 {
		t.Helper()
		link, _, err := accounts.MintLoginLink(s.w.Ctx, humanID)
		require.NoError(t, err)
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		browser := &http.Client{Jar: jar}
		login, err := http.NewRequest(http.MethodPost, s.url+"/login/"+link.Reveal(), nil)
		require.NoError(t, err)
		login.Header.Set("Origin", s.url)
		resp, err := browser.Do(login)
		require.NoError(t, err)
		_ = resp.Body.Close()
		resp, err = browser.Get(s.url + "/ops")
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var ids []int64
		_, actors, _ := strings.Cut(string(body), `id="actors"`)
		for _, m := range regexp.MustCompile(`<tr>\s*<td>(?:<a href="/sinks/(\d+)">|sink (\d+) )`).FindAllStringSubmatch(actors, -1) {
			m[1] += m[2]
			id, _ := strconv.ParseInt(m[1], 10, 64)
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ids
	}

	for i, p := range people {
		other := people[1-i]
		require.Equal(t, []int64{p.sink}, actorsOf(p.token), "/ops/actors shows only the human's own sink")
		require.Equal(t, []int64{p.sink}, opsPageOf(p.id), "/ops shows only the human's own sink")
		resp, body := s.get(t, "/metrics", p.token)
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		require.NotContains(t, body, strconv.FormatInt(other.sink, 10))
	}

	// The operator role opens the instance-wide view.
	_, err := accounts.GrantOperator(s.w.Ctx, people[0].email)
	require.NoError(t, err)
	require.Equal(t, []int64{people[0].sink, people[1].sink}, actorsOf(people[0].token))
	require.Equal(t, []int64{people[0].sink, people[1].sink}, opsPageOf(people[0].id))
	resp, body := s.get(t, "/metrics", people[0].token)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, fmt.Sprintf(`switchboard_sink_tokens{sink_id="%d"}`, people[1].sink))
	require.Equal(t, []int64{people[1].sink}, actorsOf(people[1].token), "the other human is no operator")
}

// TestOpsActorsOfATeam: /ops/actors shows a human the actors of their own
// sinks and of their teams' sinks, and never a sink of a team they are not
// in, while the operator sees them all (D26).
func TestOpsActorsOfATeam(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	gotify := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"id": 1}`)
	}))
	t.Cleanup(gotify.Close)
	accounts := host.NewAccounts(s.w.Pool)

	human := func(email string) (int64, string) {
		h, err := accounts.CreateHuman(s.w.Ctx, "Person", email)
		require.NoError(t, err)
		tok, err := accounts.MintAPIToken(s.w.Ctx, h.ID)
		require.NoError(t, err)
		return h.ID, tok.Reveal()
	}
	member, memberTok := human("member@example.net")
	outsider, outsiderTok := human("outsider@example.net")
	team := s.w.F.Team("")
	s.w.F.Member(team, member, "owner")
	theirs := s.w.F.Team("")
	s.w.F.Member(theirs, outsider, "owner")

	var sinkOf = map[notifytype.OwnerScope]int64{}
	for _, o := range []struct {
		human int64
		scope notifytype.OwnerScope
	}{
		{member, hostid.Human(member)}, {member, hostid.Team(team)},
		{outsider, hostid.Human(outsider)}, {outsider, hostid.Team(theirs)},
	} {
		sinkOf[o.scope] = s.w.Sink(s.eng, engine.HumanPrincipal(hostid.String(o.human)), o.scope, enginetest.SinkOpts{BaseURL: gotify.URL, Secret: "gtfya.token"})
		s.w.Emit(s.eng, engine.Event{
			Type: host.EventTodoDeadLettered, Owner: o.scope, OccurrenceKey: host.DeadLetterKey(sinkOf[o.scope], 1),
			Content: sinks.Content{Title: "build failed", Place: "forge"},
		})
	}
	for range sinkOf {
		s.w.WaitFor(func(a engine.Attempt) bool { return a.State == "delivered" })
	}

	actorsOf := func(token string) []int64 {
		t.Helper()
		resp, body := s.get(t, "/ops/actors", token)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		var v struct{ Actors []engine.SinkStatus }
		require.NoError(t, json.Unmarshal([]byte(body), &v))
		ids := []int64{}
		for _, a := range v.Actors {
			ids = append(ids, a.SinkID)
		}
		return ids
	}
	require.Equal(t, []int64{sinkOf[hostid.Human(member)], sinkOf[hostid.Team(team)]}, actorsOf(memberTok))
	require.Equal(t, []int64{sinkOf[hostid.Human(outsider)], sinkOf[hostid.Team(theirs)]}, actorsOf(outsiderTok))

	_, err := accounts.GrantOperator(s.w.Ctx, "outsider@example.net")
	require.NoError(t, err)
	all := actorsOf(outsiderTok)
	for _, id := range sinkOf {
		require.Contains(t, all, id, "the operator sees every actor")
	}
}
