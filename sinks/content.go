package sinks

import "github.com/switchboard/notify/notifytype"

// Content is what a notification says, as the event source gave it
// (REQ-9). Emit stores it on the outbox row as JSON; the message is
// rendered from it at delivery, where truncation, control-stripping and
// labelling apply. Fields that are sender- or agent-written are marked.
type Content struct {
	// Title is the item's title: a todo title, a subject title or an agent
	// page's title. Sender- or agent-written.
	Title string `json:"title,omitempty"`

	// Place is the queue name (todo events) or webhook name (quarantine,
	// rules) the title names.
	Place string `json:"place,omitempty"`

	// Summary is a one-line summary written by the source (ours, not the
	// sender's).
	Summary string `json:"summary,omitempty"`

	// Cause is why a todo dead-lettered: "fail at the cap", "lease expired
	// at the cap", "endpoint revoked", "interrupted".
	Cause string `json:"cause,omitempty"`

	// Subject names what a webhook delivery is about, in words: its
	// sender, repository and issue ("octocat · org/repo · issue #12").
	// Read from the payload, so sender-written: shown on its own labelled
	// line ("About: "), cleaned and cut.
	Subject string `json:"subject,omitempty"`

	// LinkPath is the board path of the item (D13), "/board/todos/12";
	// rendering prefixes SWITCHBOARD_BASE_URL.
	LinkPath string `json:"link_path,omitempty"`

	// OriginDisplay and OriginPermalink describe the reply origin when the
	// todo has one (SPEC-0028).
	OriginDisplay   string `json:"origin_display,omitempty"`
	OriginPermalink string `json:"origin_permalink,omitempty"`

	// Attempts is the todo's attempt count (dead letters, relay exhaustion).
	Attempts int `json:"attempts,omitempty"`

	// AttemptSummary and ArtifactHandle come from the closing attempt when
	// attempt history records them. AttemptSummary is agent-written.
	AttemptSummary string `json:"attempt_summary,omitempty"`
	ArtifactHandle string `json:"artifact_handle,omitempty"`

	// Lines are a digest's body, one line each (REQ-13): counts, ages,
	// names, titles and board links, built by the digest builder. Each is
	// cleaned and cut again when rendered.
	Lines []string `json:"lines,omitempty"`

	// Data are an embedder's own values for its event type's message (an
	// exit code, a job's queue): shown only as its declaration's Message
	// shows them, each key cut to 64 characters and each value to 200,
	// cleaned, before Message sees them. At most MaxDataEntries.
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
