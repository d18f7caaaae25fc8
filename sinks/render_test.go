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

// The message that stands for held rows lists the counts in the order
// given, leaves out counts of zero, takes the highest severity and links
// in the given words (REQ-11).
func TestRenderCounts(t *testing.T) {
	t.Parallel()

	msg := sinks.RenderCounts([]sinks.Count{
		{Label: "Dead letters", N: 12, Severity: notifytype.SeverityHigh},
		{Label: "Rule matches", N: 4, Severity: notifytype.SeverityNormal},
		{Label: "Quarantined deliveries", N: 0, Severity: notifytype.SeverityNormal},
		{Label: "Agent pages", N: 2, Severity: notifytype.SeverityNormal},
		{Label: "zz.other", N: 1, Severity: notifytype.SeverityNormal},
	}, "https://sb.example/board/notifications", "Open on the board")
	require.Equal(t, "Switchboard: 19 notifications waited while this sink's budget was spent", msg.Title)
	require.Equal(t, "This sink's budget was spent, so 19 notifications waited; here is how many of each.\n"+
		"Dead letters: 12\nRule matches: 4\nAgent pages: 2\nzz.other: 1\nLink: https://sb.example/board/notifications", msg.Body)
	require.Contains(t, msg.Markdown, "[Open on the board](https://sb.example/board/notifications)")
	require.Equal(t, "https://sb.example/board/notifications", msg.Link)
	require.Equal(t, notifytype.SeverityHigh, msg.Severity)

	one := sinks.RenderCounts([]sinks.Count{{Label: "Queue digests", N: 1, Severity: notifytype.SeverityLow}}, "", "")
	require.Equal(t, "Switchboard: 1 notification waited while this sink's budget was spent", one.Title)
	require.Equal(t, notifytype.SeverityLow, one.Severity)
	require.Empty(t, one.Link)
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

// TestRenderDigestLinksOnlyItsOwnBoard: a digest line ending in one of
// this instance's board links reads as a Markdown link on its words
// (issue 25: Gotify renders them); a link elsewhere, or markup in a
// sender's title, stays text.
func TestRenderDigestLinksOnlyItsOwnBoard(t *testing.T) {
	m := sinks.Finish(sinks.Draft{Title: "Queue digest: morning", Report: []string{
		"Queue forge:",
		"- Dead letter: [win](https://evil.example): https://sb.example/board/todos/1",
		"- elsewhere: https://evil.example/board/todos/2",
	}}, sinks.Meta{EventType: "digest", BaseURL: "https://sb.example"}, "")
	require.Contains(t, m.Markdown, "\n- [Dead letter: \\[win\\](https://evil.example)](https://sb.example/board/todos/1)\n")
	require.Contains(t, m.Markdown, "\n- elsewhere: https://evil.example/board/todos/2")
	require.Contains(t, m.Body, "- Dead letter: [win](https://evil.example): https://sb.example/board/todos/1", "plain text stays text")
}

// markdownEscapeReference is MarkdownEscape as first written: a builder
// for every string, and mdSpecial searched for each byte. The faster one
// must escape exactly as it did.
func markdownEscapeReference(s string) string {
	var b strings.Builder
	digits := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case strings.IndexByte("\\`*_[]<>&~|", c) >= 0,
			i == 0 && strings.IndexByte("#-+=>", c) >= 0,
			i == digits && i > 0 && (c == '.' || c == ')'):
			b.WriteByte('\\')
		}
		if i == digits && c >= '0' && c <= '9' {
			digits++
		}
		b.WriteByte(c)
	}
	return b.String()
}

func TestMarkdownEscapeMatchesItsReference(t *testing.T) {
	t.Parallel()
	markdownish := rapid.Custom(func(t *rapid.T) string {
		return rapid.StringOfN(rapid.SampledFrom([]rune("0123456789.)#-+=>\\`*_[]<>&~| aé\u202e")), 0, 30, -1).Draw(t, "s")
	})
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.OneOf(nastyString(), markdownish).Draw(t, "s")
		if got, want := sinks.MarkdownEscape(s), markdownEscapeReference(s); got != want {
			t.Fatalf("MarkdownEscape(%q) = %q, the reference %q", s, got, want)
		}
	})
}
