package web

import (
	"context"
	"encoding/json"
	"html"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// scopeOption is an owner scope the human may pick: their own, or a team
// they belong to.
type scopeOption struct {
	Scope notifytype.OwnerScope
	Label string
	Role  string // "" for the human's own scope
}

// Value is the scope as a form value.
func (o scopeOption) Value() string { return o.Scope.String() }

// scopeOptions lists the human's own scope and their teams (by name).
func (s *server) scopeOptions(ctx context.Context, a *actor) ([]scopeOption, error) {
	teams, err := s.dir.TeamsOf(ctx, hostid.Number(a.P.HumanID))
	if err != nil {
		return nil, err
	}
	out := []scopeOption{{Scope: notifytype.Human(a.P.HumanID), Label: "Me (" + a.Human.Name + ")"}}
	for _, t := range teams {
		out = append(out, scopeOption{Scope: t.Scope(), Label: "Team " + t.Name, Role: string(t.Role)})
	}
	return out, nil
}

// NameOf names an owner scope for people: "you (Ada, ada@example.net)"
// for the human's own, the team's name for their teams, and a neutral
// "team 4" for any other (never looked up: it may not be theirs to know).
func (v view) NameOf(sc notifytype.OwnerScope) string {
	if v.Human != nil && sc == hostid.Human(v.Human.ID) {
		return v.Human.Name + " (" + v.Human.Email + ")"
	}
	if i := slices.IndexFunc(v.Scopes, func(o scopeOption) bool { return o.Scope == sc }); i >= 0 {
		return strings.TrimPrefix(v.Scopes[i].Label, "Team ")
	}
	return scopeLabel(sc)
}

// formFields maps the service's field names to the form inputs they are
// about, where the two differ.
var formFields = map[string]string{
	"options.priorities.low":    "priority_low",
	"options.priorities.normal": "priority_normal",
	"options.priorities.high":   "priority_high",
	"options.config_key":        "config_key",
	"options.tag":               "tag",
	"secret.urls":               "apprise_urls",
	"secret.authorization":      "apprise_authorization",
	"todo_id":                   "todo",
	"action.queue":              "queue",
	"action.notify":             "notify",
	"action.notify_severity":    "notify_severity",
	"action.drop":               "action",
}

// fieldLabels are the words a person knows each form input by.
var fieldLabels = map[string]string{
	"name":                  "Name",
	"email":                 "Your email",
	"kind":                  "Kind",
	"owner":                 "Owner",
	"account_key":           "Server base URL",
	"secret":                "Token",
	"apprise_urls":          "Apprise URLs",
	"apprise_authorization": "Authorization header value",
	"connection_id":         "Connection",
	"priority_low":          "Priority for low",
	"priority_normal":       "Priority for normal",
	"priority_high":         "Priority for high",
	"config_key":            "Apprise config key",
	"tag":                   "Apprise tag",
	"budget_per_hour":       "Messages per hour",
	"budget_burst":          "Burst",
	"event_types":           "Event types",
	"queues":                "Queues",
	"endpoints":             "Endpoints",
	"webhooks":              "Webhooks",
	"min_severity":          "Minimum severity",
	"title":                 "Title",
	"payload":               "Payload",
	"attempt_cap":           "Attempts before it dead-letters",
	"grants":                "What it may do",
	"todo":                  "Todo",
	"expr":                  "jq expression",
	"queue":                 "Route to queue",
	"notify":                "Notify sink",
	"notify_severity":       "Severity",
	"action":                "What the rule does",
}

// errField is the form input the page's refusal is about, "" for none.
func (v view) errField() string {
	if v.Err == nil {
		if v.Note != nil {
			return v.Note.Field
		}
		return ""
	}
	switch v.Err.Code {
	case notifytype.CodeForbiddenScheme:
		return "apprise_urls"
	case notifytype.CodeEncryptionRequired:
		return "secret"
	}
	if f, ok := formFields[v.Err.Field]; ok {
		return f
	}
	return v.Err.Field
}

// Invalid marks the input name when the refusal is about it: aria-invalid
// and the id of the message under it.
func (v view) Invalid(name string) template.HTMLAttr {
	if v.errField() != name || name == "" {
		return ""
	}
	return template.HTMLAttr(`aria-invalid="true" aria-describedby="error-` + html.EscapeString(name) + `"`)
}

// ErrorUnder is the refusal's message for the input name, shown under it;
// empty unless the refusal is about that input.
func (v view) ErrorUnder(name string) template.HTML {
	if v.errField() != name || name == "" {
		return ""
	}
	msg := ""
	if v.Err != nil {
		msg = v.Err.Message
	} else if v.Note != nil {
		msg = v.Note.Message
	}
	return template.HTML(`<p class="field-error" id="error-` + html.EscapeString(name) + `">` +
		html.EscapeString(sentence(msg)) + `</p>`)
}

// Headline is the refusal's banner in words: what happened and, for a
// field, which one by its label.
func (v view) Headline() string {
	e := v.Err
	if e == nil {
		return ""
	}
	lead := map[notifytype.Code]string{
		notifytype.CodeInvalidArgument:    "Not saved",
		notifytype.CodeForbiddenScheme:    "Not saved: this kind of Apprise URL is not allowed on this instance",
		notifytype.CodeEncryptionRequired: "Not saved: this instance cannot store secrets until its operator sets SWITCHBOARD_SECRET_KEY",
		notifytype.CodeForbidden:          "Not allowed",
		notifytype.CodeNotFound:           "Not found",
		notifytype.CodeRateLimited:        "Too many requests",
	}[e.Code]
	if lead == "" {
		lead = "Something went wrong"
	}
	if v.Testing && e.Code == notifytype.CodeInvalidArgument {
		lead = "Not sent"
	}
	if f := v.errField(); f == "todo" {
		return "Could not do that. " + sentence(e.Message)
	} else if f != "" && e.Code == notifytype.CodeInvalidArgument {
		label := fieldLabels[f]
		if label == "" {
			label = strings.ReplaceAll(strings.ReplaceAll(f, "_", " "), ".", " ")
		}
		return lead + ": check " + label + " below. " + sentence(e.Message)
	}
	if e.Scheme != "" {
		lead += " (" + e.Scheme + "://)"
	}
	if e.Message != "" && e.Code != notifytype.CodeEncryptionRequired {
		return lead + ". " + sentence(e.Message)
	}
	return lead + "."
}

// sentence capitalises a message and ends it with a full stop.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, ")") {
		s += "."
	}
	return s
}

// classHelp says in words what an error class means and what to do.
func classHelp(c notifytype.ErrorClass) string {
	switch c {
	case notifytype.ClassNetwork:
		return "The server could not be reached (connection refused or reset, or its name did not resolve). Check the connection's base URL and that the server is up. Notifications are retried; a test message is not."
	case notifytype.ClassTimeout:
		return "The server did not answer within 10 seconds. Notifications are retried; if it keeps happening, check the server's load and network."
	case notifytype.ClassTLS:
		return "The secure connection failed: the server's certificate is invalid, expired, or for another name. Fix the certificate or the base URL's host name."
	case notifytype.ClassAuth:
		return "The server refused the credentials (HTTP 401 or 403). Replace the connection's token with a valid one."
	case notifytype.ClassRejected:
		return "The server refused the message (an HTTP 4xx other than 401 and 403). Check the sink's options, such as the Apprise config key or tag."
	case notifytype.ClassServer:
		return "The server failed (HTTP 5xx). Notifications are retried, up to 7 attempts over about 30 minutes."
	case notifytype.ClassRedirect:
		return "The server answered with a redirect, which is never followed. Set the connection's base URL to the address it redirects to."
	case notifytype.ClassPartial:
		return "Apprise reached some of its services but not all (HTTP 424), or the tag matched nothing. Check the Apprise configuration and the sink's tag."
	case notifytype.ClassConfig:
		return "Apprise has no configuration for this key, or no valid URL was given (HTTP 204). Check the sink's config key or the connection's Apprise URLs; this is not retried."
	case notifytype.ClassBlocked:
		return "The address was refused before sending: it is private or loopback (the operator can allow it with SWITCHBOARD_PRIVATE_HOSTS), or it is plain http (allowed only with SWITCHBOARD_PUSH_ALLOW_HTTP). This is not retried."
	case "abandoned":
		return "The instance sending it stopped before the outcome was known, so it may or may not have arrived. It counts as an attempt."
	case notifytype.ClassNone:
		return ""
	}
	return "Delivery failed with class " + string(c) + "."
}

// notices are the fixed messages a redirect after a successful form names
// in its query (?notice=…): a page never shows text a request carried.
var notices = map[string]string{
	"connection_created":   "Connection created. Its secret is sealed and will not be shown again.",
	"connection_deleted":   "Connection deleted.",
	"connection_saved":     "Connection saved. Its sinks use it from their next message.",
	"sink_created":         "Sink created. Subscribe it to events below, or send a test message.",
	"sink_saved":           "Sink saved.",
	"sink_enabled":         "Sink enabled.",
	"sink_disabled":        "Sink disabled: it sends nothing until enabled again.",
	"sink_deleted":         "Sink deleted. Its delivery records are kept.",
	"subscription_added":   "Subscription added. Matching events now reach this sink.",
	"subscription_deleted": "Subscription deleted.",
	"webhook_deleted":      "Webhook deleted. Deliveries to its URL are refused; the deliveries it received are kept for 30 days.",
	"digest_deleted":       "Digest deleted. It will not be sent again.",
	"digest_saved":         "Saved.",
	"digest_sent":          "Sent now; the scheduled send is unchanged.",
	"secret_shown":         "The secret was shown once and is not shown again. Rotate it for a new one.",
	"credential_shown":     "The credential was shown once and is not shown again. Create a new endpoint for a new one.",
	"endpoint_revoked":     "Endpoint revoked. Its credential no longer works, and todos it held have dead-lettered.",
	"queue_created":        "Queue created.",
	"todo_enqueued":        "Todo enqueued.",
	"todo_dead_lettered":   "Todo dead-lettered. Subscribed sinks are notified in a moment: see Notifications.",
	"todo_requeued":        "Todo re-queued: it is pending again.",
}

// noticeOf reads the ?notice= of a page.
func noticeOf(r *http.Request) string { return notices[r.URL.Query().Get("notice")] }

// withNotice adds ?notice=key (and the owner scope, when set) to path.
func withNotice(path, key string, scope *notifytype.OwnerScope) string {
	q := url.Values{}
	if scope != nil {
		q.Set("owner", scope.String())
	}
	q.Set("notice", key)
	return path + "?" + q.Encode()
}

// itoa is strconv.FormatInt for ids.
func itoa(id int64) string { return strconv.FormatInt(id, 10) }

// jsonObject is {key: value} as JSON.
func jsonObject(key, value string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{key: value}) // strings always marshal
	return b
}
