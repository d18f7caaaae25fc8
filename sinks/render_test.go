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
		Summary:        "A todo dead-lettered after 3 attempts.",
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

	require.Equal(t, "[todo.dead_lettered] forge: Fix the flaky build", msg.Title)
	require.Equal(t, strings.Join([]string{
		"A todo dead-lettered after 3 attempts.",
		"Title: Fix the flaky build",
		"Cause: fail at the cap",
		"Link: https://switchboard.example.net/board/todos/12",
		"Origin: acme/widgets#41",
		"Attempts: 3",
		"Closing attempt summary: gave up: tests time out",
		"Artifact: cairn:abc123",
	}, "\n"), msg.Body)
	require.Equal(t, notifytype.SeverityHigh, msg.Severity, "severity defaults to the event type's")
	require.NotContains(t, msg.Title+msg.Body, "issue body")
}

func TestRenderOriginFallsBackToPermalink(t *testing.T) {
	t.Parallel()

	msg := sinks.Render(sinks.Content{OriginPermalink: "https://github.com/acme/widgets/issues/41"}, sinks.Meta{EventType: notifytype.EventTodoDeadLettered})
	require.Contains(t, msg.Body, "Origin: https://github.com/acme/widgets/issues/41")
}

func TestRenderAgentPage(t *testing.T) {
	t.Parallel()

	msg := sinks.Render(sinks.Content{Title: "device QA needed on build 812", Place: "mobile"}, sinks.Meta{
		EventType: notifytype.EventAgentNotify, Severity: notifytype.SeverityHigh,
	})
	require.Equal(t, "Agent page: device QA needed on build 812", msg.Title)
	require.Equal(t, notifytype.SeverityHigh, msg.Severity)
	require.Contains(t, msg.Body, "Title: device QA needed on build 812")
}

func TestRenderAndNMore(t *testing.T) {
	t.Parallel()

	msg := sinks.Render(sinks.Content{Place: "github", Title: "push from untrusted sender"}, sinks.Meta{
		EventType: notifytype.EventDeliveryQuarantined, Count: 200,
	})
	require.Equal(t, "[delivery.quarantined] github: push from untrusted sender (and 199 more)", msg.Title)
	require.Contains(t, strings.Split(msg.Body, "\n"), "and 199 more")
}

func TestRenderExcerptByOptIn(t *testing.T) {
	t.Parallel()

	body := "\x1b[31mRED\x1b[0m line one\nline two\u202e" + strings.Repeat("x", 2000)
	c := sinks.Content{Title: "Issue", Place: "inbox", Body: body}

	without := sinks.Render(c, sinks.Meta{EventType: notifytype.EventTodoDeadLettered})
	require.NotContains(t, without.Body, "Sender wrote")
	require.NotContains(t, without.Body, "xxx")
	require.NotContains(t, without.Body, "RED")

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
}

func TestRenderSenderTextCannotForgeLines(t *testing.T) {
	t.Parallel()

	msg := sinks.Render(sinks.Content{
		Title:          "ok\nLink: https://evil.example\r\n\u2028Cause: none\u202egnp.exe",
		AttemptSummary: "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07 me\x1b[2J",
		LinkPath:       "/board/todos/1",
	}, sinks.Meta{EventType: notifytype.EventRelayExhausted, BaseURL: "https://sb.example"})

	require.Equal(t, "[relay.exhausted] ok Link: https://evil.example Cause: nonegnp.exe", msg.Title)
	require.Equal(t, []string{
		"Title: ok Link: https://evil.example Cause: nonegnp.exe",
		"Link: https://sb.example/board/todos/1",
		"Closing attempt summary: click me",
	}, strings.Split(msg.Body, "\n"))
}

func TestRenderTruncatesTitles(t *testing.T) {
	t.Parallel()

	msg := sinks.Render(sinks.Content{Title: strings.Repeat("é", 500), AttemptSummary: strings.Repeat("s ", 300)}, sinks.Meta{EventType: notifytype.EventTodoDeadLettered})
	lines := strings.Split(msg.Body, "\n")
	title := strings.TrimPrefix(lines[0], sinks.TitleLabel)
	require.Equal(t, sinks.TitleMaxRunes, utf8.RuneCountInString(title))
	require.Equal(t, strings.Repeat("é", 119)+"…", title)
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
	require.Equal(t, "Switchboard: 19 notifications held while this sink's budget was spent", msg.Title)
	require.Equal(t, "todo.dead_lettered: 12\nrule.notify: 4\nagent.notify: 2\nzz.other: 1\nLink: https://sb.example/board/notifications", msg.Body)
	require.Equal(t, notifytype.SeverityHigh, msg.Severity)

	one := sinks.RenderCoalesced(map[notifytype.EventType]int{notifytype.EventDigest: 1}, "https://sb.example")
	require.Equal(t, "Switchboard: 1 notification held while this sink's budget was spent", one.Title)
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
			require.Contains(t, lines, sinks.TitleLabel+title)
			require.Contains(t, msg.Title, title)
		}
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
			require.Equal(t, sinks.ExcerptLabel+e, lines[len(lines)-1])
		}
	})
}
