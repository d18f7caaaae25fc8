package apprise

import (
	"strings"
	"unicode"
)

// SplitURLs splits s into Apprise URLs exactly as Apprise does
// (apprise.utils.parse_urls, which the Apprise API runs on a stateless
// request's urls): it finds every
//
//	[a-z0-9]+?://.*?  followed by  end of text  or  [\s,]+[a-z0-9]{2,9}://
//
// matched case-insensitively over Unicode text, as Python's re module
// matches it: \s is any Unicode space (and the separators U+001C to
// U+001F), "." stops at a newline, "$" also matches before a final newline,
// and the ASCII letters match four non-ASCII ones under IGNORECASE (İ, ı,
// ſ, K). Text where no URL is found is split on commas, semicolons,
// brackets and spaces, as Apprise keeps it for its error report.
//
// The check of stored URLs (CheckSchemes) refuses a URL this reads as more
// than one, so a comma or a space can never smuggle a second service past
// the scheme allowlist; a test compares it with the real Apprise.
func SplitURLs(s string) []string {
	text := []rune(s)
	var out []string
	for pos := 0; pos < len(text); {
		end, ok := matchURLAt(text, pos)
		switch {
		case ok:
			out = append(out, string(text[pos:end]))
			pos = end
		case isPyAlnum(text[pos]):
			// Every later start inside this run of letters ends where it
			// ends, and fails there alike.
			for pos < len(text) && isPyAlnum(text[pos]) {
				pos++
			}
		default:
			pos++
		}
	}
	if len(out) > 0 || s == "" {
		return out
	}
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == '[' || r == ']' || r == ';' || r == ',' || isPySpace(r)
	})
}

// matchURLAt matches one URL starting at pos and returns where it ends.
func matchURLAt(text []rune, pos int) (int, bool) {
	// [a-z0-9]+? then "://": the letters before "://" must all be alnum,
	// and there is exactly one way to take them.
	i := pos
	for i < len(text) && isPyAlnum(text[i]) {
		i++
	}
	if i == pos || !hasSchemeSep(text, i) {
		return 0, false
	}
	// .*? up to the first place the lookahead holds; "." cannot take a
	// newline, and nothing before it can change, so the match fails there.
	for e := i + 3; ; e++ {
		if atEnd(text, e) || nextURLAt(text, e) {
			return e, true
		}
		if text[e] == '\n' {
			return 0, false
		}
	}
}

// atEnd is Python's "$" without MULTILINE: the end, or before a final
// newline.
func atEnd(text []rune, e int) bool {
	return e == len(text) || (e == len(text)-1 && text[e] == '\n')
}

// nextURLAt is the lookahead [\s,]+[a-z0-9]{2,9}?:// at e.
func nextURLAt(text []rune, e int) bool {
	i := e
	for i < len(text) && (text[i] == ',' || isPySpace(text[i])) {
		i++
	}
	if i == e {
		return false
	}
	j := i
	for j < len(text) && isPyAlnum(text[j]) {
		j++
	}
	return j-i >= 2 && j-i <= 9 && hasSchemeSep(text, j)
}

func hasSchemeSep(text []rune, i int) bool {
	return i+3 <= len(text) && text[i] == ':' && text[i+1] == '/' && text[i+2] == '/'
}

// isPySpace is Python's \s on text (str.isspace): Go's Unicode spaces and
// the information separators U+001C to U+001F.
func isPySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// isPyAlnum is Python's [a-z0-9] under re.IGNORECASE on text: the ASCII
// letters and digits, and the four letters that case-fold onto ASCII ones.
func isPyAlnum(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	case r == '\u0130', r == '\u0131', r == '\u017f', r == '\u212a':
		return true
	}
	return false
}
