package sinks

import (
	"cmp"
	"strconv"
	"strings"

	"github.com/switchboard/notify/notifytype"
)

// Limits of what a Draft may say; Finish cuts anything longer.
const (
	// MessageTitleMaxRunes bounds a message's title (before the " (and N
	// more)" the engine adds).
	MessageTitleMaxRunes = 400
	// MessageLineMaxRunes bounds each line of Lines and Details.
	MessageLineMaxRunes = 600
	// MessageMaxLines bounds Lines and Details, each.
	MessageMaxLines = 20
	// DefaultLinkText is the words a Markdown body links when the Draft
	// names none.
	DefaultLinkText = "Open"
)

// Draft is a message as an event type's declaration words it, before the
// engine's rules (Finish) make it a Message. All of it is plain text, one
// value a line; Finish writes the Markdown itself, escaping every value,
// so no text becomes markup.
type Draft struct {
	// Title names the event and its item: "Job failed: nightly-export".
	Title string
	// Lines say what happened, one a line, first in the body.
	Lines []string
	// Report is a block of lines shown as given after Lines (a digest's
	// sections): cleaned and cut to DigestLineMaxRunes each, at most
	// DigestMaxLines; an empty line separates sections. In Markdown, a
	// line "- x" is a list item, and a line ending in ": " and a URL under
	// BaseURL's /board/ links its words.
	Report []string
	// Details follow the "and N more" line: the origin, an attempt's
	// summary, an artifact.
	Details []string
	// Link is where the message points: a path, prefixed by the engine's
	// BaseURL, or an absolute http(s) URL. Empty: no link.
	Link string
	// LinkText is the words a Markdown body links ("Open on the board").
	// Defaults to DefaultLinkText.
	LinkText string
}

// Finish applies the engine's rules to a declaration's draft of one
// outbox row (REQ-9, REQ-11): every value is stripped of control
// characters and put on one line (Clean), the title cut to
// MessageTitleMaxRunes and each line to MessageLineMaxRunes, at most
// MessageMaxLines of Lines and of Details; when the row stands for several
// events (m.Count > 1), the title ends " (and N more)" and a line "This one
// and N more like it." follows Lines and Report; when the subscription
// opted in (m.IncludeExcerpt), body's first ExcerptMaxRunes characters
// follow, labelled ExcerptLabel; the link, last, is labelled LinkLabel.
// Empty lines are left out. The severity is m.Severity (normal when it is
// not valid).
func Finish(d Draft, m Meta, body string) Message {
	head := Clean(d.Title, MessageTitleMaxRunes)
	if m.Count > 1 {
		head += " (and " + strconv.Itoa(m.Count-1) + " more)"
	}
	var lines []line
	add := func(v string, limit int) {
		if v = Clean(v, limit); v != "" {
			lines = append(lines, line{v, mdEscape(v)})
		}
	}
	for _, l := range d.Lines[:min(len(d.Lines), MessageMaxLines)] {
		add(l, MessageLineMaxRunes)
	}
	if md := digestMarkdown(d.Report, m.BaseURL); md != "" {
		// Plain text keeps one blank line where the report separates its
		// sections, so a plain-text client shows them apart.
		var plain []string
		for _, l := range d.Report[:min(len(d.Report), DigestMaxLines)] {
			l = Clean(l, DigestLineMaxRunes)
			if l != "" || (len(plain) > 0 && plain[len(plain)-1] != "") {
				plain = append(plain, l)
			}
		}
		for len(plain) > 0 && plain[len(plain)-1] == "" {
			plain = plain[:len(plain)-1]
		}
		lines = append(lines, line{strings.Join(plain, "\n"), md})
	}
	if m.Count > 1 {
		add("This one and "+strconv.Itoa(m.Count-1)+" more like it.", MessageLineMaxRunes)
	}
	for _, l := range d.Details[:min(len(d.Details), MessageMaxLines)] {
		add(l, MessageLineMaxRunes)
	}
	if m.IncludeExcerpt {
		if ex := Clean(body, ExcerptMaxRunes); ex != "" {
			add(ExcerptLabel+ex, MessageLineMaxRunes)
		}
	}
	var link string
	if d.Link != "" {
		if isAbsolute(d.Link) {
			link = Clean(d.Link, 2*fieldMaxRunes)
		} else {
			link = Clean(joinLink(m.BaseURL, d.Link), 2*fieldMaxRunes)
		}
		if link != "" {
			text := cmp.Or(Clean(d.LinkText, fieldMaxRunes), DefaultLinkText)
			lines = append(lines, line{LinkLabel + link, mdLink(text, link)})
		}
	}
	sev := m.Severity
	if !sev.Valid() {
		sev = notifytype.SeverityNormal
	}
	return message(head, lines, link, sev)
}

// isAbsolute reports whether link is an absolute http(s) URL.
func isAbsolute(link string) bool {
	l := strings.ToLower(link)
	return strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://")
}
