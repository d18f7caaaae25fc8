package digest

import (
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
	for _, s := range []struct {
		title string
		ok    bool
	}{
		{"pending", r.Pending.Available()}, {"claimed", r.Claimed.Available()},
		{"stalled leases", r.StalledLeases.Available()}, {"dead letters", r.DeadLetters.Available()},
		{"quarantined deliveries", r.Quarantined.Available()}, {"unheard doorbells", r.UnheardDoorbells.Available()},
		{"endpoints clocked out", r.ClockedOut.Available()}, {"deferred by admission budgets", r.AdmissionDeferred.Available()},
		{"could not deliver", r.Undeliverable.Available()},
	} {
		if !s.ok {
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

// Lines renders the report, one line each, in the given format: (Markdown
// only: a heading), the period and headline, one block per queue, the
// scope-wide sections, (Markdown only: the board link). Board links are
// baseURL + /board/todos/<id> and /board/digests/<id> (D13).
// Only counts, ages, names, truncated titles and board links appear
// (REQ-13).
func (r Report) Lines(f Format, baseURL string) []string {
	text := func(s string, limit int) string {
		s = sinks.Clean(s, limit)
		if f == Markdown {
			s = escapeMarkdown(s)
		}
		return s
	}
	link := func(path string) string { return strings.TrimRight(baseURL, "/") + path }
	h2 := func(s string) string {
		if f == Markdown {
			return "## " + s
		}
		return s + ":"
	}

	period := "since the previous digest at " + r.Since.UTC().Format("2006-01-02 15:04 UTC")
	if r.First {
		period = "over the last 24 hours"
	}
	// A sink's message names the digest in its title and links the board
	// itself; the Markdown document carries both.
	var lines []string
	if f == Markdown {
		lines = append(lines, "# Digest "+text(r.Name, 64))
	}
	lines = append(lines, "For "+strconv.Itoa(len(r.Queues))+" queues, "+period+".", r.HeadlineText()+".")
	if r.QueuesUnavailable != "" {
		lines = append(lines, "", h2("Queues"), "- unavailable: "+text(r.QueuesUnavailable, 200))
	}

	for _, q := range r.Queues {
		lines = append(lines, "", h2("Queue "+text(q.Name, 64)))
		lines = append(lines, "- Pending: "+queueFig(r.Pending, q.ID, func(p Pending) string {
			if p.Count == 0 {
				return "0"
			}
			return strconv.Itoa(p.Count) + ", oldest " + Age(p.OldestAge)
		}))
		lines = append(lines, "- Claimed: "+queueFig(r.Claimed, q.ID, strconv.Itoa))
		lines = append(lines, "- Stalled leases: "+queueFig(r.StalledLeases, q.ID, strconv.Itoa))
		lines = append(lines, "- Dead letters: "+queueFig(r.DeadLetters, q.ID, func(d DeadLetters) string { return strconv.Itoa(d.Count) }))
		if r.DeadLetters.Available() {
			for _, t := range r.DeadLetters.Data[q.ID].Recent[:min(len(r.DeadLetters.Data[q.ID].Recent), MaxDeadLetterTitles)] {
				lines = append(lines, "  - Todo "+strconv.FormatInt(t.ID, 10)+" "+link("/board/todos/"+strconv.FormatInt(t.ID, 10))+" Title: "+text(t.Title, sinks.TitleMaxRunes))
			}
		}
		lines = append(lines, "- Deferred by admission budget: "+queueFig(r.AdmissionDeferred, q.ID, strconv.Itoa))
	}

	named := func(title string, s Section[[]NamedCount], none string) {
		lines = append(lines, "", h2(title))
		switch {
		case !s.Available():
			lines = append(lines, "- unavailable: "+text(s.Unavailable, 200))
		case len(s.Data) == 0:
			lines = append(lines, "- "+none)
		default:
			for _, n := range s.Data {
				lines = append(lines, "- "+text(n.Name, 64)+": "+strconv.Itoa(n.Count))
			}
		}
	}
	named("Quarantined deliveries", r.Quarantined, "none")
	named("Unheard doorbells", r.UnheardDoorbells, "none")
	lines = append(lines, "", h2("Endpoints clocked out"))
	switch {
	case !r.ClockedOut.Available():
		lines = append(lines, "- unavailable: "+text(r.ClockedOut.Unavailable, 200))
	case len(r.ClockedOut.Data) == 0:
		lines = append(lines, "- none")
	default:
		for _, n := range r.ClockedOut.Data {
			lines = append(lines, "- "+text(n, 64))
		}
	}
	lines = append(lines, "", h2("Could not deliver"))
	if !r.Undeliverable.Available() {
		lines = append(lines, "- unavailable: "+text(r.Undeliverable.Unavailable, 200))
	} else {
		lines = append(lines, "- Notifications recorded undeliverable: "+strconv.Itoa(r.Undeliverable.Data))
	}
	if r.DigestID > 0 && f == Markdown {
		lines = append(lines, "", "Board: "+link("/board/digests/"+strconv.FormatInt(r.DigestID, 10)))
	}
	return lines
}

// Text is Lines joined by newlines.
func (r Report) Text(f Format, baseURL string) string {
	return strings.Join(r.Lines(f, baseURL), "\n")
}

func queueFig[T any](s Section[map[int64]T], id int64, show func(T) string) string {
	if !s.Available() {
		return "unavailable: " + sinks.Clean(s.Unavailable, 200)
	}
	return show(s.Data[id])
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
