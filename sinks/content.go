package sinks

import "github.com/switchboard/notify/notifytype"

// Content is what a notification says, as the event source gave it
// (REQ-9). Emit stores it on the outbox row as JSON; the message is
// rendered from it at delivery, where truncation, control-stripping and
// labelling apply. Fields that are sender- or agent-written are marked.
type Content struct {
	// Title is the item's title: a todo's, a delivery's subject, an agent
	// page's. Sender- or agent-written.
	Title string `json:"title,omitempty"`

	// Place is where the item is: a queue, a webhook, a digest's name.
	Place string `json:"place,omitempty"`

	// Summary is a one-line summary written by the source (ours, not the
	// sender's).
	Summary string `json:"summary,omitempty"`

	// Subject names what a webhook delivery is about, in words: its
	// sender, repository and issue ("octocat · org/repo · issue #12").
	// Read from the payload, so sender-written: shown on its own labelled
	// line ("About: "), cleaned and cut.
	Subject string `json:"subject,omitempty"`

	// LinkPath is where the item is: a path ("/board/todos/12"), prefixed
	// by the engine's BaseURL, or an absolute http(s) URL.
	LinkPath string `json:"link_path,omitempty"`

	// Lines are a digest's body, one line each (REQ-13): counts, ages,
	// names, titles and board links, built by the digest builder. Each is
	// cleaned and cut again when rendered.
	Lines []string `json:"lines,omitempty"`

	// Data are the source's own values for its event type's message (an
	// exit code, a job's queue, why a todo failed): shown only as its
	// declaration's Message shows them, each key cut to 64 characters and
	// each value to 200, cleaned, before Message sees them; a value the
	// Message shows as sender- or agent-written text it cuts further
	// itself. At most MaxDataEntries.
	Data map[string]string `json:"data,omitempty"`

	// Body is the subject's body, the source of an opt-in excerpt. Emit
	// stores it only on rows whose subscription set include_excerpt.
	// Sender-written.
	Body string `json:"body,omitempty"`
}

// MaxDataEntries bounds Content.Data.
const MaxDataEntries = 32

// Meta is what the outbox row adds to the content when it is rendered.
type Meta struct {
	EventType notifytype.EventType
	Severity  notifytype.Severity
	// Count is how many events the row stands for (1 + repeats); a message
	// with Count > 1 says "and N more".
	Count int
	// IncludeExcerpt is the subscription's opt-in (REQ-9).
	IncludeExcerpt bool
	// BaseURL is SWITCHBOARD_BASE_URL, the prefix of board links.
	BaseURL string
}
