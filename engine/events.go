package engine

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// EventKind declares an event type the engine carries: its name, its
// words, its default severity, how repeats coalesce, and how an event of
// it becomes a message. An embedder lists its kinds in Config.Events; Emit,
// QueueEmit and EmitToSink refuse an event of a type not declared there
// (invalid_argument on "type"), and subscriptions may name only declared
// types. The engine declares two kinds of its own, for the events of the
// feature packages built on it: agent.notify (engine/pages's NotifyOwner)
// and digest (engine/digests).
//
// A kind is the embedder's vocabulary, as a job kind is in River: say
// what happened in the embedder's words, and the engine keeps the rules
// that are not the embedder's to choose (REQ-9, see Message).
type EventKind struct {
	// Type is the event type's name, "job.failed": a lower-case letter,
	// then lower-case letters, digits, '.', '_' or '-', at most 64 in all.
	// Required, and unique among the declared kinds.
	Type notifytype.EventType

	// Words say in a few words, for people, what an event of this type
	// reports: "A job failed". Lists of event types (subscriptions' type
	// filters, the notifications page) show them. Required.
	Words string

	// Label names several events of this type in the message that stands
	// for a sink's held rows (REQ-11): "Failed jobs: 12". Defaults to
	// Words.
	Label string

	// Help explains the type in a sentence, where a person picks the types
	// a sink hears of. Optional.
	Help string

	// Severity is the severity an event of this type carries unless its
	// Emit says otherwise. Defaults to normal.
	Severity notifytype.Severity

	// Dedup says which emits are one notification (D7).
	Dedup Dedup

	// AlsoMatches are event types whose subscriptions hear of this type
	// too: the host's relay.exhausted reaches the sinks subscribed to
	// todo.dead_lettered. Each must be declared.
	AlsoMatches []notifytype.EventType

	// Replaces is a declared type whose open notification of the same
	// occurrence this type's event takes over: a sink hears of the
	// occurrence once, as this type (its severity and its message),
	// whichever of the two was emitted first, and an event of this type
	// still reaches a sink while a row of the type it replaces is being
	// sent to it, replacing that row if the attempt fails. Both kinds must
	// be DedupOccurrence in the same Dedup.KeySpace, for their keys to
	// meet: the host's relay.exhausted replaces todo.dead_lettered, both
	// in "todo". Optional.
	Replaces notifytype.EventType

	// Message words one outbox row of this type as a message: its title,
	// what happened, details and link (sinks.Draft). The engine then
	// applies the rules that are not the declaration's (sinks.Finish):
	// control characters stripped and every value on one line, lengths
	// cut, "and N more" when the row stands for several events, the
	// subscription's opt-in excerpt (the only place the subject's body
	// appears: Message never sees it), Markdown escaped, and the sink's
	// secrets and any URL's credentials redacted. The content it is given
	// is already cleaned, its sender-written Title cut to 120 characters
	// (sinks.TitleMaxRunes), the other fields and Data's values to 200 and
	// Data's keys to 64: cut a Data value that is sender- or agent-written
	// to sinks.TitleMaxRunes yourself, and put sender-written text only in
	// the title's item position or on a labelled line of its own, never
	// inside a sentence (REQ-9). Required.
	// It must not block: it runs on the sink actor's goroutine. A Message
	// that panics gets the engine's plain wording instead. It must depend
	// on its argument alone: the engine words the rows of one event (one
	// a sink, of the same content, type, severity and count) with one
	// call, and keeps the wording for the next such row.
	Message func(EventMessage) sinks.Draft
}

// EventMessage is what a kind's Message words: one outbox row.
type EventMessage struct {
	Type     notifytype.EventType
	Severity notifytype.Severity
	// Count is how many events the row stands for (1 + repeats).
	Count int
	// Content is what Emit gave, cleaned (see EventKind.Message), without
	// the body.
	Content sinks.Content
}

// DedupBy says what makes two emits of a type one notification.
type DedupBy uint8

const (
	// DedupNone: every emit is its own notification.
	DedupNone DedupBy = iota
	// DedupOccurrence: emits with the same Event.OccurrenceKey are one
	// occurrence, sent once per sink however often it is emitted, as long
	// as the row that carried it is kept (a row that ended undeliverable
	// does not hold its key). A todo's n-th dead letter is one.
	DedupOccurrence
	// DedupSubject: emits with the same Event.Subject while the subject's
	// row waits add to its count ("and N more"), and the row waits out
	// Dedup.Window first. A storm of quarantines on one webhook is one.
	DedupSubject
)

// Dedup is a kind's dedup rule (D7).
type Dedup struct {
	// By says what makes two emits one. Defaults to DedupNone.
	By DedupBy

	// Window is how long a DedupSubject row waits before it is sent, so
	// that the repeats of a storm join it. Zero: it is due at once, and
	// repeats join it only while it waits for its sink.
	Window time.Duration

	// KeySpace names the keys of this kind: an emit's dedup key is
	// KeySpace + ":" + its OccurrenceKey or Subject. Kinds that share a
	// key space share keys: the host's relay.exhausted and
	// todo.dead_lettered both use "todo", so an exhaustion meets the dead
	// letter of the same todo. Defaults to the type's name.
	KeySpace string
}

// maxDedupKey bounds an emit's dedup key (key space, colon and key) in
// bytes, well inside what the outbox's index takes.
const maxDedupKey = 512

// The engine's own event types: the events of its feature packages, which
// the engine declares itself (OwnEvents) after Config.Events.
const (
	// EventAgentNotify is the type of the pages an agent sends its owner
	// (engine/pages's NotifyOwner, REQ-6): normal severity.
	EventAgentNotify notifytype.EventType = "agent.notify"
	// EventDigest is the type of the queue digests engine/digests sends
	// (REQ-13): low severity.
	EventDigest notifytype.EventType = "digest"
)

// OwnEvents returns the engine's own kinds (agent.notify, digest), as
// Engine.EventKinds lists them after Config.Events: their words, label,
// help and severity, for a surface that shows them without an engine.
func OwnEvents() []EventKind { return []EventKind{agentNotifyKind, digestKind} }

// The engine's own kinds: the events of its feature packages.
var (
	// digestKind is the type of the digests engine/digests sends
	// (REQ-13): low severity, each its own notification.
	digestKind = EventKind{
		Type:     EventDigest,
		Words:    "A queue digest",
		Label:    "Queue digests",
		Help:     "a queue digest is due (digests also name their sinks on the Digests page)",
		Severity: notifytype.SeverityLow,
		Message:  ownWording,
	}
	// agentNotifyKind is the type of pages.NotifyOwner's pages (REQ-6):
	// normal severity, each its own notification.
	agentNotifyKind = EventKind{
		Type:     EventAgentNotify,
		Words:    "An agent paged its owner",
		Label:    "Agent pages",
		Help:     "an agent you allowed to page you (notify_owner) asked for your attention",
		Severity: notifytype.SeverityNormal,
		Message:  ownWording,
	}
)

// kinds is the engine's registry of declared kinds, in declaration order
// (Config.Events, then the engine's own: agent.notify, digest).
type kinds struct {
	list   []EventKind
	byType map[notifytype.EventType]EventKind
	// replaces pairs each kind that replaces another with it, for the
	// statements that coalesce rows (store.Replacements).
	replaces store.Replacements
}

// newKinds checks the declarations and indexes them.
func newKinds(declared []EventKind) (kinds, error) {
	k := kinds{byType: map[notifytype.EventType]EventKind{}}
	var errs []error
	for _, d := range append(append([]EventKind(nil), declared...), agentNotifyKind, digestKind) {
		if err := d.check(); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := k.byType[d.Type]; dup {
			if d.Type == EventDigest || d.Type == EventAgentNotify {
				errs = append(errs, fmt.Errorf("event type %q is the engine's own: do not declare it in Events", d.Type))
			} else {
				errs = append(errs, fmt.Errorf("event type %q is declared twice", d.Type))
			}
			continue
		}
		d.Severity = cmp.Or(d.Severity, notifytype.SeverityNormal)
		d.Label = cmp.Or(d.Label, d.Words)
		d.Dedup.KeySpace = cmp.Or(d.Dedup.KeySpace, string(d.Type))
		k.byType[d.Type] = d
		k.list = append(k.list, d)
	}
	for _, d := range k.list {
		for _, t := range d.AlsoMatches {
			if _, ok := k.byType[t]; !ok {
				errs = append(errs, fmt.Errorf("event type %q: AlsoMatches names %q, which is not declared", d.Type, t))
			}
		}
		if d.Replaces == "" {
			continue
		}
		r, ok := k.byType[d.Replaces]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("event type %q: Replaces names %q, which is not declared", d.Type, d.Replaces))
		case r.Type == d.Type:
			errs = append(errs, fmt.Errorf("event type %q: Replaces names the type itself", d.Type))
		case d.Dedup.By != DedupOccurrence || r.Dedup.By != DedupOccurrence || d.Dedup.KeySpace != r.Dedup.KeySpace:
			errs = append(errs, fmt.Errorf("event type %q: Replaces %q needs both to be DedupOccurrence in one key space", d.Type, d.Replaces))
		default:
			k.replaces.By = append(k.replaces.By, string(d.Type))
			k.replaces.Of = append(k.replaces.Of, string(d.Replaces))
		}
	}
	return k, errors.Join(errs...)
}

// check reports what is wrong with a declaration.
func (d EventKind) check() error {
	if _, err := notifytype.ParseEventType("type", string(d.Type)); err != nil {
		return fmt.Errorf("event type %q: the name must be a lower-case letter, then lower-case letters, digits, '.', '_' or '-', at most 64", d.Type)
	}
	var errs []error
	if d.Words == "" {
		errs = append(errs, errors.New("Words is required"))
	}
	if d.Severity != "" && !d.Severity.Valid() {
		errs = append(errs, fmt.Errorf("Severity %q is not low, normal or high", d.Severity))
	}
	if d.Dedup.By > DedupSubject {
		errs = append(errs, fmt.Errorf("Dedup.By %d is not DedupNone, DedupOccurrence or DedupSubject", d.Dedup.By))
	}
	if d.Dedup.Window < 0 || (d.Dedup.Window > 0 && d.Dedup.By != DedupSubject) {
		errs = append(errs, errors.New("Dedup.Window is for DedupSubject only, and not negative"))
	}
	if d.Message == nil {
		errs = append(errs, errors.New("Message is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("event type %q: %w", d.Type, err)
	}
	return nil
}

// EventKinds lists the declared event kinds, with their defaults filled
// in, in declaration order: Config.Events, then the engine's own
// (agent.notify, digest). Surfaces list the types a subscription
// may name from it.
func (e *Engine) EventKinds() []EventKind { return append([]EventKind(nil), e.kinds.list...) }
