package rest_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
)

type webhookAnswer struct {
	host.Webhook
	URL    string `json:"url"`
	Secret string `json:"secret"`
}

// webhook creates a webhook through the API trusting octocat, with one rule
// and one received delivery, and returns their ids.
func (b *bundle) webhook(t *testing.T, token string) (hook, rule, delivery int64) {
	t.Helper()
	var created webhookAnswer
	b.ok(t, http.StatusCreated, token, "POST", "/api/v1/webhooks", map[string]any{
		"name": "forge", "trusted_senders": []string{"octocat"},
	}).into(t, &created)
	var r host.Rule
	b.ok(t, http.StatusCreated, token, "POST", fmt.Sprintf("/api/v1/webhooks/%d/rules", created.ID), map[string]any{
		"name": "drop all", "expr": "true", "action": map[string]any{"drop": true},
	}).into(t, &r)
	body := []byte(`{"sender":{"login":"octocat"}}`)
	got, err := b.webhooks.Receive(b.w.Ctx, created.ID, body, host.Sign(notifytype.NewSecret(created.Secret), body))
	require.NoError(t, err)
	return created.ID, r.ID, got.DeliveryID
}

func TestWebhookRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, tok := b.human(t)
	var created webhookAnswer
	b.ok(t, http.StatusCreated, tok, "POST", "/api/v1/webhooks", map[string]any{
		"name": "forge", "trusted_senders": []string{"octocat"},
	}).into(t, &created)
	require.True(t, strings.HasPrefix(created.Secret, host.WebhookSecretPrefix), "the secret is shown on create")
	require.Equal(t, fmt.Sprintf("https://switchboard.example.net/hooks/%d", created.ID), created.URL)

	got := b.ok(t, http.StatusOK, tok, "GET", fmt.Sprintf("/api/v1/webhooks/%d", created.ID), nil)
	require.NotContains(t, string(got.body), created.Secret, "and never again")
	listed := b.ok(t, http.StatusOK, tok, "GET", "/api/v1/webhooks", nil)
	require.NotContains(t, string(listed.body), created.Secret)

	var rotated webhookAnswer
	b.ok(t, http.StatusOK, tok, "POST", fmt.Sprintf("/api/v1/webhooks/%d/secret", created.ID), nil).into(t, &rotated)
	require.NotEqual(t, created.Secret, rotated.Secret)

	// Rules: a bad one is refused naming the rule, and nothing is saved.
	e := b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "PUT", fmt.Sprintf("/api/v1/webhooks/%d/rules", created.ID),
		map[string]any{"rules": []map[string]any{
			{"name": "ok", "expr": "true", "action": map[string]any{"drop": true}},
			{"name": "pager", "expr": "true", "action": map[string]any{"notify": "nope"}},
		}})
	require.Equal(t, "rules[1].action.notify", e.Field)
	require.Contains(t, e.Message, `"pager"`)
	require.Zero(t, b.count(t, "webhook_rules"))

	var rules struct{ Rules []host.Rule }
	b.ok(t, http.StatusOK, tok, "PUT", fmt.Sprintf("/api/v1/webhooks/%d/rules", created.ID), map[string]any{"rules": []map[string]any{
		{"name": "issues", "expr": ".issue != null", "action": map[string]any{"drop": true}},
	}}).into(t, &rules)
	require.Len(t, rules.Rules, 1)
	var updated host.Rule
	b.ok(t, http.StatusOK, tok, "PUT", fmt.Sprintf("/api/v1/webhooks/%d/rules/%d", created.ID, rules.Rules[0].ID),
		map[string]any{"name": "issues", "expr": ".issue.number > 1", "action": map[string]any{"drop": true}}).into(t, &updated)
	require.Equal(t, rules.Rules[0].ID, updated.ID)

	body := []byte(`{"sender":{"login":"octocat"},"issue":{"number":2}}`)
	_, err := b.webhooks.Receive(b.w.Ctx, created.ID, body, host.Sign(notifytype.NewSecret(rotated.Secret), body))
	require.NoError(t, err)
	var deliveries struct{ Deliveries []host.Delivery }
	b.ok(t, http.StatusOK, tok, "GET", fmt.Sprintf("/api/v1/webhooks/%d/deliveries", created.ID), nil).into(t, &deliveries)
	require.Len(t, deliveries.Deliveries, 1)
	require.Equal(t, host.OutcomeDropped, deliveries.Deliveries[0].Outcome)
	require.Equal(t, updated.ID, deliveries.Deliveries[0].Trace.DecidedBy)
	b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "GET", fmt.Sprintf("/api/v1/webhooks/%d/deliveries?outcome=lost", created.ID), nil)

	var report host.TestReport
	b.ok(t, http.StatusOK, tok, "POST", fmt.Sprintf("/api/v1/webhooks/%d/rules/test", created.ID), map[string]any{
		"rules": []map[string]any{{"name": "none", "expr": "false", "action": map[string]any{"drop": true}}},
	}).into(t, &report)
	require.Equal(t, host.OutcomeUnrouted, report.Deliveries[0].Outcome)

	// Another human sees none of it.
	_, other := b.human(t)
	for _, path := range []string{"", "/rules", "/deliveries", fmt.Sprintf("/deliveries/%d", deliveries.Deliveries[0].ID)} {
		b.refused(t, http.StatusNotFound, "not_found", other, "GET", fmt.Sprintf("/api/v1/webhooks/%d%s", created.ID, path), nil)
	}
	b.refused(t, http.StatusNotFound, "not_found", other, "POST", fmt.Sprintf("/api/v1/webhooks/%d/secret", created.ID), nil)
	require.NotContains(t, b.w.Logs.String(), rotated.Secret)
}
