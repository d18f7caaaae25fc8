package sinks

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard/notify/notifytype"
)

// Limits of the text a message carries (REQ-9).
const (
	// TitleMaxRunes bounds sender- and agent-written text: todo and subject
	// titles, agent page titles, attempt summaries.
	TitleMaxRunes = 120
	// ExcerptMaxRunes bounds the opt-in excerpt of the subject's body.
	ExcerptMaxRunes = 280
	// DigestMaxLines and DigestLineMaxRunes bound a digest's body lines.
	DigestMaxLines     = 400
	DigestLineMaxRunes = 400
	// fieldMaxRunes bounds the other text a source supplies (place, summary,
	// cause, origin, artifact handle), which is ours but may quote others.
	fieldMaxRunes = 200
)

// Labels that introduce sender- and agent-written text in a body.
const (
	TitleLabel          = "Title: "
	AttemptSummaryLabel = "Closing attempt summary: "
	ExcerptLabel        = "Sender wrote: "
	TestTitle           = "Switchboard test message"
	AgentPagePrefix     = "Agent page: "
	CoalescedLinkPath   = "/board/notifications"
)

// Render builds the message for one outbox row (REQ-9, D13, D14).
//
// The title is "[<event type>] <place>: <item title>" ("Agent page:
// <title>" for agent.notify), with " (and N more)" when the row stands for
// several events. The body has one line each, when present, for: the
// summary, the item's title, the cause, the board link, the origin, the
// attempt count, the closing attempt's summary, the artifact handle and,
// only when the subscription opted in, the excerpt.
//
// Sender- and agent-written text (Title, AttemptSummary) is stripped of
// control characters and cut to 120 characters, and appears only in the
// title's item position or on its own labelled line, never inside a
// sentence of ours. The excerpt is cut to 280 characters and labelled
// "Sender wrote:". Every value is on one line: the only newlines in the
// body are those between its lines.
func Render(c Content, m Meta) Message {
	sev := m.Severity
	if !sev.Valid() {
		sev = m.EventType.DefaultSeverity()
	}
	title := Clean(c.Title, TitleMaxRunes)

	var head string
	switch {
	case m.EventType == notifytype.EventAgentNotify:
		head = AgentPagePrefix + title
	default:
		head = "[" + Clean(string(m.EventType), 64) + "]"
		place := Clean(c.Place, fieldMaxRunes)
		switch {
		case place != "" && title != "":
			head += " " + place + ": " + title
		case place != "":
			head += " " + place
		case title != "":
			head += " " + title
		}
	}
	if m.Count > 1 {
		head += " (and " + strconv.Itoa(m.Count-1) + " more)"
	}

	var lines []string
	add := func(label, v string) {
		if v != "" {
			lines = append(lines, label+v)
		}
	}
	add("", Clean(c.Summary, fieldMaxRunes))
	for _, l := range c.Lines[:min(len(c.Lines), DigestMaxLines)] {
		lines = append(lines, Clean(l, DigestLineMaxRunes))
	}
	if m.Count > 1 {
		add("", "and "+strconv.Itoa(m.Count-1)+" more")
	}
	add(TitleLabel, title)
	add("Cause: ", Clean(c.Cause, fieldMaxRunes))
	if c.LinkPath != "" {
		add("Link: ", Clean(joinLink(m.BaseURL, c.LinkPath), 2*fieldMaxRunes))
	}
	add("Origin: ", Clean(cmp.Or(c.OriginDisplay, c.OriginPermalink), fieldMaxRunes))
	if c.Attempts > 0 {
		add("Attempts: ", strconv.Itoa(c.Attempts))
	}
	add(AttemptSummaryLabel, Clean(c.AttemptSummary, TitleMaxRunes))
	add("Artifact: ", Clean(c.ArtifactHandle, fieldMaxRunes))
	if m.IncludeExcerpt {
		add(ExcerptLabel, Clean(c.Body, ExcerptMaxRunes))
	}
	return Message{Title: head, Body: strings.Join(lines, "\n"), Severity: sev}
}

// RenderCoalesced builds the one message that stands for a sink's held
// rows when budget returns (REQ-11, D9): counts by event type, in the
// spec's order of event types (any other, by name, after them), and a link
// to the board's notifications page. Its severity is the highest default
// severity among the types present.
func RenderCoalesced(counts map[notifytype.EventType]int, baseURL string) Message {
	order := func(t notifytype.EventType) int {
		if i := slices.Index(notifytype.EventTypes, t); i >= 0 {
			return i
		}
		return len(notifytype.EventTypes)
	}
	types := slices.SortedStableFunc(maps.Keys(counts), func(a, b notifytype.EventType) int {
		return cmp.Or(cmp.Compare(order(a), order(b)), strings.Compare(string(a), string(b)))
	})
	total, sev := 0, notifytype.SeverityLow
	var lines []string
	for _, t := range types {
		n := counts[t]
		if n <= 0 {
			continue
		}
		total += n
		if d := t.DefaultSeverity(); d.Rank() > sev.Rank() {
			sev = d
		}
		lines = append(lines, Clean(string(t), 64)+": "+strconv.Itoa(n))
	}
	lines = append(lines, "Link: "+Clean(joinLink(baseURL, CoalescedLinkPath), 2*fieldMaxRunes))
	noun := "notifications"
	if total == 1 {
		noun = "notification"
	}
	return Message{
		Title:    fmt.Sprintf("Switchboard: %d %s held while this sink's budget was spent", total, noun),
		Body:     strings.Join(lines, "\n"),
		Severity: sev,
	}
}

// RenderTest builds the message a sink's send test delivers (REQ-5, D14).
func RenderTest() Message {
	return Message{
		Title:    TestTitle,
		Body:     "This is a test message from Switchboard. If you can read it, this sink works.",
		Severity: notifytype.SeverityNormal,
	}
}

func joinLink(base, path string) string {
	return strings.TrimRight(base, "/") + "/" + strings.TrimLeft(path, "/")
}

// Clean makes text safe to show on one line and cuts it to at most limit
// characters (runes), the last being "…" when it was cut. It drops control
// characters (C0, DEL, C1), ANSI escape sequences, Unicode format
// characters (bidi embeddings, overrides and isolates U+202A–U+202E and
// U+2066–U+2069, zero-width characters, the BOM), private-use and
// surrogate code points and invalid UTF-8; line breaks, tabs, the Unicode
// line and paragraph separators and other white space become a space; runs
// of spaces collapse and the ends are trimmed.
func Clean(s string, limit int) string {
	if limit <= 0 {
		return ""
	}
	if cleanASCII(s, limit) {
		return s // most text: nothing to drop, collapse or cut
	}
	return cleanRunes(s, limit)
}

// cleanASCII reports that Clean would return s unchanged because it is
// already clean: printable ASCII, single spaces between words, none at
// either end, and no longer than limit.
func cleanASCII(s string, limit int) bool {
	if len(s) > limit {
		return false
	}
	space := true // a leading space is not clean
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ':
			if space {
				return false
			}
			space = true
		case c < 0x20 || c > 0x7e:
			return false
		default:
			space = false
		}
	}
	return len(s) == 0 || !space
}

// cleanRunes is Clean, rune by rune.
func cleanRunes(s string, limit int) string {
	runes := make([]rune, 0, min(len(s), limit+1))
	space := false
	for i := 0; i < len(s) && len(runes) <= limit; {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == 0x1b || r == 0x9b: // ESC or C1 CSI: skip the whole sequence
			i += escapeLen(s[i:], r == 0x9b)
		case unicode.IsSpace(r) || r == 0x2028 || r == 0x2029:
			space = len(runes) > 0
		case r == utf8.RuneError || unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Co, unicode.Cs):
			// dropped
		default:
			if space {
				runes = append(runes, ' ')
				space = false
			}
			runes = append(runes, r)
		}
	}
	if len(runes) > limit {
		runes = append(trimRightSpace(runes[:limit-1]), '…')
	}
	return string(runes)
}

func trimRightSpace(r []rune) []rune {
	for len(r) > 0 && r[len(r)-1] == ' ' {
		r = r[:len(r)-1]
	}
	return r
}

// escapeLen is how many bytes of rest belong to the escape sequence whose
// introducer (ESC, or the C1 CSI when csi) was just read: a CSI sequence
// ("ESC [" or C1 CSI, parameters, a final byte 0x40–0x7E), an OSC, DCS,
// SOS, PM or APC string (up to BEL or "ESC \"), or one following
// character.
func escapeLen(rest string, csi bool) int {
	if !csi {
		if rest == "" {
			return 0
		}
		switch rest[0] {
		case '[':
			return 1 + csiLen(rest[1:])
		case ']', 'P', 'X', '^', '_':
			return 1 + stringLen(rest[1:])
		}
		_, size := utf8.DecodeRuneInString(rest)
		return size
	}
	return csiLen(rest)
}

// csiLen is the length of a CSI sequence's parameter and intermediate
// bytes (0x20–0x3F) and its final byte (0x40–0x7E). A malformed sequence
// ends before the offending byte, which is then cleaned like any other.
func csiLen(rest string) int {
	for i := 0; i < len(rest); i++ {
		switch c := rest[i]; {
		case c >= 0x40 && c <= 0x7e:
			return i + 1
		case c < 0x20 || c > 0x7e:
			return i
		}
	}
	return len(rest)
}

func stringLen(rest string) int {
	for i := 0; i < len(rest); i++ {
		switch {
		case rest[i] == 0x07:
			return i + 1
		case rest[i] == 0x1b && i+1 < len(rest) && rest[i+1] == '\\':
			return i + 2
		}
	}
	return len(rest)
}
