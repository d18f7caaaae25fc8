package apprise

import (
	"strings"
	"unicode"
)

// A Splitter is one generation of Apprise's URL splitter
// (apprise.utils.parse_urls, which the Apprise API runs on a stateless
// request's urls). They differ only in how long the scheme of the next URL
// may be: Apprise finds every
//
//	[a-z0-9]+?://.*?  followed by  end of text  or  [\s,]+[a-z0-9]{Min,Max}?://
//
// matched case-insensitively over Unicode text, as Python's re module
// matches it: \s is any Unicode space (and the separators U+001C to
// U+001F), "." stops at a newline, "$" also matches before a final newline,
// and the ASCII letters match four non-ASCII ones under IGNORECASE (İ, ı,
// ſ, K). Text where no URL is found is split on commas, semicolons,
// brackets and spaces, as Apprise keeps it for its error report.
type Splitter struct {
	// Versions are the Apprise releases that split this way.
	Versions string
	// MinScheme and MaxScheme bound the length of the scheme that starts
	// another URL after a separator.
	MinScheme, MaxScheme int
}

// Splitters are Apprise's URL splitters from 1.2 (Debian 12's package) to
// the newest, oldest first: 1.2 to 1.5 start another URL at a scheme of 2
// to 9 letters, 1.6 to 1.9 at 1 to 12, 1.10 and later at 1 to 32. A URL
// any of them reads as two is refused (CheckSchemes), and so is one that
// only looks like two (OneURL), so that a later Apprise cannot find a
// second service in it either.
var Splitters = []Splitter{
	{Versions: "1.2-1.5", MinScheme: 2, MaxScheme: 9},
	{Versions: "1.6-1.9", MinScheme: 1, MaxScheme: 12},
	{Versions: "1.10+", MinScheme: 1, MaxScheme: 32},
}

// SplitURLs splits s into Apprise URLs as the newest Apprise does (the
// last of Splitters).
func SplitURLs(s string) []string { return Splitters[len(Splitters)-1].Split(s) }

// Split splits s into Apprise URLs as sp's Apprise versions do.
func (sp Splitter) Split(s string) []string {
	text := []rune(s)
	var out []string
	for pos := 0; pos < len(text); {
		end, ok := sp.matchURLAt(text, pos)
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

// OneURL is the stricter verdict a stored URL must pass, whichever Apprise
// reads it: s, trimmed, starts with a scheme of ASCII letters and digits
// and "://", is UTF-8 without white space or control characters, and holds
// no second URL that any Apprise could find, now or with longer schemes:
// no comma followed, after any more commas, by characters that could spell
// a scheme (anything but separators, "/", ":", "?", "#" and "@", however
// many) and then "://". Each of Splitters reads a string OneURL accepts as
// exactly that one URL.
func OneURL(s string) bool { return checkURLShape(s) == nil && !hasSecondURL(s) }

// hasSecondURL reports a separator followed by something:// in s.
func hasSecondURL(s string) bool {
	text := []rune(strings.TrimSpace(s))
	for i := 0; i < len(text); i++ {
		if !isSeparator(text[i]) {
			continue
		}
		j := i + 1
		for j < len(text) && isSeparator(text[j]) {
			j++
		}
		for j < len(text) && !isSeparator(text[j]) && !strings.ContainsRune("/:?#@", text[j]) {
			j++
		}
		if hasSchemeSep(text, j) {
			return true
		}
	}
	return false
}

func isSeparator(r rune) bool { return r == ',' || isPySpace(r) }

// matchURLAt matches one URL starting at pos and returns where it ends.
func (sp Splitter) matchURLAt(text []rune, pos int) (int, bool) {
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
		if atEnd(text, e) || sp.nextURLAt(text, e) {
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

// nextURLAt is the lookahead [\s,]+[a-z0-9]{Min,Max}?:// at e.
func (sp Splitter) nextURLAt(text []rune, e int) bool {
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
	return j-i >= sp.MinScheme && j-i <= sp.MaxScheme && hasSchemeSep(text, j)
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
