package hooks_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/hooks"
	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/sinktest"
)

// hookBundle is a served engine, the host's webhooks on it, and
// POST /hooks/{id} on an httptest server.
type hookBundle struct {
	w      *hosttest.World
	eng    *engine.Engine
	hooks  *host.Webhooks
	server *httptest.Server
}

func setup(t *testing.T) *hookBundle {
	t.Helper()
	w := hosttest.NewWorld(t)
	eng := w.Serve()
	svc := host.NewWebhooks(host.WebhooksConfig{Pool: w.Pool, Emitter: eng, SecretKey: w.Key, Clock: w.Clock})
	srv := httptest.NewServer(hooks.New(httpx.Deps{Webhooks: svc, Logger: slog.New(slog.NewJSONHandler(w.Logs, nil))}))
	t.Cleanup(srv.Close)
	return &hookBundle{w: w, eng: eng, hooks: svc, server: srv}
}

func (b *hookBundle) post(t *testing.T, hookID int64, secret notifytype.Secret, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/hooks/%d", b.server.URL, hookID), strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	host.Sign(secret, host.NewMessageID(), b.w.Clock.Now(), []byte(body)).Set(req.Header)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	return resp.StatusCode, out
}

type gotifyMessage struct {
	Title    string `json:"title"`
	Message  string `json:"message"`
	Priority int    `json:"priority"`
}

func messages(t *testing.T, srv *sinktest.Server) []gotifyMessage {
	t.Helper()
	var out []gotifyMessage
	for _, r := range srv.Requests() {
		var m gotifyMessage
		require.NoError(t, json.Unmarshal(r.Body, &m))
		out = append(out, m)
	}
	return out
}

func payload(sender string, n int) string {
	b, _ := json.Marshal(map[string]any{
		"sender": map[string]any{"login": sender}, "repository": map[string]any{"full_name": "acme/forge"},
		"issue": map[string]any{"number": n, "title": fmt.Sprintf("issue %d", n)},
	})
	return string(b)
}

func TestQuarantineStormThroughHooks(t *testing.T) {
	t.Parallel()
	// Scenario: Quarantine storm
	b := setup(t)
	g := sinktest.NewServer(t, nil)
	_, p, scope := b.w.Human()
	b.w.Sink(b.eng, p, scope, enginetest.SinkOpts{
		BaseURL: g.URL, Secret: "gtfya.storm", Events: []notifytype.EventType{host.EventDeliveryQuarantined},
	})
	hook, secret, err := b.hooks.Create(b.w.Ctx, p, host.WebhookInput{Owner: scope, Name: "github-forge", TrustedSenders: []string{"octocat"}})
	require.NoError(t, err)

	const storm = 200
	start := b.w.Clock.Now()
	for i := range storm {
		if i > 0 {
			b.w.Clock.Advance(1500 * time.Millisecond)
		}
		status, out := b.post(t, hook.ID, secret, payload("mallory", i))
		require.Equal(t, http.StatusAccepted, status, out)
		require.Equal(t, "quarantined", out["outcome"])
	}
	require.Less(t, b.w.Clock.Since(start), 5*time.Minute, "200 deliveries in 5 minutes")
	require.Equal(t, storm, b.w.F.Count(`SELECT count(*) FROM webhook_deliveries WHERE outcome = 'quarantined'`))
	b.w.FanOut(b.eng)
	require.Equal(t, map[string]int{"pending": 1}, b.w.RowStates(), "the storm is one row")
	require.Empty(t, g.Requests(), "nothing is sent while the window is open")

	b.w.Clock.Advance(start.Add(engine.QuarantineWindowDefault).Sub(b.w.Clock.Now()))
	a := b.w.Wait()
	require.Equal(t, "delivered", a.State)

	msgs := messages(t, g)
	require.Len(t, msgs, 1, "exactly one message")
	require.Equal(t, "Quarantined delivery on github-forge: issue 0 (and 199 more)", msgs[0].Title)
	require.Contains(t, strings.Split(msgs[0].Message, "\n\n"), "This one and 199 more like it.")
	require.Contains(t, msgs[0].Message, fmt.Sprintf("/board/webhooks/%d/deliveries/", hook.ID))
}

func TestFriendshipFanOutThroughAWebhook(t *testing.T) {
	t.Parallel()
	// Scenario: Friendship fan-out
	b := setup(t)
	gA, gB := sinktest.NewServer(t, nil), sinktest.NewServer(t, nil)
	a, pA, scopeA := b.w.Human()
	bID, pB, scopeB := b.w.Human()
	sinkA := b.w.Sink(b.eng, pA, scopeA, enginetest.SinkOpts{BaseURL: gA.URL, Secret: "gtfya.a"})
	sinkB := b.w.Sink(b.eng, pB, scopeB, enginetest.SinkOpts{BaseURL: gB.URL, Secret: "gtfya.b"})
	queueB := b.w.F.Queue(scopeB, "inbox")
	endpointB := b.w.F.Endpoint(hosttest.EndpointOpts{Human: bID})
	require.NoError(t, b.hooks.BefriendQueue(b.w.Ctx, bID, queueB, scopeA), "B lets A's webhooks route to B's queue")

	hook, secret, err := b.hooks.Create(b.w.Ctx, pA, host.WebhookInput{Owner: scopeA, Name: "a-forge", TrustedSenders: []string{"octocat"}})
	require.NoError(t, err)
	_, err = b.hooks.SetRules(b.w.Ctx, pA, hook.ID, []host.RuleInput{{
		Name: "to my friend", Expr: `.issue != null`, Action: host.RuleAction{Queue: queueB},
	}})
	require.NoError(t, err)
	status, out := b.post(t, hook.ID, secret, payload("octocat", 42))
	require.Equal(t, http.StatusAccepted, status, out)
	require.Equal(t, "routed", out["outcome"])

	todos := host.NewTodos(b.w.Pool, b.eng, b.w.Clock)
	for {
		todo, ok, err := todos.Claim(b.w.Ctx, endpointB, queueB)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, scopeB, todo.Owner, "the routed todo is B's")
		require.Equal(t, hook.ID, todo.WebhookID)
		todo, err = todos.Fail(b.w.Ctx, endpointB, todo.ID, host.AttemptReport{Summary: "cannot reproduce"})
		require.NoError(t, err)
		if todo.State == host.TodoDead {
			break
		}
	}
	att := b.w.Wait()
	require.Equal(t, "delivered", att.State)
	require.Equal(t, sinkB, att.SinkID, "B's sink is notified")
	require.Len(t, gB.Requests(), 1)
	b.w.FanOut(b.eng)
	require.Zero(t, b.w.F.Count(`SELECT count(*) FROM switchboard.outbox WHERE sink_id = $1`, sinkA), "A's is not")
	require.Empty(t, gA.Requests())
	_ = a
}

func TestHooksRefuseAndChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, p, scope := b.w.Human()
	hook, secret, err := b.hooks.Create(b.w.Ctx, p, host.WebhookInput{Owner: scope, Name: "h", TrustedSenders: []string{"octocat"}})
	require.NoError(t, err)
	url := fmt.Sprintf("%s/hooks/%d", b.server.URL, hook.ID)
	send := func(body []byte, sig host.Envelope) (int, string) {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		require.NoError(t, err)
		sig.Set(req.Header)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	huge := []byte(`{"pad":"` + strings.Repeat("x", host.DeliveryMaxBytes) + `"}`)
	good := []byte(payload("octocat", 1))

	signed := func(sig string) host.Envelope {
		e := host.Sign(secret, host.NewMessageID(), b.w.Clock.Now(), good)
		e.Signature = sig
		return e
	}
	status, body := send(good, signed("v1,3q2+7w=="))
	require.Equal(t, http.StatusForbidden, status, body)
	status, body = send(good, signed(""))
	require.Equal(t, http.StatusForbidden, status, body)
	status, body = send(huge, host.Sign(secret, host.NewMessageID(), b.w.Clock.Now(), huge))
	require.Equal(t, http.StatusRequestEntityTooLarge, status, body)
	require.Contains(t, body, `"field": "body"`)
	status, body = send([]byte(`{"sender":`), host.Sign(secret, host.NewMessageID(), b.w.Clock.Now(), []byte(`{"sender":`)))
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Contains(t, body, "invalid_argument")
	status, _ = send(good, host.Sign(secret, host.NewMessageID(), b.w.Clock.Now(), good))
	require.Equal(t, http.StatusAccepted, status)

	req, _ := http.NewRequest(http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	req, _ = http.NewRequest(http.MethodPost, b.server.URL+"/hooks/999999", bytes.NewReader(good))
	host.Sign(secret, host.NewMessageID(), b.w.Clock.Now(), good).Set(req.Header)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "an unknown webhook is refused as a bad signature is")

	require.Equal(t, 1, b.w.F.Count(`SELECT count(*) FROM webhook_deliveries`), "only the good delivery is stored")
	require.NotContains(t, b.w.Logs.String(), secret.Reveal())
}

// An attacker probing /hooks/{id} cannot tell an id that exists from one
// that does not: an unknown id (never created, deleted, not a number) gets
// the very answer a bad signature gets, status, headers and body alike.
// The operator's log still says which it was.
func TestUnknownWebhookIsRefusedAsABadSignature(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, p, scope := b.w.Human()
	hook, secret, err := b.hooks.Create(b.w.Ctx, p, host.WebhookInput{Owner: scope, Name: "h", TrustedSenders: []string{"octocat"}})
	require.NoError(t, err)
	gone, goneSecret, err := b.hooks.Create(b.w.Ctx, p, host.WebhookInput{Owner: scope, Name: "gone"})
	require.NoError(t, err)
	require.NoError(t, b.hooks.Delete(b.w.Ctx, p, gone.ID))
	body := []byte(payload("octocat", 1))

	type answer struct {
		Status int
		Header http.Header
		Body   string
	}
	var sent []string
	send := func(id string, sig host.Envelope) answer {
		t.Helper()
		sent = append(sent, sig.Signature)
		req, err := http.NewRequest(http.MethodPost, b.server.URL+"/hooks/"+id, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		sig.Set(req.Header)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Header.Del("Date")
		return answer{Status: resp.StatusCode, Header: resp.Header, Body: string(raw)}
	}
	known := fmt.Sprint(hook.ID)
	signed := func(sig string) host.Envelope {
		e := host.Sign(secret, host.NewMessageID(), b.w.Clock.Now(), body)
		e.Signature = sig
		return e
	}
	badSignature := send(known, signed("v1,"+strings.Repeat("q83v", 11)))
	require.Equal(t, http.StatusForbidden, badSignature.Status)
	require.Contains(t, badSignature.Body, `"code": "forbidden"`)

	for name, got := range map[string]answer{
		"no signature":                              send(known, signed("")),
		"a malformed signature":                     send(known, signed("md5=nothex")),
		"the old scheme's signature":                send(known, signed(oldScheme(secret, body))),
		"another webhook's valid signature":         send(known, host.Sign(goneSecret, host.NewMessageID(), b.w.Clock.Now(), body)),
		"an id never created":                       send(fmt.Sprint(hook.ID+1000), host.Sign(secret, host.NewMessageID(), b.w.Clock.Now(), body)),
		"a deleted webhook, signed with its secret": send(fmt.Sprint(gone.ID), host.Sign(goneSecret, host.NewMessageID(), b.w.Clock.Now(), body)),
		"id 0":           send("0", host.Sign(secret, host.NewMessageID(), b.w.Clock.Now(), body)),
		"a negative id":  send("-5", host.Sign(secret, host.NewMessageID(), b.w.Clock.Now(), body)),
		"not a number":   send("forge", host.Sign(secret, host.NewMessageID(), b.w.Clock.Now(), body)),
		"an id too long": send(strings.Repeat("9", 40), host.Sign(secret, host.NewMessageID(), b.w.Clock.Now(), body)),
	} {
		require.Equal(t, badSignature, got, "%s is answered exactly as a bad signature", name)
	}
	require.Zero(t, b.w.F.Count(`SELECT count(*) FROM webhook_deliveries`), "nothing refused is stored")

	// The operator's log tells them apart, with neither body nor signature.
	var unknown, bad int
	for line := range strings.Lines(b.w.Logs.String()) {
		var l map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &l))
		if l["msg"] != "webhook delivery refused" {
			continue
		}
		switch l["reason"] {
		case host.RefusalUnknownWebhook:
			unknown++
			require.NotEqual(t, known, l["webhook_id"])
		case host.RefusalBadSignature:
			bad++
			require.Equal(t, known, l["webhook_id"])
		default:
			t.Fatalf("unexpected reason in %s", line)
		}
	}
	require.Equal(t, 6, unknown, "never created, deleted, 0, negative, not a number, too long")
	require.Equal(t, 5, bad)
	require.NotContains(t, b.w.Logs.String(), "octocat", "no body in the log")
	for _, sig := range sent {
		if len(sig) > 8 {
			require.NotContains(t, b.w.Logs.String(), sig[3:], "no signature in the log")
		}
	}
	require.NotContains(t, b.w.Logs.String(), strings.Repeat("9", 40), "a long id is cut")
}

// oldScheme is the X-Switchboard-Signature value of body (sha256= and the
// hex HMAC of the body alone), which is no longer accepted.
func oldScheme(secret notifytype.Secret, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret.Reveal()))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// TestNotifyOnlyRuleSaysWhatHappened: a rule that only notifies leaves
// the delivery "unrouted" for API clients (a machine value, documented),
// but the answer's summary, and the message the phone gets, say what
// happened in words and name what matched (issue 25 item 6).
func TestNotifyOnlyRuleSaysWhatHappened(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := sinktest.NewServer(t, nil)
	_, p, scope := b.w.Human()
	sinkID := b.w.Sink(b.eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.words"})
	_, err := b.w.Pool.Exec(b.w.Ctx, `UPDATE switchboard.sinks SET name = 'phone' WHERE id = $1`, sinkID)
	require.NoError(t, err)
	hook, secret, err := b.hooks.Create(b.w.Ctx, p, host.WebhookInput{Owner: scope, Name: "forge", TrustedSenders: []string{"octocat"}})
	require.NoError(t, err)
	_, err = b.hooks.SetRules(b.w.Ctx, p, hook.ID, []host.RuleInput{{
		Name: "new issues", Expr: `.issue != null`, Action: host.RuleAction{Notify: "phone"},
	}})
	require.NoError(t, err)
	status, out := b.post(t, hook.ID, secret, payload("octocat", 42))
	require.Equal(t, http.StatusAccepted, status, out)
	require.Equal(t, "unrouted", out["outcome"], "the machine value stays")
	require.Equal(t, "notified phone; no todo created", out["summary"])

	b.w.FanOut(b.eng)
	b.w.Wait()
	msgs := messages(t, g)
	require.Len(t, msgs, 1)
	require.Equal(t, "Rule matched on forge: issue 42", msgs[0].Title)
	require.Contains(t, msgs[0].Message, `Rule "new issues" matched; no todo was created.`)
	require.Contains(t, msgs[0].Message, "About: octocat · acme/forge · issue #42")
	require.NotContains(t, msgs[0].Message, "unrouted")
}
