package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// render words one outbox row as its type's declaration says (Message),
// finished by the engine's rules (sinks.Finish). A row of a type no longer
// declared, or whose Message panics, gets the engine's plain wording: its
// type in brackets, place, title, summary and link.
//
// A wording is kept (renderCache) and used again for the next row of the
// same content, type, severity, count and excerpt opt-in: the rows of one
// event, one a sink, are worded once. A row whose content cannot be read,
// or whose Message panicked, is worded afresh each time, and logged each
// time.
func (e *Engine) render(r store.OutboxRow) sinks.Message {
	k := keyOf(r)
	s, msg, ok := e.renders.get(k)
	if ok {
		return msg
	}
	msg, keep := e.renderRow(r)
	if keep {
		e.renders.put(s, k, msg)
	}
	return msg
}

// renderRow is render without the cache; keep says whether the wording
// may be used for another row of the same key (its content was read and
// its Message returned).
func (e *Engine) renderRow(r store.OutboxRow) (msg sinks.Message, keep bool) {
	content, err := decodeContent(r.Payload)
	if err != nil {
		e.log.Error("error reading outbox row content", "sink_id", r.SinkID, "row_id", r.ID, "error", err)
	}
	panicked := false
	t, sev := notifytype.EventType(r.EventType), notifytype.Severity(r.Severity)
	m := sinks.Meta{EventType: t, Severity: sev, Count: r.Count, IncludeExcerpt: r.IncludeExcerpt, BaseURL: e.cfg.BaseURL}
	kind, ok := e.kinds.byType[t]
	if !sev.Valid() {
		m.Severity = cmp.Or(kind.Severity, notifytype.SeverityNormal)
	}
	var d sinks.Draft
	if ok {
		d, ok = e.draft(kind, EventMessage{Type: t, Severity: m.Severity, Count: r.Count, Content: cleanContent(content)})
		panicked = !ok
	}
	if ok && (t == agentNotifyKind.Type || t == digestKind.Type) {
		// The engine's own kinds link in the embedder's words.
		d.LinkText = e.cfg.Links.Text
	}
	if !ok {
		d = plainDraft(content, t)
	}
	return sinks.Finish(d, m, content.Body), err == nil && !panicked
}

// draft calls the kind's Message, reporting false when it panicked.
func (e *Engine) draft(kind EventKind, m EventMessage) (d sinks.Draft, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			e.log.Error("event type's Message panicked; the message is worded plainly", "event_type", kind.Type, "panic_type", fmt.Sprintf("%T", v))
			ok = false
		}
	}()
	return kind.Message(m), true
}

// plainDraft is the engine's wording of a row it has no declaration for:
// "[job.failed]: place · title", the summary, the link.
func plainDraft(c sinks.Content, t notifytype.EventType) sinks.Draft {
	c = cleanContent(c)
	title := "[" + string(t) + "]"
	if c.Place != "" {
		title += ": " + c.Place
		if c.Title != "" {
			title += " · " + c.Title
		}
	} else if c.Title != "" {
		title += ": " + c.Title
	}
	return sinks.Draft{Title: title, Lines: []string{c.Summary}, Report: c.Lines, Link: c.LinkPath}
}

// cleanContent is c as a declaration's Message sees it (REQ-9): every
// field cleaned, the sender-written Title cut to sinks.TitleMaxRunes, the
// rest and Data's values to 200 characters (Data's keys to 64), and no
// body: the excerpt is the engine's to add, and only on opt-in.
func cleanContent(c sinks.Content) sinks.Content {
	const other = 200
	c.Title = sinks.Clean(c.Title, sinks.TitleMaxRunes)
	for _, f := range []*string{&c.Place, &c.Summary, &c.Subject} {
		*f = sinks.Clean(*f, other)
	}
	if c.Data != nil {
		data := make(map[string]string, len(c.Data))
		for k, v := range c.Data {
			data[sinks.Clean(k, 64)] = sinks.Clean(v, other)
		}
		c.Data = data
	}
	c.Body = ""
	return c
}

// decodeContent reads an outbox row's content. Rows written before the
// reference host's todo fields moved into Content.Data carry them as
// top-level keys ("cause", "attempts", "attempt_summary",
// "artifact_handle", "origin_display", "origin_permalink"): each is read
// into Data under its own name, unless Data has that key already, so such
// a row is worded as it was when it was emitted.
func decodeContent(payload []byte) (sinks.Content, error) {
	row, ok := decodeStoredFast(payload)
	if !ok {
		// A variable of its own: one read by pointer lives on the heap,
		// and the fast path's need not.
		var slow storedContent
		if err := json.Unmarshal(payload, &slow); err != nil {
			return slow.Content, err
		}
		row = slow
	}
	c := row.Content
	legacy := [...]struct{ key, value string }{
		{"cause", row.Cause},
		{"attempts", strconv.FormatInt(row.Attempts, 10)},
		{"attempt_summary", row.AttemptSummary},
		{"artifact_handle", row.ArtifactHandle},
		{"origin_display", row.OriginDisplay},
		{"origin_permalink", row.OriginPermalink},
	}
	for _, l := range legacy {
		if l.value == "" || (l.key == "attempts" && row.Attempts == 0) {
			continue
		}
		if _, ok := c.Data[l.key]; ok {
			continue
		}
		if c.Data == nil {
			c.Data = map[string]string{}
		}
		c.Data[l.key] = l.value
	}
	return c, nil
}

// renderCoalesced words the one message that stands for a sink's held
// rows (REQ-11, D9): the counts by type, in declaration order (types no
// longer declared, by name, after them), named by each kind's Label, and
// the embedder's link (Config.Links.Coalesced).
func (e *Engine) renderCoalesced(owner notifytype.OwnerScope, rows []store.OutboxRow) sinks.Message {
	counts := map[notifytype.EventType]int{}
	for _, r := range rows {
		counts[notifytype.EventType(r.EventType)] += r.Count
	}
	var items []sinks.Count
	for _, k := range e.kinds.list {
		if n := counts[k.Type]; n > 0 {
			items = append(items, sinks.Count{Label: k.Label, N: n, Severity: k.Severity})
			delete(counts, k.Type)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(counts)) {
		items = append(items, sinks.Count{Label: string(t), N: counts[t], Severity: notifytype.SeverityNormal})
	}
	var link string
	if e.cfg.Links.Coalesced != nil {
		if l := e.cfg.Links.Coalesced(owner); l != "" {
			link = l
			if !strings.HasPrefix(strings.ToLower(l), "https://") && !strings.HasPrefix(strings.ToLower(l), "http://") {
				link = strings.TrimRight(e.cfg.BaseURL, "/") + "/" + strings.TrimLeft(l, "/")
			}
		}
	}
	return sinks.RenderCounts(items, link, e.cfg.Links.Text)
}

// redactingAdapter redacts, from every message it delivers, the sink's
// own secret and the credentials of any URL (REQ-9: a notification carries
// no secret): whatever a declaration's Message put in it, the engine
// sends neither.
type redactingAdapter struct {
	sinks.Adapter
	secrets []string
}

// withRedaction wraps a so that its messages never carry secret (the
// sink's connection secret, whole and in its parts).
func withRedaction(a sinks.Adapter, secret notifytype.Secret) sinks.Adapter {
	var parts []string
	if !secret.IsZero() {
		whole := secret.Reveal()
		parts = append(parts, whole)
		for _, p := range strings.FieldsFunc(whole, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(`,;"'[]{}()/:@?&=#\`, r) }) {
			if len(p) >= minSecretPart {
				parts = append(parts, p)
			}
		}
		// Each as Markdown escapes it too, once here rather than for each
		// field of each message.
		for _, p := range parts {
			if esc := sinks.MarkdownEscape(p); esc != p && !slices.Contains(parts, esc) {
				parts = append(parts, esc)
			}
		}
	}
	return redactingAdapter{Adapter: a, secrets: parts}
}

// minSecretPart is the shortest part of a secret redacted on its own: a
// shorter one (a scheme, a port) would redact ordinary words.
const minSecretPart = 8

// urlCredentials matches the user information of a URL ("user:pw@").
var urlCredentials = regexp.MustCompile(`(?i)([a-z][a-z0-9+.-]*://)[^\s/@<>()\[\]]+@`)

func (a redactingAdapter) Deliver(ctx context.Context, msg sinks.Message) sinks.Result {
	return a.Adapter.Deliver(ctx, redact(msg, a.secrets))
}

// redact replaces in msg every one of secrets (withRedaction's: each
// secret as written and as Markdown escapes it), and every URL's
// credentials, by "[redacted]".
func redact(msg sinks.Message, secrets []string) sinks.Message {
	fields := []*string{&msg.Title, &msg.Body, &msg.Markdown, &msg.Link}
	for _, f := range fields {
		// The expression needs both "://" and "@": most messages have no
		// "@", and the scan of one that has costs a backtracking match.
		if strings.Contains(*f, "@") && strings.Contains(*f, "://") {
			*f = urlCredentials.ReplaceAllString(*f, "${1}[redacted]@")
		}
		for _, s := range secrets {
			*f = strings.ReplaceAll(*f, s, "[redacted]")
		}
	}
	return msg
}
