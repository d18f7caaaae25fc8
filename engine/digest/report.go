package digest

import (
	"cmp"
	"fmt"

	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/notify/sinks"
)

// NotMeasured is the reason of a section whose source this instance does
// not have (D21).
const NotMeasured = "not measured on this instance"

// MaxDeadLetterTitles is how many dead-letter titles a queue lists.
const MaxDeadLetterTitles = 5

// Section is one section's figures, or the reason they could not be had.
// A section with a reason is unavailable: it is shown as "unavailable:
// <reason>" and never as zero (REQ-13).
type Section[T any] struct {
	Data T
	// Unavailable is why the figures could not be computed; empty when
	// they were.
	Unavailable string
}

// Available reports whether the section's figures were computed.
func (s Section[T]) Available() bool { return s.Unavailable == "" }

// Queue is a queue a digest covers.
type Queue struct {
	ID   int64
	Name string
}

// Pending is a queue's pending todos.
type Pending struct {
	Count int
	// OldestAge is the age of its oldest pending todo; zero when none.
	OldestAge time.Duration
}

// TodoRef is a todo a digest names: its id (for the board link) and its
// title (sender- or agent-written; truncated and control-stripped when
// rendered).
type TodoRef struct {
	ID    int64
	Title string
}

// DeadLetters are a queue's dead letters since the previous digest.
type DeadLetters struct {
	Count int
	// Recent are up to MaxDeadLetterTitles of them, newest first.
	Recent []TodoRef
}

// NamedCount is a count for a webhook or an endpoint, by name.
type NamedCount struct {
	Name  string
	Count int
}

// Report is one digest as built: the figures of every section for the
// digest's own owner scope, since Since.
type Report struct {
	DigestID int64
	Name     string
	// Since is the previous digest's send time, or 24 hours before At for
	// the first.
	Since time.Time
	At    time.Time
	First bool
	// Threshold is the oldest-pending age above which a digest is not
	// quiet.
	Threshold time.Duration
	Queues    []Queue
	// QueuesUnavailable is why the queues could not be listed; every
	// queue section is then unavailable too.
	QueuesUnavailable string

	// Per queue id.
	Pending           Section[map[int64]Pending]
	Claimed           Section[map[int64]int]
	StalledLeases     Section[map[int64]int]
	DeadLetters       Section[map[int64]DeadLetters]
	AdmissionDeferred Section[map[int64]int]

	// Per webhook or endpoint, by name; only those with a count.
	Quarantined      Section[[]NamedCount]
	UnheardDoorbells Section[[]NamedCount]
	// ClockedOut names the endpoints clocked out.
	ClockedOut Section[[]string]
	// Undeliverable counts the scope's notifications recorded
	// undeliverable.
	Undeliverable Section[int]
}

// Headline is the report's headline counts.
type Headline struct {
	DeadLetters, StalledLeases, Quarantined, UnheardDoorbells, Undeliverable Figure
	OldestPending                                                            Figure
}

// Figure is a headline count (or age, in seconds), or unavailable.
type Figure struct {
	N           int64
	Unavailable bool
}

// Headline sums the trouble counts of every queue.
func (r Report) Headline() Headline {
	var h Headline
	h.DeadLetters = sumOf(r.DeadLetters, func(d DeadLetters) int { return d.Count })
	h.StalledLeases = sumOf(r.StalledLeases, func(n int) int { return n })
	h.Quarantined = namedSum(r.Quarantined)
	h.UnheardDoorbells = namedSum(r.UnheardDoorbells)
	h.Undeliverable = Figure{N: int64(r.Undeliverable.Data), Unavailable: !r.Undeliverable.Available()}
	h.OldestPending.Unavailable = !r.Pending.Available()
	for _, p := range r.Pending.Data {
		h.OldestPending.N = max(h.OldestPending.N, int64(p.OldestAge/time.Second))
	}
	return h
}

func sumOf[T any](s Section[map[int64]T], n func(T) int) Figure {
	f := Figure{Unavailable: !s.Available()}
	for _, v := range s.Data {
		f.N += int64(n(v))
	}
	return f
}

func namedSum(s Section[[]NamedCount]) Figure {
	f := Figure{Unavailable: !s.Available()}
	for _, v := range s.Data {
		f.N += int64(v.Count)
	}
	return f
}

// Unavailable lists the sections that could not be computed, by title.
func (r Report) Unavailable() []string {
	var out []string
	for _, s := range r.sections() {
		if s.reason != "" {
			out = append(out, s.title)
		}
	}
	return out
}

// Quiet reports whether the digest has nothing to say (REQ-13): every
// section available, no dead letter, quarantined delivery, stalled lease,
// unheard doorbell or undeliverable notification, and no queue whose
// oldest pending todo is older than the threshold. A digest with an
// unavailable section is never quiet.
func (r Report) Quiet() bool {
	if len(r.Unavailable()) > 0 {
		return false
	}
	h := r.Headline()
	return h.DeadLetters.N == 0 && h.StalledLeases.N == 0 && h.Quarantined.N == 0 &&
		h.UnheardDoorbells.N == 0 && h.Undeliverable.N == 0 &&
		time.Duration(h.OldestPending.N)*time.Second <= r.Threshold
}

// HeadlineText is the headline as one line: the trouble counts and the
// oldest pending age.
func (r Report) HeadlineText() string {
	h := r.Headline()
	fig := func(f Figure, noun string) string {
		if f.Unavailable {
			return noun + " unavailable"
		}
		return strconv.FormatInt(f.N, 10) + " " + noun
	}
	parts := []string{
		fig(h.DeadLetters, "dead letters"),
		fig(h.StalledLeases, "stalled leases"),
		fig(h.Quarantined, "quarantined"),
		fig(h.UnheardDoorbells, "unheard doorbells"),
		fig(h.Undeliverable, "could not deliver"),
	}
	if h.OldestPending.Unavailable {
		parts = append(parts, "oldest pending unavailable")
	} else {
		parts = append(parts, "oldest pending "+Age(time.Duration(h.OldestPending.N)*time.Second))
	}
	return strings.Join(parts, ", ")
}

// Age formats a duration as the digest shows ages: "0m", "45m", "2h 5m",
// "3d 4h".
func Age(d time.Duration) string {
	d = d.Truncate(time.Minute)
	switch {
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dm", d/time.Hour, d%time.Hour/time.Minute)
	default:
		return fmt.Sprintf("%dd %dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	}
}

// Format selects how Lines renders text.
type Format int

const (
	// Plain text, for sinks: no markup is interpreted.
	Plain Format = iota
	// Markdown, for Cairn artifacts and the board: text from owners,
	// senders and agents is escaped so that it cannot make links or markup.
	Markdown
)

// Lines renders the report for a person reading it on a phone, one line
// each, in the given format (issue 25):
//
//   - (Markdown only: a heading with the digest's name);
//   - one sentence saying what needs attention ("Needs attention: 1 dead
//     letter, 2 stalled todos.", or "Nothing needs attention."): Lead;
//   - the period and how many queues it covers;
//   - only the queues and sections with something to say (a queue with
//     nothing is named in one "Nothing to report in …" line);
//   - every section that could not be computed, folded into one line per
//     reason: "Unavailable (not measured on this instance): unanswered agent
//     wake-ups, …" or "Unavailable (timed out after 2s): dead letters.",
//     the spec's word and its reason (REQ-13). A section not computed is never
//     shown as zero and makes the lead say so (REQ-13).
//
// Links are the embedder's (l: a dead letter's todo, the digest's own
// page), each a path under baseURL or an absolute http(s) URL, at the end
// of its line after the words it links, so that a renderer that knows its
// base URL makes them links (sinks.Finish does, for Gotify, under the
// reference board's /board/); in Markdown they are links already. A line
// whose link is "" carries none. Only counts, ages, names, truncated
// titles and the embedder's links appear (REQ-13).
func (r Report) Lines(f Format, baseURL string, l Links) []string {
	text := func(s string, limit int) string {
		s = sinks.Clean(s, limit)
		if f == Markdown {
			s = escapeMarkdown(s)
		}
		return s
	}
	link := func(words, path string) string {
		if path == "" {
			return words
		}
		url := path
		if lower := strings.ToLower(path); !strings.HasPrefix(lower, "https://") && !strings.HasPrefix(lower, "http://") {
			url = strings.TrimRight(baseURL, "/") + "/" + strings.TrimLeft(path, "/")
		}
		if f == Markdown {
			return "[" + words + "](" + url + ")"
		}
		return words + ": " + url
	}
	h2 := func(s string) string {
		if f == Markdown {
			return "## " + s
		}
		return s + ":"
	}

	var lines []string
	if f == Markdown {
		lines = append(lines, "# Digest "+text(r.Name, 64))
	}
	lines = append(lines, r.Lead())
	if f == Markdown {
		lines = append(lines, "")
	}
	period := "since the previous digest at " + r.Since.UTC().Format("2006-01-02 15:04 UTC")
	if r.First {
		period = "over the last 24 hours"
	}
	lines = append(lines, "Covers "+Count(len(r.Queues), "queue", "queues")+" "+period+".")
	if r.QueuesUnavailable != "" {
		lines = append(lines, "", "Queues unavailable, "+text(r.QueuesUnavailable, 200)+": no queue figures.")
	}

	quietQueues := []string{}
	for _, q := range r.Queues {
		var items []string
		if r.DeadLetters.Available() {
			d := r.DeadLetters.Data[q.ID]
			shown := d.Recent[:min(len(d.Recent), MaxDeadLetterTitles)]
			for _, t := range shown {
				items = append(items, "- "+link("Dead letter: "+text(t.Title, sinks.TitleMaxRunes), l.todo(t.ID)))
			}
			if d.Count > len(shown) {
				more := Count(d.Count, "dead letter", "dead letters")
				if len(shown) > 0 {
					more += " in all, the latest " + strconv.Itoa(len(shown)) + " above"
				}
				items = append(items, "- "+more)
			}
		}
		if r.StalledLeases.Available() && r.StalledLeases.Data[q.ID] > 0 {
			items = append(items, "- "+Count(r.StalledLeases.Data[q.ID], "stalled todo", "stalled todos")+" (claimed, but its worker went quiet)")
		}
		if r.Pending.Available() {
			if p := r.Pending.Data[q.ID]; p.Count > 0 {
				items = append(items, "- "+Count(p.Count, "todo waiting", "todos waiting")+", the oldest for "+ageOrJust(p.OldestAge))
			}
		}
		if r.Claimed.Available() && r.Claimed.Data[q.ID] > 0 {
			items = append(items, "- "+Count(r.Claimed.Data[q.ID], "todo", "todos")+" being worked on")
		}
		if r.AdmissionDeferred.Available() && r.AdmissionDeferred.Data[q.ID] > 0 {
			items = append(items, "- "+Count(r.AdmissionDeferred.Data[q.ID], "todo", "todos")+" deferred by the queue's budget")
		}
		if len(items) == 0 {
			quietQueues = append(quietQueues, text(q.Name, 64))
			continue
		}
		lines = append(lines, "", h2("Queue "+text(q.Name, 64)))
		lines = append(lines, items...)
	}
	if len(quietQueues) > 0 && len(quietQueues) < len(r.Queues) {
		lines = append(lines, "", "Nothing to report in "+strings.Join(quietQueues, ", ")+".")
	}

	named := func(title string, s Section[[]NamedCount], one, many string) {
		if !s.Available() || len(s.Data) == 0 {
			return
		}
		lines = append(lines, "", h2(title))
		for _, n := range s.Data {
			lines = append(lines, "- "+text(n.Name, 64)+": "+Count(n.Count, one, many))
		}
	}
	named("Quarantined deliveries (from senders not trusted yet)", r.Quarantined, "delivery", "deliveries")
	named("Agents that did not answer a wake-up", r.UnheardDoorbells, "unanswered wake-up", "unanswered wake-ups")
	if r.ClockedOut.Available() && len(r.ClockedOut.Data) > 0 {
		lines = append(lines, "", h2("Endpoints clocked out (not taking work)"))
		for _, n := range r.ClockedOut.Data {
			lines = append(lines, "- "+text(n, 64))
		}
	}
	if r.Undeliverable.Available() && r.Undeliverable.Data > 0 {
		lines = append(lines, "", Count(r.Undeliverable.Data, "notification", "notifications")+" could not be delivered.")
	}

	for _, u := range r.unavailableByReason() {
		lines = append(lines, "", "Unavailable ("+text(u.reason, 200)+"): "+strings.Join(u.titles, ", ")+".")
	}
	if r.DigestID > 0 && f == Markdown && l.Digest != "" {
		lines = append(lines, "", link(cmp.Or(l.DigestText, sinks.DefaultLinkText), l.Digest))
	}
	return lines
}

// Lead is the digest's first sentence: what needs attention, in words
// ("Needs attention: 1 dead letter, a todo waiting 2h 5m."), or that
// nothing does; when a section could not be computed, it says so rather
// than promising quiet (REQ-13).
func (r Report) Lead() string {
	h := r.Headline()
	var trouble []string
	add := func(f Figure, one, many string) {
		if !f.Unavailable && f.N > 0 {
			trouble = append(trouble, Count(int(f.N), one, many))
		}
	}
	add(h.DeadLetters, "dead letter", "dead letters")
	add(h.StalledLeases, "stalled todo", "stalled todos")
	if !h.OldestPending.Unavailable && time.Duration(h.OldestPending.N)*time.Second > r.Threshold {
		trouble = append(trouble, "a todo waiting "+Age(time.Duration(h.OldestPending.N)*time.Second))
	}
	add(h.Quarantined, "quarantined delivery", "quarantined deliveries")
	add(h.UnheardDoorbells, "unanswered agent wake-up", "unanswered agent wake-ups")
	add(h.Undeliverable, "notification not delivered", "notifications not delivered")
	un := len(r.Unavailable())
	switch {
	case len(trouble) > 0:
		return "Needs attention: " + strings.Join(trouble, ", ") + "."
	case un > 0 || r.QueuesUnavailable != "":
		return "Nothing needs attention in what was measured; " + Count(un, "section", "sections") + " could not be measured."
	}
	return "Nothing needs attention."
}

// ageOrJust is Age, or "under a minute" for an age Age shows as "0m".
func ageOrJust(d time.Duration) string {
	if d < time.Minute {
		return "under a minute"
	}
	return Age(d)
}

// Count says n of a noun in words: "1 queue", "3 queues", "no queues".
func Count(n int, one, many string) string {
	switch n {
	case 0:
		return "no " + many
	case 1:
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

type unavailableGroup struct {
	reason string
	titles []string
}

// unavailableByReason groups the sections not computed by their reason,
// in the order of Unavailable.
func (r Report) unavailableByReason() []unavailableGroup {
	var out []unavailableGroup
	for _, s := range r.sections() {
		if s.reason == "" {
			continue
		}
		i := slices.IndexFunc(out, func(g unavailableGroup) bool { return g.reason == s.reason })
		if i < 0 {
			out = append(out, unavailableGroup{reason: s.reason})
			i = len(out) - 1
		}
		out[i].titles = append(out[i].titles, s.words)
	}
	return out
}

// sectionState is a section's title (stable: the API lists it), its
// name in words for a person, and its reason when it is unavailable.
type sectionState struct{ title, words, reason string }

// sections names every section, with its reason when it is unavailable.
func (r Report) sections() []sectionState {
	return []sectionState{
		{"pending", "waiting todos", r.Pending.Unavailable},
		{"claimed", "todos being worked on", r.Claimed.Unavailable},
		{"stalled leases", "stalled todos", r.StalledLeases.Unavailable},
		{"dead letters", "dead letters", r.DeadLetters.Unavailable},
		{"quarantined deliveries", "quarantined deliveries", r.Quarantined.Unavailable},
		{"unheard doorbells", "unanswered agent wake-ups", r.UnheardDoorbells.Unavailable},
		{"endpoints clocked out", "endpoints clocked out", r.ClockedOut.Unavailable},
		{"deferred by admission budgets", "work deferred by queue budgets", r.AdmissionDeferred.Unavailable},
		{"could not deliver", "undelivered notifications", r.Undeliverable.Unavailable},
	}
}

// Text is Lines joined by newlines.
func (r Report) Text(f Format, baseURL string, l Links) string {
	return strings.Join(r.Lines(f, baseURL, l), "\n")
}

// Links are where a report's lines point, the embedder's to say
// (engine.Config.Links): each a path under the base URL or an absolute
// http(s) URL, "" for none.
type Links struct {
	// Todo links a dead letter's todo. Nil: no link.
	Todo func(id int64) string
	// Digest links the digest's own page, from the last line of the
	// Markdown text, in the words DigestText (default
	// sinks.DefaultLinkText). "": no such line.
	Digest     string
	DigestText string
}

func (l Links) todo(id int64) string {
	if l.Todo == nil {
		return ""
	}
	return l.Todo(id)
}

var markdownSpecial = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "(", `\(`, ")", `\)`,
	"#", `\#`, "<", `\<`, ">", `\>`, "!", `\!`, "|", `\|`, "~", `\~`,
)

func escapeMarkdown(s string) string { return markdownSpecial.Replace(s) }

// SortNamed orders named counts by name, for stable output.
func SortNamed(v []NamedCount) []NamedCount {
	slices.SortFunc(v, func(a, b NamedCount) int { return strings.Compare(a.Name, b.Name) })
	return v
}

// QueueIDs lists the ids of queues, in order.
func QueueIDs(qs []Queue) []int64 {
	ids := make([]int64, len(qs))
	for i, q := range qs {
		ids[i] = q.ID
	}
	return ids
}
