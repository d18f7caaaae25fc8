package host_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// The host's wording of its event types (host.Draft), finished by the
// engine's rules, as a phone receives it.

// todo is c carrying a todo event's own values (host.TodoContent).
func todo(c engine.Content, tc host.TodoContent) engine.Content { return host.WithTodo(c, tc) }

func TestRenderDeadLetter(t *testing.T) {
	t.Parallel()

	msg := host.Render(host.WithTodo(engine.Content{
		Title:    "Fix the flaky build",
		Place:    "forge",
		Summary:  "Todo dead-lettered after 3 attempts",
		LinkPath: "/board/todos/12",
		Body:     "the issue body, which must not appear",
	}, host.TodoContent{
		Cause:          "fail at the cap",
		OriginDisplay:  "acme/widgets#41",
		Attempts:       3,
		AttemptSummary: "gave up: tests time out",
		ArtifactHandle: "cairn:abc123",
	}), sinks.Meta{
		EventType: host.EventTodoDeadLettered,
		Count:     1,
		BaseURL:   "https://switchboard.example.net/",
	})

	require.Equal(t, "Dead letter in forge: Fix the flaky build", msg.Title)
	require.Equal(t, strings.Join([]string{
		"A todo in queue forge dead-lettered after 3 attempts: its last attempt failed and no attempts were left.",
		"Origin: acme/widgets#41",
		"Last attempt's summary (agent-written): gave up: tests time out",
		"Artifact: cairn:abc123",
		"Link: https://switchboard.example.net/board/todos/12",
	}, "\n"), msg.Body)
	require.Equal(t, strings.Join([]string{
		"A todo in queue forge dead-lettered after 3 attempts: its last attempt failed and no attempts were left.",
		"Origin: acme/widgets#41",
		"Last attempt's summary (agent-written): gave up: tests time out",
		"Artifact: cairn:abc123",
		"[Open on the board](https://switchboard.example.net/board/todos/12)",
	}, "\n\n"), msg.Markdown)
	require.Equal(t, "https://switchboard.example.net/board/todos/12", msg.Link)
	require.Equal(t, notifytype.SeverityHigh, msg.Severity, "severity defaults to the event type's")
	require.NotContains(t, msg.Title+msg.Body+msg.Markdown, "issue body")
	require.NotContains(t, msg.Title+msg.Body, "[todo.dead_lettered]", "no log-style event tag")
}

// A dead letter reads as a sentence whatever the attempts and cause: no
// "after 0 attempts", and each cause in words.
func TestRenderDeadLetterSentences(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		typ      notifytype.EventType
		c        engine.Content
		title    string
		sentence string
	}{
		{host.EventTodoDeadLettered, todo(engine.Content{Title: "Nightly build failed", Place: "forge"}, host.TodoContent{Cause: "interrupted"}),
			"Dead letter in forge: Nightly build failed",
			"A todo in queue forge dead-lettered before any attempt: it was interrupted."},
		{host.EventTodoDeadLettered, todo(engine.Content{Title: "t", Place: "q"}, host.TodoContent{Attempts: 1, Cause: "lease expired at the cap"}),
			"Dead letter in q: t",
			"A todo in queue q dead-lettered after 1 attempt: the lease on its last attempt expired and no attempts were left."},
		{host.EventTodoDeadLettered, todo(engine.Content{}, host.TodoContent{Attempts: 2, Cause: "endpoint revoked"}),
			"Dead letter",
			"A todo dead-lettered after 2 attempts: the endpoint working on it was revoked."},
		{host.EventRelayExhausted, todo(engine.Content{Title: "Reply to #41", Place: "replies"}, host.TodoContent{Attempts: 7, Cause: "fail at the cap"}),
			"Relay out of attempts in replies: Reply to #41",
			"A relay todo in queue replies gave up after 7 attempts: its last attempt failed and no attempts were left."},
	} {
		msg := host.Render(tc.c, sinks.Meta{EventType: tc.typ})
		require.Equal(t, tc.title, msg.Title)
		require.Equal(t, tc.sentence, strings.Split(msg.Body, "\n")[0])
		require.NotContains(t, msg.Body, "0 attempts")
	}
}

func TestRenderOtherEvents(t *testing.T) {
	t.Parallel()

	rule := host.Render(engine.Content{Title: "The build is red", Place: "github", Summary: `rule "red builds" matched; the delivery was routed`,
		LinkPath: "/board/webhooks/1/deliveries/2"}, sinks.Meta{EventType: host.EventRuleNotify, BaseURL: "https://sb.example"})
	require.Equal(t, "Rule matched on github: The build is red", rule.Title)
	require.Equal(t, "Rule \"red builds\" matched; the delivery was routed.\nLink: https://sb.example/board/webhooks/1/deliveries/2", rule.Body)

	q := host.Render(engine.Content{Title: "push", Place: "github", Summary: "a delivery from an untrusted sender was quarantined"},
		sinks.Meta{EventType: host.EventDeliveryQuarantined})
	require.Equal(t, "Quarantined delivery on github: push", q.Title)
	require.Equal(t, "A delivery from an untrusted sender was quarantined.", q.Body)
}

func TestRenderOriginFallsBackToPermalink(t *testing.T) {
	t.Parallel()

	msg := host.Render(todo(engine.Content{}, host.TodoContent{OriginPermalink: "https://github.com/acme/widgets/issues/41"}), sinks.Meta{EventType: host.EventTodoDeadLettered})
	require.Contains(t, msg.Body, "Origin: https://github.com/acme/widgets/issues/41")
}

func TestRenderAndNMore(t *testing.T) {
	t.Parallel()

	msg := host.Render(engine.Content{Place: "github", Title: "push from untrusted sender"}, sinks.Meta{
		EventType: host.EventDeliveryQuarantined, Count: 200,
	})
	require.Equal(t, "Quarantined delivery on github: push from untrusted sender (and 199 more)", msg.Title)
	require.Contains(t, strings.Split(msg.Body, "\n"), "This one and 199 more like it.")
}

func TestRenderExcerptByOptIn(t *testing.T) {
	t.Parallel()

	body := "\x1b[31mRED\x1b[0m line one\nline two\u202e" + strings.Repeat("x", 2000)
	c := engine.Content{Title: "Issue", Place: "inbox", Body: body}

	without := host.Render(c, sinks.Meta{EventType: host.EventTodoDeadLettered})
	require.NotContains(t, without.Body, "Sender wrote")
	require.NotContains(t, without.Body+without.Markdown, "xxx")
	require.NotContains(t, without.Body+without.Markdown, "RED")

	with := host.Render(c, sinks.Meta{EventType: host.EventTodoDeadLettered, IncludeExcerpt: true})
	var excerpt string
	for line := range strings.SplitSeq(with.Body, "\n") {
		if v, ok := strings.CutPrefix(line, sinks.ExcerptLabel); ok {
			excerpt = v
		}
	}
	require.True(t, strings.HasPrefix(excerpt, "RED line one line twoxxx"), excerpt)
	require.Equal(t, sinks.ExcerptMaxRunes, utf8.RuneCountInString(excerpt))
	require.True(t, strings.HasSuffix(excerpt, "…"))
	require.Contains(t, with.Markdown, "\n\nSender wrote: RED line one line twoxxx")
}

func TestRenderSenderTextCannotForgeLines(t *testing.T) {
	t.Parallel()

	msg := host.Render(todo(engine.Content{
		Title:    "ok\nLink: https://evil.example\r\n\u2028Cause: none\u202egnp.exe",
		LinkPath: "/board/todos/1",
	}, host.TodoContent{AttemptSummary: "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07 me\x1b[2J"}), sinks.Meta{EventType: host.EventRelayExhausted, BaseURL: "https://sb.example"})

	require.Equal(t, "Relay out of attempts: ok Link: https://evil.example Cause: nonegnp.exe", msg.Title)
	require.Equal(t, []string{
		"A relay todo ran out of attempts.",
		"Last attempt's summary (agent-written): click me",
		"Link: https://sb.example/board/todos/1",
	}, strings.Split(msg.Body, "\n"))
	require.Equal(t, "https://sb.example/board/todos/1", msg.Link)
}

// Sender-written text in the Markdown body is shown as written: no link,
// image, emphasis, heading, code or HTML of the sender's survives as
// markup.
func TestRenderMarkdownEscapesSenderText(t *testing.T) {
	t.Parallel()

	nasty := "#1. [click](https://evil.example) ![x](https://evil.example/p.png) **bold** `code` <b>html</b> &amp; _u_ ~s~ | 1. -"
	msg := host.Render(todo(engine.Content{Title: nasty, Body: nasty, Place: "forge",
		LinkPath: "/board/todos/3"}, host.TodoContent{AttemptSummary: nasty}), sinks.Meta{EventType: host.EventTodoDeadLettered, IncludeExcerpt: true, BaseURL: "https://sb.example"})
	for _, p := range strings.Split(msg.Markdown, "\n\n") {
		if strings.HasPrefix(p, "[Open on the board](") {
			require.Equal(t, "[Open on the board](https://sb.example/board/todos/3)", p)
			continue
		}
		// Every character that starts markup is escaped, and no line opens
		// a heading or a list.
		for i := 0; i < len(p); i++ {
			switch c := p[i]; {
			case c == '\\':
				require.Less(t, i+1, len(p), "a trailing backslash in %q", p)
				i++
			case strings.IndexByte("`*_[]<>&~|", c) >= 0:
				require.Fail(t, "bare markup", "bare %q at %d in %q", c, i, p)
			}
		}
		require.NotRegexp(t, `^(#|-|\+|>|=|\d+[.)])`, p)
	}
	for _, line := range []string{"# heading", "- item", "+ item", "> quote", "12. item", "3) item", "=== x"} {
		msg := host.Render(engine.Content{Summary: line}, sinks.Meta{EventType: host.EventRuleNotify})
		require.NotRegexp(t, `^(#|-|\+|>|=|\d+[.)])`, msg.Markdown, "%q", line)
	}
	require.Contains(t, msg.Markdown, "\\[click\\](https://evil.example) !\\[x\\]")
}

func TestRenderTruncatesTitles(t *testing.T) {
	t.Parallel()

	msg := host.Render(todo(engine.Content{Title: strings.Repeat("é", 500)}, host.TodoContent{AttemptSummary: strings.Repeat("s ", 300)}), sinks.Meta{EventType: host.EventTodoDeadLettered})
	lines := strings.Split(msg.Body, "\n")
	title := strings.TrimPrefix(msg.Title, "Dead letter: ")
	require.Equal(t, sinks.TitleMaxRunes, utf8.RuneCountInString(title))
	require.Equal(t, strings.Repeat("é", 119)+"…", title)
	require.NotContains(t, msg.Body, "é", "the title is the message's title, never part of its body")
	summary := strings.TrimPrefix(lines[1], host.AttemptSummaryLabel)
	require.LessOrEqual(t, utf8.RuneCountInString(summary), sinks.TitleMaxRunes)
	require.True(t, strings.HasSuffix(summary, "s…"), summary)
}

func TestRenderProperties(t *testing.T) {
	t.Parallel()

	rapid.Check(t, func(t *rapid.T) {
		str := nastyString()
		tc := host.TodoContent{
			Cause: str.Draw(t, "cause"), OriginDisplay: str.Draw(t, "origin"),
			OriginPermalink: str.Draw(t, "permalink"), Attempts: rapid.IntRange(-1, 20).Draw(t, "attempts"),
			AttemptSummary: str.Draw(t, "attempt_summary"), ArtifactHandle: str.Draw(t, "artifact"),
		}
		c := todo(engine.Content{
			Title: str.Draw(t, "title"), Place: str.Draw(t, "place"), Summary: str.Draw(t, "summary"),
			Subject: str.Draw(t, "subject"), LinkPath: str.Draw(t, "link"), Body: str.Draw(t, "body"),
		}, tc)
		m := sinks.Meta{
			EventType: rapid.SampledFrom([]notifytype.EventType{host.EventTodoDeadLettered, host.EventRelayExhausted,
				host.EventDeliveryQuarantined, host.EventRuleNotify, "x\ny"}).Draw(t, "type"),
			Severity:       rapid.SampledFrom(append(notifytype.Severities, "", "bogus")).Draw(t, "severity"),
			Count:          rapid.IntRange(0, 1000).Draw(t, "count"),
			IncludeExcerpt: rapid.Bool().Draw(t, "excerpt"),
			BaseURL:        str.Draw(t, "base"),
		}
		msg := host.Render(c, m)

		// No control characters, except the newlines between body lines.
		requireClean(t, msg.Title)
		require.NotEmpty(t, msg.Title)
		if msg.Body != "" {
			for line := range strings.SplitSeq(msg.Body, "\n") {
				require.NotEmpty(t, line)
				requireClean(t, line)
			}
		}
		require.True(t, msg.Severity.Valid())

		// Sender- and agent-written text is within its limit, where it
		// belongs, and on its own line.
		lines := strings.Split(msg.Body, "\n")
		if title := sinks.Clean(c.Title, sinks.TitleMaxRunes); title != "" {
			require.LessOrEqual(t, utf8.RuneCountInString(title), sinks.TitleMaxRunes)
			require.Contains(t, msg.Title, title)
		}
		require.Len(t, strings.Split(msg.Markdown, "\n\n"), len(lines), "one Markdown paragraph per line")
		if s := sinks.Clean(tc.AttemptSummary, sinks.TitleMaxRunes); s != "" {
			require.LessOrEqual(t, utf8.RuneCountInString(s), sinks.TitleMaxRunes)
			require.Contains(t, lines, host.AttemptSummaryLabel+s)
		}

		// The body is never used unless the subscription opted in; with
		// the opt-in it is one labelled line of at most 280 characters.
		noBody := c
		noBody.Body = ""
		if !m.IncludeExcerpt {
			require.Equal(t, host.Render(noBody, m), msg)
		} else if e := sinks.Clean(c.Body, sinks.ExcerptMaxRunes); e != "" {
			require.LessOrEqual(t, utf8.RuneCountInString(e), sinks.ExcerptMaxRunes)
			require.Contains(t, lines, sinks.ExcerptLabel+e)
		}
	})
}

func nastyString() *rapid.Generator[string] {
	nasty := []string{
		"\n", "\r\n", "\t", "\x00", "\x07", "\x7f", "\u0085", "\u009b", "\x1b", "\x1b[31m", "\x1b[0m",
		"\x1b]0;title\x07", "\x1b[", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066",
		"\u2067", "\u2068", "\u2069", "\u200b", "\u200f", "\ufeff", "\u2028", "\u2029", "\xff", "\xc3",
		" ", "  ", "Title: ", "Sender wrote: ", "Link: ", "é", "日本", "🎉", "a", "word",
	}
	piece := rapid.OneOf(rapid.SampledFrom(nasty), rapid.String(), rapid.StringN(0, 200, -1))
	return rapid.Custom(func(t *rapid.T) string {
		return strings.Join(rapid.SliceOfN(piece, 0, 40).Draw(t, "pieces"), "")
	})
}

func requireClean(t require.TestingT, s string) {
	require.True(t, utf8.ValidString(s), "%q is not valid UTF-8", s)
	for _, r := range s {
		require.False(t, unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == 0x2028 || r == 0x2029, "%q carries %U", s, r)
	}
}

// A todo event's own values go into Data and come back as they were; an
// embedder's entries of Data stay; nothing set adds nothing.
func TestTodoContentRoundTrips(t *testing.T) {
	t.Parallel()

	tc := host.TodoContent{Cause: "interrupted", Attempts: 2, AttemptSummary: "s", ArtifactHandle: "a",
		OriginDisplay: "o", OriginPermalink: "https://p.example"}
	c := host.WithTodo(engine.Content{Title: "t", Data: map[string]string{"mine": "x"}}, tc)
	require.Equal(t, tc, host.TodoContentOf(c))
	require.Equal(t, "x", c.Data["mine"])
	require.Len(t, c.Data, 7)

	empty := engine.Content{Title: "t"}
	require.Equal(t, empty, host.WithTodo(empty, host.TodoContent{}))
	require.Nil(t, host.TodoContent{}.Data())
	require.Equal(t, host.TodoContent{}, host.TodoContentOf(engine.Content{Data: map[string]string{"attempts": "many"}}))
}
