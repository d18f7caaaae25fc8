package sinks_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

func TestRenderDeadLetter(t *testing.T) {
	t.Parallel()

	msg := sinks.Render(sinks.Content{
		Title:          "Fix the flaky build",
		Place:          "forge",
		Summary:        "Todo dead-lettered after 3 attempts",
		Cause:          "fail at the cap",
		LinkPath:       "/board/todos/12",
		OriginDisplay:  "acme/widgets#41",
		Attempts:       3,
		AttemptSummary: "gave up: tests time out",
		ArtifactHandle: "cairn:abc123",
		Body:           "the issue body, which must not appear",
	}, sinks.Meta{
		EventType: notifytype.EventTodoDeadLettered,
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
		c        sinks.Content
		title    string
		sentence string
	}{
		{notifytype.EventTodoDeadLettered, sinks.Content{Title: "Nightly build failed", Place: "forge", Cause: "interrupted"},
			"Dead letter in forge: Nightly build failed",
			"A todo in queue forge dead-lettered before any attempt: it was interrupted."},
		{notifytype.EventTodoDeadLettered, sinks.Content{Title: "t", Place: "q", Attempts: 1, Cause: "lease expired at the cap"},
			"Dead letter in q: t",
			"A todo in queue q dead-lettered after 1 attempt: the lease on its last attempt expired and no attempts were left."},
		{notifytype.EventTodoDeadLettered, sinks.Content{Attempts: 2, Cause: "endpoint revoked"},
			"Dead letter",
			"A todo dead-lettered after 2 attempts: the endpoint working on it was revoked."},
		{notifytype.EventRelayExhausted, sinks.Content{Title: "Reply to #41", Place: "replies", Attempts: 7, Cause: "fail at the cap"},
			"Relay out of attempts in replies: Reply to #41",
			"A relay todo in queue replies gave up after 7 attempts: its last attempt failed and no attempts were left."},
	} {
		msg := sinks.Render(tc.c, sinks.Meta{EventType: tc.typ})
		require.Equal(t, tc.title, msg.Title)
		require.Equal(t, tc.sentence, strings.Split(msg.Body, "\n")[0])
		require.NotContains(t, msg.Body, "0 attempts")
	}
}

func TestRenderOtherEvents(t *testing.T) {
	t.Parallel()

	rule := sinks.Render(sinks.Content{Title: "The build is red", Place: "github", Summary: `rule "red builds" matched; the delivery was routed`,
		LinkPath: "/board/webhooks/1/deliveries/2"}, sinks.Meta{EventType: notifytype.EventRuleNotify, BaseURL: "https://sb.example"})
	require.Equal(t, "Rule matched on github: The build is red", rule.Title)
	require.Equal(t, "Rule \"red builds\" matched; the delivery was routed.\nLink: https://sb.example/board/webhooks/1/deliveries/2", rule.Body)

	q := sinks.Render(sinks.Content{Title: "push", Place: "github", Summary: "a delivery from an untrusted sender was quarantined"},
		sinks.Meta{EventType: notifytype.EventDeliveryQuarantined})
	require.Equal(t, "Quarantined delivery on github: push", q.Title)
	require.Equal(t, "A delivery from an untrusted sender was quarantined.", q.Body)

	d := sinks.Render(sinks.Content{Place: "morning", Lines: []string{"forge: 3 pending"}}, sinks.Meta{EventType: notifytype.EventDigest})
	require.Equal(t, "Queue digest: morning", d.Title)
	require.Equal(t, "forge: 3 pending", d.Body)
}

func TestRenderOriginFallsBackToPermalink(t *testing.T) {
	t.Parallel()

	msg := sinks.Render(sinks.Content{OriginPermalink: "https://github.com/acme/widgets/issues/41"}, sinks.Meta{EventType: notifytype.EventTodoDeadLettered})
	require.Contains(t, msg.Body, "Origin: https://github.com/acme/widgets/issues/41")
}

func TestRenderAgentPage(t *testing.T) {
	t.Parallel()

	msg := sinks.Render(sinks.Content{Title: "device QA needed on build 812", Place: "mobile", Summary: "An agent paged its owner."}, sinks.Meta{
		EventType: notifytype.EventAgentNotify, Severity: notifytype.SeverityHigh,
	})
	require.Equal(t, "Agent page: device QA needed on build 812", msg.Title)
	require.Equal(t, notifytype.SeverityHigh, msg.Severity)
	require.Equal(t, "An agent paged its owner.", msg.Body)
}

func TestRenderAndNMore(t *testing.T) {
	t.Parallel()

	msg := sinks.Render(sinks.Content{Place: "github", Title: "push from untrusted sender"}, sinks.Meta{
		EventType: notifytype.EventDeliveryQuarantined, Count: 200,
	})
	require.Equal(t, "Quarantined delivery on github: push from untrusted sender (and 199 more)", msg.Title)
	require.Contains(t, strings.Split(msg.Body, "\n"), "This one and 199 more like it.")
}

func TestRenderExcerptByOptIn(t *testing.T) {
	t.Parallel()

	body := "\x1b[31mRED\x1b[0m line one\nline two\u202e" + strings.Repeat("x", 2000)
	c := sinks.Content{Title: "Issue", Place: "inbox", Body: body}

	without := sinks.Render(c, sinks.Meta{EventType: notifytype.EventTodoDeadLettered})
	require.NotContains(t, without.Body, "Sender wrote")
	require.NotContains(t, without.Body+without.Markdown, "xxx")
	require.NotContains(t, without.Body+without.Markdown, "RED")

	with := sinks.Render(c, sinks.Meta{EventType: notifytype.EventTodoDeadLettered, IncludeExcerpt: true})
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

	msg := sinks.Render(sinks.Content{
		Title:          "ok\nLink: https://evil.example\r\n\u2028Cause: none\u202egnp.exe",
		AttemptSummary: "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07 me\x1b[2J",
		LinkPath:       "/board/todos/1",
	}, sinks.Meta{EventType: notifytype.EventRelayExhausted, BaseURL: "https://sb.example"})

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
	msg := sinks.Render(sinks.Content{Title: nasty, AttemptSummary: nasty, Body: nasty, Place: "forge",
		LinkPath: "/board/todos/3"}, sinks.Meta{EventType: notifytype.EventTodoDeadLettered, IncludeExcerpt: true, BaseURL: "https://sb.example"})
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
		msg := sinks.Render(sinks.Content{Summary: line}, sinks.Meta{EventType: notifytype.EventRuleNotify})
		require.NotRegexp(t, `^(#|-|\+|>|=|\d+[.)])`, msg.Markdown, "%q", line)
	}
	require.Contains(t, msg.Markdown, "\\[click\\](https://evil.example) !\\[x\\]")
}

func TestRenderTruncatesTitles(t *testing.T) {
	t.Parallel()

	msg := sinks.Render(sinks.Content{Title: strings.Repeat("é", 500), AttemptSummary: strings.Repeat("s ", 300)}, sinks.Meta{EventType: notifytype.EventTodoDeadLettered})
	lines := strings.Split(msg.Body, "\n")
	title := strings.TrimPrefix(msg.Title, "Dead letter: ")
	require.Equal(t, sinks.TitleMaxRunes, utf8.RuneCountInString(title))
	require.Equal(t, strings.Repeat("é", 119)+"…", title)
	require.NotContains(t, msg.Body, "é", "the title is the message's title, never part of its body")
	summary := strings.TrimPrefix(lines[1], sinks.AttemptSummaryLabel)
	require.LessOrEqual(t, utf8.RuneCountInString(summary), sinks.TitleMaxRunes)
	require.True(t, strings.HasSuffix(summary, "s…"), summary)
}

func TestRenderCoalesced(t *testing.T) {
	t.Parallel()

	msg := sinks.RenderCoalesced(map[notifytype.EventType]int{
		notifytype.EventRuleNotify:          4,
		notifytype.EventTodoDeadLettered:    12,
		notifytype.EventDeliveryQuarantined: 0,
		"zz.other":                          1,
		notifytype.EventAgentNotify:         2,
	}, "https://sb.example/")
	require.Equal(t, "Switchboard: 19 notifications waited while this sink's budget was spent", msg.Title)
	require.Equal(t, "This sink's budget was spent, so 19 notifications waited; here is how many of each.\n"+
		"Dead letters: 12\nRule matches: 4\nAgent pages: 2\nzz.other: 1\nLink: https://sb.example/board/notifications", msg.Body)
	require.Equal(t, "https://sb.example/board/notifications", msg.Link)
	require.Equal(t, notifytype.SeverityHigh, msg.Severity)

	one := sinks.RenderCoalesced(map[notifytype.EventType]int{notifytype.EventDigest: 1}, "https://sb.example")
	require.Equal(t, "Switchboard: 1 notification waited while this sink's budget was spent", one.Title)
	require.Equal(t, notifytype.SeverityLow, one.Severity)
}

func TestRenderTest(t *testing.T) {
	t.Parallel()

	msg := sinks.RenderTest()
	require.Equal(t, "Switchboard test message", msg.Title)
	require.NotEmpty(t, msg.Body)
	require.Equal(t, notifytype.SeverityNormal, msg.Severity)
}

func TestCleanStripsEscapesAndBidi(t *testing.T) {
	t.Parallel()

	for in, want := range map[string]string{
		"plain":                        "plain",
		"  a\t\tb \n c  ":              "a b c",
		"\x1b[1;31mred\x1b[0m":         "red",
		"\u009b31mred":                 "red",
		"a\x1bcb":                      "ab",
		"\x1bPdcs\x1b\\x":              "x",
		"a\u202ab\u202ec\u2066d\u2069": "abcd",
		"zero\u200bwidth\ufeff":        "zerowidth",
		"nul\x00del\x7fc1\u0085x":      "nuldelc1 x",
		"bad\xffutf8":                  "badutf8",
		"\u2028line\u2029para":         "line para",
	} {
		require.Equal(t, want, sinks.Clean(in, 100), "%q", in)
	}
	require.Equal(t, "", sinks.Clean("anything", 0))
	require.Equal(t, "…", sinks.Clean("ab", 1))
	require.Equal(t, "ab", sinks.Clean("ab", 2))
	require.Equal(t, "a…", sinks.Clean("a bc", 3), "a cut never leaves a trailing space")
}

// nastyString draws strings rich in what Clean must remove.
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

func TestCleanProperties(t *testing.T) {
	t.Parallel()

	rapid.Check(t, func(t *rapid.T) {
		s := nastyString().Draw(t, "s")
		limit := rapid.IntRange(0, 300).Draw(t, "limit")
		out := sinks.Clean(s, limit)
		requireClean(t, out)
		require.LessOrEqual(t, utf8.RuneCountInString(out), limit)
		require.Equal(t, strings.TrimSpace(out), out)
		require.Equal(t, out, sinks.Clean(out, limit), "Clean is idempotent")
	})
}

// Clean's fast path for text that is already clean returns what the rune
// by rune path returns, on text drawn to hit it (printable ASCII, spaces
// single or doubled, at the ends or not, around the limit) and on nasty
// text.
func TestCleanFastPathAgrees(t *testing.T) {
	t.Parallel()

	plain := rapid.Custom(func(t *rapid.T) string {
		words := rapid.SliceOfN(rapid.StringMatching(`[!-~]{1,12}`), 0, 12).Draw(t, "words")
		sep := rapid.SampledFrom([]string{" ", " ", " ", "  "}).Draw(t, "sep")
		return rapid.SampledFrom([]string{"", " "}).Draw(t, "lead") + strings.Join(words, sep) +
			rapid.SampledFrom([]string{"", " "}).Draw(t, "trail")
	})
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.OneOf(plain, nastyString()).Draw(t, "s")
		limit := rapid.IntRange(0, 2*len(s)+2).Draw(t, "limit")
		want := ""
		if limit > 0 {
			want = sinks.CleanRunesForTest(s, limit)
		}
		require.Equal(t, want, sinks.Clean(s, limit), "%q cut at %d", s, limit)
	})
}

func TestRenderProperties(t *testing.T) {
	t.Parallel()

	rapid.Check(t, func(t *rapid.T) {
		str := nastyString()
		c := sinks.Content{
			Title: str.Draw(t, "title"), Place: str.Draw(t, "place"), Summary: str.Draw(t, "summary"),
			Cause: str.Draw(t, "cause"), LinkPath: str.Draw(t, "link"), OriginDisplay: str.Draw(t, "origin"),
			OriginPermalink: str.Draw(t, "permalink"), Attempts: rapid.IntRange(-1, 20).Draw(t, "attempts"),
			AttemptSummary: str.Draw(t, "attempt_summary"), ArtifactHandle: str.Draw(t, "artifact"),
			Body: str.Draw(t, "body"),
		}
		m := sinks.Meta{
			EventType:      rapid.SampledFrom(append(notifytype.EventTypes, "x\ny")).Draw(t, "type"),
			Severity:       rapid.SampledFrom(append(notifytype.Severities, "", "bogus")).Draw(t, "severity"),
			Count:          rapid.IntRange(0, 1000).Draw(t, "count"),
			IncludeExcerpt: rapid.Bool().Draw(t, "excerpt"),
			BaseURL:        str.Draw(t, "base"),
		}
		msg := sinks.Render(c, m)

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
		if s := sinks.Clean(c.AttemptSummary, sinks.TitleMaxRunes); s != "" {
			require.LessOrEqual(t, utf8.RuneCountInString(s), sinks.TitleMaxRunes)
			require.Contains(t, lines, sinks.AttemptSummaryLabel+s)
		}

		// The body is never used unless the subscription opted in; with
		// the opt-in it is one labelled line of at most 280 characters.
		noBody := c
		noBody.Body = ""
		if !m.IncludeExcerpt {
			require.Equal(t, sinks.Render(noBody, m), msg)
		} else if e := sinks.Clean(c.Body, sinks.ExcerptMaxRunes); e != "" {
			require.LessOrEqual(t, utf8.RuneCountInString(e), sinks.ExcerptMaxRunes)
			require.Contains(t, lines, sinks.ExcerptLabel+e)
		}
	})
}

// TestRenderDigestLinksOnlyItsOwnBoard: a digest line ending in one of
// this instance's board links reads as a Markdown link on its words
// (issue 25: Gotify renders them); a link elsewhere, or markup in a
// sender's title, stays text.
func TestRenderDigestLinksOnlyItsOwnBoard(t *testing.T) {
	m := sinks.Render(sinks.Content{Place: "morning", Lines: []string{
		"Queue forge:",
		"- Dead letter: [win](https://evil.example): https://sb.example/board/todos/1",
		"- elsewhere: https://evil.example/board/todos/2",
	}}, sinks.Meta{EventType: notifytype.EventDigest, BaseURL: "https://sb.example"})
	require.Contains(t, m.Markdown, "\n- [Dead letter: \\[win\\](https://evil.example)](https://sb.example/board/todos/1)\n")
	require.Contains(t, m.Markdown, "\n- elsewhere: https://evil.example/board/todos/2")
	require.Contains(t, m.Body, "- Dead letter: [win](https://evil.example): https://sb.example/board/todos/1", "plain text stays text")
}
