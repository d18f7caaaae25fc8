package host

import (
	"cmp"
	"maps"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// The keys of engine.Content.Data under which the host's todo events
// (todo.dead_lettered, relay.exhausted) carry what is the host's to say
// (TodoContent). Rows written before they moved into Data carried the same
// names as top-level keys; the engine reads those into Data.
const (
	DataCause           = "cause"
	DataAttempts        = "attempts"
	DataAttemptSummary  = "attempt_summary"
	DataArtifactHandle  = "artifact_handle"
	DataOriginDisplay   = "origin_display"
	DataOriginPermalink = "origin_permalink"
)

// TodoContent is what a todo event says beyond the engine's generic
// content, carried in engine.Content.Data (Data, TodoContentOf).
type TodoContent struct {
	// Cause is why the todo dead-lettered: "fail at the cap", "lease
	// expired at the cap", "endpoint revoked", "interrupted".
	Cause string
	// Attempts is the todo's attempt count.
	Attempts int
	// AttemptSummary and ArtifactHandle come from the closing attempt when
	// attempt history records them. AttemptSummary is agent-written: the
	// message shows it on its own labelled line, cut to
	// sinks.TitleMaxRunes.
	AttemptSummary string
	ArtifactHandle string
	// OriginDisplay and OriginPermalink describe the reply origin when the
	// todo has one (SPEC-0028).
	OriginDisplay   string
	OriginPermalink string
}

// Data is t as engine.Content.Data: one entry per value that is set (an
// attempt count above zero, a text not empty), nil when none is.
func (t TodoContent) Data() map[string]string {
	d := map[string]string{}
	set := func(k, v string) {
		if v != "" {
			d[k] = v
		}
	}
	set(DataCause, t.Cause)
	if t.Attempts != 0 {
		d[DataAttempts] = strconv.Itoa(t.Attempts)
	}
	set(DataAttemptSummary, t.AttemptSummary)
	set(DataArtifactHandle, t.ArtifactHandle)
	set(DataOriginDisplay, t.OriginDisplay)
	set(DataOriginPermalink, t.OriginPermalink)
	if len(d) == 0 {
		return nil
	}
	return d
}

// WithTodo is c carrying t in its Data, beside any entries it has.
func WithTodo(c engine.Content, t TodoContent) engine.Content {
	d := t.Data()
	if len(d) == 0 {
		return c
	}
	data := maps.Clone(c.Data)
	if data == nil {
		data = map[string]string{}
	}
	maps.Copy(data, d)
	c.Data = data
	return c
}

// TodoContentOf reads a todo event's TodoContent back from c's Data; an
// attempt count that is not a number reads as 0.
func TodoContentOf(c engine.Content) TodoContent {
	n, _ := strconv.Atoi(c.Data[DataAttempts])
	return TodoContent{
		Cause: c.Data[DataCause], Attempts: n,
		AttemptSummary: c.Data[DataAttemptSummary], ArtifactHandle: c.Data[DataArtifactHandle],
		OriginDisplay: c.Data[DataOriginDisplay], OriginPermalink: c.Data[DataOriginPermalink],
	}
}

// Words of the host's messages.
const (
	// AttemptSummaryLabel introduces the agent-written summary of a dead
	// letter's last attempt.
	AttemptSummaryLabel = "Last attempt's summary (agent-written): "
	// SubjectLabel introduces the sender-written subject of a delivery.
	SubjectLabel = "About: "
	// CoalescedLinkPath is the board's notifications page, where the
	// message that stands for a sink's held rows links (Links).
	CoalescedLinkPath = "/board/notifications"
	// BoardLinkText is the words a Markdown body links to the board.
	BoardLinkText = "Open on the board"
	// fieldMaxRunes bounds the text the host supplies (place, summary,
	// cause, origin, artifact handle), which is ours but may quote others.
	fieldMaxRunes = 200
)

// TitlePrefix is how a message's title names a host event type, for a
// person: "Dead letter" for todo.dead_lettered. Another type is named as
// itself, in brackets.
func TitlePrefix(t notifytype.EventType) string {
	switch t {
	case EventTodoDeadLettered:
		return "Dead letter"
	case EventRelayExhausted:
		return "Relay out of attempts"
	case EventDeliveryQuarantined:
		return "Quarantined delivery"
	case EventRuleNotify:
		return "Rule matched"
	}
	return "[" + sinks.Clean(string(t), 64) + "]"
}

// CoalescedLabel names the events of a host type counted in the message
// that stands for a sink's held rows, for a person: "Dead letters".
// Another type is named as itself.
func CoalescedLabel(t notifytype.EventType) string {
	switch t {
	case EventTodoDeadLettered:
		return "Dead letters"
	case EventRelayExhausted:
		return "Relays out of attempts"
	case EventDeliveryQuarantined:
		return "Quarantined deliveries"
	case EventRuleNotify:
		return "Rule matches"
	}
	return sinks.Clean(string(t), 64)
}

// causeWords says why a todo dead-lettered, for a person; a cause this
// package does not know is shown as given (cleaned).
var causeWords = map[string]string{
	"fail at the cap":          "its last attempt failed and no attempts were left",
	"lease expired at the cap": "the lease on its last attempt expired and no attempts were left",
	"endpoint revoked":         "the endpoint working on it was revoked",
	"interrupted":              "it was interrupted",
}

// Render is the message the engine delivers for one outbox row of a host
// type (Events), without an engine: the host's wording (Draft) finished by
// the engine's rules (sinks.Finish). Tests and benchmarks use it.
func Render(c engine.Content, m sinks.Meta) sinks.Message {
	if !m.Severity.Valid() {
		m.Severity = notifytype.SeverityNormal
		if k, ok := KindOf(m.EventType); ok {
			m.Severity = k.Severity
		}
	}
	return sinks.Finish(Draft(c, m.EventType), m, c.Body)
}

// Draft is the host's wording of an event of host type t (REQ-9, D13,
// D14), written for a person; the host's event declarations (Events) word
// their messages with it, and the engine finishes it (sinks.Finish).
//
// The title names the event and its place, then the item: "Dead letter in
// forge: Nightly build failed". The body opens with one sentence saying
// what happened ("A todo in queue forge dead-lettered after 3 attempts:
// its last attempt failed and no attempts were left.", or the source's
// summary for other events), then, when present: the subject, a digest's
// lines, the origin, the closing attempt's summary, the artifact handle
// (TodoContent, from c.Data), and the board link ("Open on the board").
// Another type reads as its name in brackets with its place, title and
// summary.
//
// Sender- and agent-written text (Title, the attempt's summary) is cut to
// sinks.TitleMaxRunes and appears only as the item's title: in the title's
// item position, or on its own labelled line, never inside a sentence.
func Draft(c engine.Content, t notifytype.EventType) engine.Draft {
	title := sinks.Clean(c.Title, sinks.TitleMaxRunes)
	place := sinks.Clean(c.Place, fieldMaxRunes)
	todo := TodoContentOf(c)

	head := TitlePrefix(t)
	switch t {
	case EventTodoDeadLettered, EventRelayExhausted:
		head += join(" in ", place) + join(": ", title)
	case EventDeliveryQuarantined, EventRuleNotify:
		head += join(" on ", place) + join(": ", title)
	default:
		head += join(": ", place)
		if place != "" {
			head += join(" · ", title)
		} else {
			head += join(": ", title)
		}
	}

	d := engine.Draft{Title: head, Report: c.Lines, Link: c.LinkPath, LinkText: BoardLinkText}
	switch t {
	case EventTodoDeadLettered, EventRelayExhausted:
		d.Lines = append(d.Lines, deadLetterSentence(t, place, todo.Attempts, sinks.Clean(todo.Cause, fieldMaxRunes)))
	default:
		d.Lines = append(d.Lines, sentence(sinks.Clean(c.Summary, fieldMaxRunes)))
	}
	d.Lines = append(d.Lines, labelled(SubjectLabel, sinks.Clean(c.Subject, fieldMaxRunes)))
	d.Details = append(d.Details,
		labelled("Origin: ", sinks.Clean(cmp.Or(todo.OriginDisplay, todo.OriginPermalink), fieldMaxRunes)),
		labelled(AttemptSummaryLabel, sinks.Clean(todo.AttemptSummary, sinks.TitleMaxRunes)),
		labelled("Artifact: ", sinks.Clean(todo.ArtifactHandle, fieldMaxRunes)))
	return d
}

// deadLetterSentence is the first line of a dead letter's message: what
// happened, where, after how many attempts and why. It names the todo by
// its place only: the todo's title is sender-written, and is only ever the
// item's title (the message's title), never part of a sentence (REQ-9), so
// a title cannot pose as the cause or a link.
func deadLetterSentence(t notifytype.EventType, place string, attempts int, cause string) string {
	var p strings.Builder
	what, did := "A todo", " dead-lettered"
	if t == EventRelayExhausted {
		what, did = "A relay todo", " gave up"
		if attempts <= 0 {
			did = " ran out of attempts"
		}
	}
	p.WriteString(what)
	if place != "" {
		p.WriteString(" in queue " + place)
	}
	p.WriteString(did)
	if attempts > 0 {
		p.WriteString(" after " + strconv.Itoa(attempts) + " attempt")
		if attempts != 1 {
			p.WriteString("s")
		}
	} else if t == EventTodoDeadLettered {
		p.WriteString(" before any attempt")
	}
	if w, ok := causeWords[cause]; ok {
		cause = w
	}
	if cause != "" {
		p.WriteString(": " + cause)
	}
	p.WriteString(".")
	return p.String()
}

// labelled is label+v, or "" when v is empty.
func labelled(label, v string) string {
	if v == "" {
		return ""
	}
	return label + v
}

// join is sep+v, or "" when v is empty.
func join(sep, v string) string {
	if v == "" {
		return ""
	}
	return sep + v
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
