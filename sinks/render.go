package sinks

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard/notify/notifytype"
)

// Limits of the text a message carries (REQ-9).
const (
	// TitleMaxRunes bounds sender- and agent-written text: an item's title
	// (a todo's, a delivery's subject, an agent page's), an agent's
	// summary of its attempt.
	TitleMaxRunes = 120
	// ExcerptMaxRunes bounds the opt-in excerpt of the subject's body.
	ExcerptMaxRunes = 280
	// DigestMaxLines and DigestLineMaxRunes bound a digest's body lines.
	DigestMaxLines     = 400
	DigestLineMaxRunes = 400
	// fieldMaxRunes bounds the other text a source supplies (place,
	// summary, Data's values), which is ours but may quote others.
	fieldMaxRunes = 200
)

// Words the engine's rules put in a message.
const (
	// ExcerptLabel introduces the opt-in excerpt of the sender's body.
	ExcerptLabel = "Sender wrote: "
	// TestTitle is the title of a sink's send test.
	TestTitle = "Switchboard test message"
	// LinkLabel introduces the link in a plain-text body; a Markdown body
	// links the Draft's LinkText instead.
	LinkLabel = "Link: "
)

// line is one line of a body, as plain text and as Markdown.
type line struct{ plain, md string }

// message joins a rendered title and body lines into a Message: plain
// lines one a line, Markdown lines one a paragraph.
func message(title string, lines []line, link string, sev notifytype.Severity) Message {
	plain := make([]string, len(lines))
	md := make([]string, len(lines))
	for i, l := range lines {
		plain[i], md[i] = l.plain, l.md
	}
	return Message{
		Title: title, Body: strings.Join(plain, "\n"), Markdown: strings.Join(md, "\n\n"),
		Link: link, Severity: sev,
	}
}

// digestMarkdown is a digest's lines as one Markdown block: a line "- x"
// is a list item (its text escaped), any other line a paragraph of its
// own, so a list ends before the next heading line. A line that ends in
// ": " and a board link of this instance (baseURL + /board/…, as the
// digest builder writes them) links its words instead: "- Nightly build
// failed: https://h/board/todos/12" becomes "- [Nightly build
// failed](https://h/board/todos/12)". Only a URL under this instance's
// board becomes a link, and the words stay escaped, so sender-written
// text can neither make a link nor point one elsewhere.
func digestMarkdown(ls []string, baseURL string) string {
	board := strings.TrimRight(baseURL, "/") + "/board/"
	var b strings.Builder
	for _, l := range ls[:min(len(ls), DigestMaxLines)] {
		l = Clean(l, DigestLineMaxRunes)
		if l == "" {
			continue
		}
		item, isItem := strings.CutPrefix(l, "- ")
		switch {
		case b.Len() == 0:
		case isItem:
			b.WriteString("\n")
		default:
			b.WriteString("\n\n")
		}
		if !isItem {
			item = l
		}
		md := mdEscape(item)
		if i := strings.LastIndex(item, ": "); i > 0 {
			if url := item[i+2:]; strings.HasPrefix(url, board) && !strings.ContainsAny(url, " ") {
				md = mdLink(item[:i], url)
			}
		}
		if isItem {
			md = "- " + md
		}
		b.WriteString(md)
	}
	return b.String()
}

// mdSpecial are the characters that start Markdown markup anywhere in a
// line (CommonMark with GitHub's strikethrough and tables): escapes, code,
// emphasis, links and images, autolinks and raw HTML, entities.
const mdSpecial = "\\`*_[]<>&~|"

// mdEscape makes text show as written in Markdown: each of mdSpecial is
// backslash-escaped, and so is what would make the line a heading, a
// list, a quote or a thematic break (a leading #, -, +, =, > or "1." /
// "1)"), so no sender-written text becomes a link, an image, emphasis,
// code, a heading or raw HTML. The text is already on one line with no
// leading space (Clean), and each line is its own paragraph.
func mdEscape(s string) string {
	var b strings.Builder // grown at the first escape: text without one is returned as it is
	digits := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if mdSpecialByte[c] || i == 0 && strings.IndexByte("#-+=>", c) >= 0 || i == digits && i > 0 && (c == '.' || c == ')') {
			if b.Cap() == 0 {
				b.Grow(len(s) + 8)
				b.WriteString(s[:i])
			}
			b.WriteByte('\\')
		}
		if i == digits && c >= '0' && c <= '9' {
			digits++
		}
		if b.Cap() > 0 {
			b.WriteByte(c)
		}
	}
	if b.Cap() == 0 {
		return s
	}
	return b.String()
}

// mdSpecialByte marks the bytes of mdSpecial, for mdEscape's loop.
var mdSpecialByte = func() (t [256]bool) {
	for i := range len(mdSpecial) {
		t[mdSpecial[i]] = true
	}
	return t
}()

// mdLink is a Markdown link to url (one of ours, built from the base URL)
// reading text; characters that would end the destination are
// percent-encoded.
func mdLink(text, url string) string {
	return "[" + mdEscape(text) + "](" + mdURL.Replace(url) + ")"
}

// mdURL percent-encodes what would end or break a Markdown link's URL. A
// Replacer is costly to build and safe to share: built once, not per
// message.
var mdURL = strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29", "<", "%3C", ">", "%3E", "\\", "%5C", "`", "%60")

// Count is one line of a coalesced message: how many events of one type
// waited, named for a person ("Dead letters"), and the severity of that
// type.
type Count struct {
	Label    string
	N        int
	Severity notifytype.Severity
}

// RenderCounts builds the one message that stands for a sink's held rows
// when budget returns (REQ-11, D9): a sentence saying how many waited, one
// line per count in the order given ("Dead letters: 12"; a count of zero
// or less is left out), and link, an absolute URL read as linkText in
// Markdown, when it is not empty. Its severity is the highest among the
// counts present. Labels and the link are cleaned and cut as any line.
func RenderCounts(counts []Count, link, linkText string) Message {
	total, sev := 0, notifytype.SeverityLow
	var lines []line
	for _, c := range counts {
		if c.N <= 0 {
			continue
		}
		total += c.N
		if c.Severity.Rank() > sev.Rank() {
			sev = c.Severity
		}
		l := Clean(c.Label, fieldMaxRunes) + ": " + strconv.Itoa(c.N)
		lines = append(lines, line{l, mdEscape(l)})
	}
	noun := "notifications"
	if total == 1 {
		noun = "notification"
	}
	lead := fmt.Sprintf("This sink's budget was spent, so %d %s waited; here is how many of each.", total, noun)
	lines = append([]line{{lead, mdEscape(lead)}}, lines...)
	link = Clean(link, 2*fieldMaxRunes)
	if link != "" {
		lines = append(lines, line{LinkLabel + link, mdLink(cmp.Or(Clean(linkText, fieldMaxRunes), DefaultLinkText), link)})
	}
	return message(fmt.Sprintf("Switchboard: %d %s waited while this sink's budget was spent", total, noun), lines, link, sev)
}

// RenderTest builds the message a sink's send test delivers (REQ-5, D14).
func RenderTest() Message {
	const body = "This is a test message from Switchboard. If you can read it, this sink works."
	return Message{Title: TestTitle, Body: body, Markdown: mdEscape(body), Severity: notifytype.SeverityNormal}
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

// MarkdownEscape is text as Finish writes it in Markdown: every character
// that would start markup escaped (see Finish).
func MarkdownEscape(s string) string { return mdEscape(s) }
