package engine

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard/notify/sinks"
)

// Words of the engine's own kinds' messages.
const (
	agentPagePrefix = "Agent page: "
	digestPrefix    = "Queue digest"
	subjectLabel    = "About: "
)

// ownWording words a row of the engine's own kinds (agent.notify, digest)
// from its generic content: "Agent page: <title>" or "Queue digest:
// <place> · <title>", the summary as a sentence, the subject on its own
// labelled line, a digest's lines, and the link, which the engine reads in
// the embedder's words (Config.Links.Text, set by render). The content is
// already cleaned (cleanContent).
func ownWording(m EventMessage) sinks.Draft {
	c := m.Content
	title := sinks.Clean(c.Title, sinks.TitleMaxRunes)
	var head string
	switch m.Type {
	case EventAgentNotify:
		head = agentPagePrefix + title
	default:
		head = digestPrefix
		if c.Place != "" {
			head += ": " + c.Place
			if title != "" {
				head += " · " + title
			}
		} else if title != "" {
			head += ": " + title
		}
	}
	d := sinks.Draft{Title: head, Lines: []string{sentence(c.Summary)}, Report: c.Lines, Link: c.LinkPath}
	if c.Subject != "" {
		d.Lines = append(d.Lines, subjectLabel+c.Subject)
	}
	return d
}

// sentence starts s with a capital letter and ends it with a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	r, size := utf8.DecodeRuneInString(s)
	s = string(unicode.ToUpper(r)) + s[size:]
	if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "!") && !strings.HasSuffix(s, "?") {
		s += "."
	}
	return s
}
