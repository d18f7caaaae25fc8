package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/gotify"
)

// phoneBase is the board's base URL in the README's examples.
const phoneBase = "https://switchboard.example.net"

// phoneExample is one message the README shows: what causes it, and the
// content its source gives the engine (the same fields the host and the
// engine's feature packages fill).
type phoneExample struct {
	heading string
	meta    sinks.Meta
	content engine.Content
	message *sinks.Message // set for messages not built by Render
}

// phoneDigest is a digest as the reference host builds it on a day with
// something to say: a dead letter, a stalled todo, waiting work, and the
// sections this instance does not measure.
func phoneDigest() digest.Report {
	at := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	return digest.Report{
		DigestID: 4, Name: "morning", Since: at.Add(-24 * time.Hour), At: at, Threshold: time.Hour,
		Queues: []digest.Queue{{ID: 1, Name: "builds"}, {ID: 2, Name: "inbox"}},
		Pending: digest.Section[map[int64]digest.Pending]{Data: map[int64]digest.Pending{
			1: {Count: 3, OldestAge: 2*time.Hour + 5*time.Minute}}},
		Claimed:       digest.Section[map[int64]int]{Data: map[int64]int{1: 1}},
		StalledLeases: digest.Section[map[int64]int]{Data: map[int64]int{1: 1}},
		DeadLetters: digest.Section[map[int64]digest.DeadLetters]{Data: map[int64]digest.DeadLetters{
			1: {Count: 1, Recent: []digest.TodoRef{{ID: 1817, Title: "Nightly build failed on main"}}}}},
		AdmissionDeferred: digest.Section[map[int64]int]{Unavailable: digest.NotMeasured},
		Quarantined:       digest.Section[[]digest.NamedCount]{},
		UnheardDoorbells:  digest.Section[[]digest.NamedCount]{Unavailable: digest.NotMeasured},
		ClockedOut:        digest.Section[[]string]{Unavailable: digest.NotMeasured},
		Undeliverable:     digest.Section[int]{},
	}
}

func phoneExamples() []phoneExample {
	// The host's counts, in the spec's order of types, with its link.
	coalesced := sinks.RenderCounts([]sinks.Count{
		{Label: host.CoalescedLabel(host.EventTodoDeadLettered), N: 9, Severity: notifytype.SeverityHigh},
		{Label: host.CoalescedLabel(host.EventDeliveryQuarantined), N: 3, Severity: notifytype.SeverityNormal},
	}, phoneBase+host.CoalescedLinkPath, host.BoardLinkText)
	test := sinks.RenderTest()
	return []phoneExample{
		{heading: "A todo dead-letters (`todo.dead_lettered`)",
			meta: sinks.Meta{EventType: host.EventTodoDeadLettered},
			content: host.WithTodo(engine.Content{Title: "Nightly build failed on main", Place: "builds", LinkPath: "/board/todos/1817"},
				host.TodoContent{Cause: "fail at the cap", Attempts: 3, AttemptSummary: "3 tests failed in ./engine"})},
		{heading: "You make a todo dead-letter yourself (`todo.dead_lettered`, interrupted)",
			meta: sinks.Meta{EventType: host.EventTodoDeadLettered},
			content: host.WithTodo(engine.Content{Title: "Try the new parser", Place: "inbox", LinkPath: "/board/todos/1820"},
				host.TodoContent{Cause: "interrupted"})},
		{heading: "A relay todo runs out of attempts (`relay.exhausted`)",
			meta: sinks.Meta{EventType: host.EventRelayExhausted},
			content: host.WithTodo(engine.Content{Title: "Reply to acme/forge#12", Place: "replies", LinkPath: "/board/todos/1822"},
				host.TodoContent{Cause: "fail at the cap", Attempts: 7, OriginDisplay: "acme/forge#12"})},
		{heading: "Deliveries from an untrusted sender are quarantined (`delivery.quarantined`, a storm is one message)",
			meta: sinks.Meta{EventType: host.EventDeliveryQuarantined, Count: 4},
			content: engine.Content{Title: "Free crypto", Place: "forge", Summary: "a delivery from an untrusted sender was quarantined",
				LinkPath: "/board/webhooks/1/deliveries/57"}},
		{heading: "A webhook rule that notifies matches (`rule.notify`)",
			meta: sinks.Meta{EventType: host.EventRuleNotify},
			content: engine.Content{Title: "The build is red", Place: "forge", Summary: `rule "new issues" matched; no todo was created`,
				Subject: "octocat · acme/forge · issue #12", LinkPath: "/board/webhooks/1/deliveries/58"}},
		{heading: "An agent pages you (`agent.notify`)",
			meta:    sinks.Meta{EventType: engine.EventAgentNotify},
			content: engine.Content{Title: "Deploy is waiting for your approval", LinkPath: "/board/todos/1830"}},
		{heading: "The queue digest (`digest`)",
			meta: sinks.Meta{EventType: engine.EventDigest},
			content: engine.Content{Place: "morning", LinkPath: "/board/digests/4",
				Lines: phoneDigest().Lines(digest.Plain, phoneBase, digest.Links{
					Todo: func(id int64) string { return "/board/todos/" + strconv.FormatInt(id, 10) }})}},
		{heading: "A sink's budget was spent, and what waited is summed up", message: &coalesced},
		{heading: "Send test", message: &test},
	}
}

// phoneMarkdown renders the README section: each message's title and its
// Markdown body (what Gotify shows) as a quote, with its Gotify priority.
func phoneMarkdown() string {
	prio := gotify.Options{}.WithDefaults().Priorities
	var b strings.Builder
	b.WriteString("<!-- phone-messages:begin (written by TestREADMEShowsWhatYourPhoneReceives; UPDATE_README=1 rewrites it) -->\n")
	for _, ex := range phoneExamples() {
		m := ex.message
		if m == nil {
			ex.meta.BaseURL = phoneBase
			var r sinks.Message
			switch ex.meta.EventType {
			case engine.EventAgentNotify, engine.EventDigest: // the engine's own kinds
				r = engine.RenderOwnForTest(ex.content, ex.meta, host.Links().Text)
			default:
				r = host.Render(ex.content, ex.meta)
			}
			m = &r
		}
		fmt.Fprintf(&b, "\n#### %s\n\nGotify priority %d (%s).\n\n", ex.heading, prio[m.Severity], m.Severity)
		fmt.Fprintf(&b, "> **%s**\n>\n", m.Title)
		for i, l := range strings.Split(m.Markdown, "\n") {
			_ = i
			if l == "" {
				b.WriteString(">\n")
				continue
			}
			b.WriteString("> " + l + "\n")
		}
	}
	b.WriteString("\n<!-- phone-messages:end -->")
	return b.String()
}

// TestREADMEShowsWhatYourPhoneReceives keeps the README's "What your
// phone receives" in step with the wording: the section is exactly what
// the engine delivers for each of the reference host's event types (its
// wording, host.Draft), the engine's own (agent.notify, digest), the
// coalesced message and the send test (issue 25).
func TestREADMEShowsWhatYourPhoneReceives(t *testing.T) {
	path := filepath.Join("..", "README.md")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	readme := string(raw)
	const begin, end = "<!-- phone-messages:begin", "<!-- phone-messages:end -->"
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	require.True(t, i >= 0 && j > i, "README.md has the phone-messages markers")
	want := phoneMarkdown()
	if os.Getenv("UPDATE_README") == "1" {
		readme = readme[:i] + want + readme[j+len(end):]
		require.NoError(t, os.WriteFile(path, []byte(readme), 0o644))
		return
	}
	require.Equal(t, want, readme[i:j+len(end)], "README.md's phone messages drifted from the renderer: run UPDATE_README=1 go test -run TestREADMEShowsWhatYourPhoneReceives ./engine/")
}
