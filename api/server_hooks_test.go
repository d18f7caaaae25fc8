package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	require.Equal(t, notifytype.EventRuleNotify, a.EventType)
	inbox := s.receivers.Inbox()
	require.Len(t, inbox, 1, "only the named sink hears of it")
	require.Equal(t, "gotify", inbox[0].Receiver)
	require.Equal(t, "[rule.notify] forge: The build is red", inbox[0].Title)
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
