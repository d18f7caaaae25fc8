package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
)

// TestSignedWebhookReachesASinkThroughANotifyRule is the README's curl
// path through the assembled server: an owner creates a webhook and a
// notify rule with the operator API, a sender posts a signed delivery
// larger than the management routes' 16 KiB to /hooks/{id}, and the rule's
// sink receives the message; the sink's delivery records and the
// delivery's trace show it.
func TestSignedWebhookReachesASinkThroughANotifyRule(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	api := func(method, path string, body any) (int, []byte) {
		t.Helper()
		b, err := json.Marshal(body)
		require.NoError(t, err)
		req, err := http.NewRequest(method, s.url+path, bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+s.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}

	status, out := api("POST", "/api/v1/webhooks", map[string]any{"name": "forge", "trusted_senders": []string{"octocat"}})
	require.Equal(t, http.StatusCreated, status, string(out))
	var hook struct {
		ID     int64  `json:"id"`
		URL    string `json:"url"`
		Secret string `json:"secret"`
	}
	require.NoError(t, json.Unmarshal(out, &hook))
	require.Equal(t, fmt.Sprintf("http://127.0.0.1/hooks/%d", hook.ID), hook.URL)
	status, out = api("POST", fmt.Sprintf("/api/v1/webhooks/%d/rules", hook.ID), map[string]any{
		"name": "new issues", "expr": `.action == "opened"`, "action": map[string]any{"notify": "demo-gotify", "notify_severity": "high"},
	})
	require.Equal(t, http.StatusCreated, status, string(out))

	body, err := json.Marshal(map[string]any{
		"action": "opened", "sender": map[string]any{"login": "octocat"},
		"repository": map[string]any{"full_name": "acme/forge"},
		"issue":      map[string]any{"number": 12, "title": "The build is red", "body": strings.Repeat("long log line\n", 2000)},
	})
	require.NoError(t, err)
	require.Greater(t, len(body), 16<<10, "a delivery may be larger than a management body")
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/hooks/%d", s.url, hook.ID), bytes.NewReader(body))
	require.NoError(t, err)
	host.Sign(notifytype.NewSecret(hook.Secret), host.NewMessageID(), s.w.Clock.Now(), body).Set(req.Header)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(answer))
	requireStandardHeaders(t, resp)

	a := s.w.WaitFor(func(a engine.Attempt) bool { return a.State == "delivered" })
	require.Equal(t, host.EventRuleNotify, a.EventType)
	inbox := s.receivers.Inbox()
	require.Len(t, inbox, 1, "only the named sink hears of it")
	require.Equal(t, "gotify", inbox[0].Receiver)
	require.Equal(t, "Rule matched on forge: The build is red", inbox[0].Title)
	require.NotContains(t, inbox[0].Body, "long log line", "no payload text without an opted-in excerpt")

	status, out = api("GET", fmt.Sprintf("/api/v1/sinks/%d/deliveries", a.SinkID), nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(out), `"rule.notify"`, "the sink's delivery records show it")
	var received struct {
		DeliveryID int64 `json:"delivery_id"`
	}
	require.NoError(t, json.Unmarshal(answer, &received))
	status, out = api("GET", fmt.Sprintf("/api/v1/webhooks/%d/deliveries/%d", hook.ID, received.DeliveryID), nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(out), `"sink": "demo-gotify"`, "the trace names the sink")
}

// TestREADMECurlExample runs the README's "Your first event" shell block,
// as written, with bash, curl and openssl against the assembled server: the
// webhook and rule it creates, the delivery it signs the Standard Webhooks
// way, and the same delivery sent again, answered as a duplicate. Only its
// two export lines (placeholders for the reader's values) are replaced.
func TestREADMECurlExample(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "openssl", "base64"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	s := newServer(t)
	// The README's rule notifies the sink named "phone".
	_, err := s.w.Pool.Exec(s.w.Ctx, `UPDATE switchboard.sinks SET name = 'phone' WHERE name = 'demo-gotify'`)
	require.NoError(t, err)

	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	section := string(readme[bytes.Index(readme, []byte("## Your first event")):])
	block := section[strings.Index(section, "```sh\n")+len("```sh\n"):]
	block = block[:strings.Index(block, "```")]
	before, after, ok := strings.Cut(block, "export HOOK=1 SECRET=sbw_...\n")
	require.True(t, ok, "the README sets HOOK and SECRET after creating the webhook")
	require.True(t, strings.HasPrefix(before, "export SB=http://localhost:8080 TOKEN=sbo_...\n"))
	before = strings.TrimPrefix(before, "export SB=http://localhost:8080 TOKEN=sbo_...\n")
	apiFunc := strings.SplitAfter(before, "\n")[0]
	require.True(t, strings.HasPrefix(apiFunc, "api() {"))

	run := func(script string, env ...string) string {
		t.Helper()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Env = append(os.Environ(), append([]string{"SB=" + s.url, "TOKEN=" + s.token}, env...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		return string(out)
	}
	var hook struct {
		ID     int64  `json:"id"`
		Secret string `json:"secret"`
	}
	require.NoError(t, json.Unmarshal([]byte(run(before)), &hook))
	// The rest, then its last command once more (same id, body and signature).
	lines := strings.Split(strings.TrimSpace(after), "\n")
	var post []string
	for i, l := range lines {
		if strings.HasPrefix(l, "curl ") {
			post = lines[i : i+2]
		}
	}
	require.NotNil(t, post, "the README posts with curl")
	out := run(apiFunc+after+"echo\n"+strings.Join(post, "\n")+"\n",
		fmt.Sprintf("HOOK=%d", hook.ID), "SECRET="+hook.Secret)
	answers := strings.Split(strings.TrimSpace(out), "\n}\n")
	require.Len(t, answers, 3, "the rule, the delivery and the repeat: %s", out)
	var first, again struct {
		DeliveryID int64  `json:"delivery_id"`
		Outcome    string `json:"outcome"`
	}
	require.NoError(t, json.Unmarshal([]byte(answers[1]+"}"), &first), out)
	require.NoError(t, json.Unmarshal([]byte(answers[2]), &again), out)
	require.Equal(t, "unrouted", first.Outcome, "as the README says")
	require.Equal(t, "duplicate", again.Outcome)
	require.Equal(t, first.DeliveryID, again.DeliveryID)

	a := s.w.WaitFor(func(a engine.Attempt) bool { return a.State == "delivered" })
	require.Equal(t, host.EventRuleNotify, a.EventType)
	inbox := s.receivers.Inbox()
	require.Len(t, inbox, 1, "one message, the repeat did nothing")
	require.Equal(t, "Rule matched on forge: The build is red", inbox[0].Title)
	require.Equal(t, 1, s.w.F.Count(`SELECT count(*) FROM webhook_deliveries`))
}
