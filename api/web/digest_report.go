package web

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digest"
	"github.com/switchboard/notify/engine/digests"
)

// reportView is a digest's preview as the page shows it: a readable
// report, a heading per queue and every figure in words, rather than the
// text a sink receives (which the page keeps behind a disclosure).
type reportView struct {
	Period   string
	Headline string
	Queues   []queueReport
	Sections []sectionReport
}

// queueReport is one queue's figures in words and its recent dead letters.
type queueReport struct {
	Name        string
	Lines       []string
	DeadLetters []digest.TodoRef
}

// sectionReport is one of the scope-wide sections: its title and lines.
type sectionReport struct {
	Title string
	Lines []string
}

// count says n of a noun in words: "no dead letters", "1 dead letter",
// "3 dead letters".
func count(n int, one, many string) string {
	switch n {
	case 0:
		return "no " + many
	case 1:
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// ageWords is an age for a person: "2 hours 5 minutes", "40 seconds".
func ageWords(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	var parts []string
	if h > 0 {
		parts = append(parts, count(h, "hour", "hours"))
	}
	if m > 0 {
		parts = append(parts, count(m, "minute", "minutes"))
	}
	if h == 0 && m == 0 {
		parts = append(parts, count(s, "second", "seconds"))
	}
	out := parts[0]
	for _, p := range parts[1:] {
		out += " " + p
	}
	return out
}

// reportOf turns a built digest into its readable report, shown in loc
// (the schedule's zone).
func reportOf(r digest.Report, loc *time.Location) reportView {
	v := reportView{Headline: r.Lead()}
	if r.First {
		v.Period = "Over the last 24 hours (this digest has not been sent yet)."
	} else {
		v.Period = "Since the previous digest, " + r.Since.In(loc).Format("Mon 2 Jan 15:04 MST") + "."
	}
	unavailable := func(reason string) string { return "Unavailable: " + reason + "." }
	for _, q := range r.Queues {
		qr := queueReport{Name: q.Name}
		switch {
		case !r.Pending.Available():
			qr.Lines = append(qr.Lines, "Pending: "+unavailable(r.Pending.Unavailable))
		default:
			p := r.Pending.Data[q.ID]
			line := count(p.Count, "todo waits", "todos wait") + " to be claimed"
			if p.Count > 0 {
				line += "; the oldest for " + ageWords(p.OldestAge)
			}
			qr.Lines = append(qr.Lines, sentence(line))
		}
		if r.Claimed.Available() {
			qr.Lines = append(qr.Lines, sentence(count(r.Claimed.Data[q.ID], "todo is", "todos are")+" being worked on"))
		} else {
			qr.Lines = append(qr.Lines, "Being worked on: "+unavailable(r.Claimed.Unavailable))
		}
		if r.StalledLeases.Available() {
			qr.Lines = append(qr.Lines, sentence(count(r.StalledLeases.Data[q.ID], "stalled lease", "stalled leases")+
				" (claimed, but its worker has gone quiet)"))
		} else {
			qr.Lines = append(qr.Lines, "Stalled leases: "+unavailable(r.StalledLeases.Unavailable))
		}
		if r.DeadLetters.Available() {
			d := r.DeadLetters.Data[q.ID]
			qr.Lines = append(qr.Lines, sentence(count(d.Count, "dead letter", "dead letters")+" since then"))
			for _, t := range d.Recent {
				qr.DeadLetters = append(qr.DeadLetters, digest.TodoRef{ID: t.ID, Title: engine.CleanTitle(t.Title)})
			}
		} else {
			qr.Lines = append(qr.Lines, "Dead letters: "+unavailable(r.DeadLetters.Unavailable))
		}
		if r.AdmissionDeferred.Available() {
			qr.Lines = append(qr.Lines, sentence(count(r.AdmissionDeferred.Data[q.ID], "todo", "todos")+" deferred by the queue's budget"))
		} else {
			qr.Lines = append(qr.Lines, "Deferred by the queue's budget: "+unavailable(r.AdmissionDeferred.Unavailable))
		}
		v.Queues = append(v.Queues, qr)
	}
	named := func(title string, s digest.Section[[]digest.NamedCount], one, many, none string) {
		sec := sectionReport{Title: title}
		switch {
		case !s.Available():
			sec.Lines = []string{unavailable(s.Unavailable)}
		case len(s.Data) == 0:
			sec.Lines = []string{none}
		}
		for _, n := range s.Data {
			sec.Lines = append(sec.Lines, n.Name+": "+count(n.Count, one, many)+".")
		}
		v.Sections = append(v.Sections, sec)
	}
	named("Quarantined deliveries", r.Quarantined, "delivery", "deliveries", "None: every delivery came from a trusted sender.")
	named("Agents that did not answer a wake-up", r.UnheardDoorbells, "unanswered wake-up", "unanswered wake-ups", "None.")
	clocked := sectionReport{Title: "Endpoints clocked out"}
	switch {
	case !r.ClockedOut.Available():
		clocked.Lines = []string{unavailable(r.ClockedOut.Unavailable)}
	case len(r.ClockedOut.Data) == 0:
		clocked.Lines = []string{"None."}
	default:
		clocked.Lines = slices.Clone(r.ClockedOut.Data)
	}
	v.Sections = append(v.Sections, clocked)
	undeliverable := sectionReport{Title: "Could not deliver"}
	if r.Undeliverable.Available() {
		undeliverable.Lines = []string{sentence(count(r.Undeliverable.Data, "notification was", "notifications were") + " recorded undeliverable")}
	} else {
		undeliverable.Lines = []string{unavailable(r.Undeliverable.Unavailable)}
	}
	v.Sections = append(v.Sections, undeliverable)
	return v
}

// schedulePlace is where a digest's schedule reads its times: its zone,
// UTC when the schedule does not parse (it was checked on save).
func schedulePlace(d digests.Digest) *time.Location {
	if s, err := digest.Parse(d.Schedule); err == nil && s.Location() != nil {
		return s.Location()
	}
	return time.UTC
}

// inZone is t in loc for a person, with the zone's name: "Mon 7 Dec
// 09:00 PST (America/Los_Angeles)".
func inZone(t time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	if t.IsZero() {
		return "never"
	}
	s := t.In(loc).Format("Mon 2 Jan 2006 15:04 MST")
	if loc != time.UTC && loc.String() != "UTC" {
		s += " (" + loc.String() + ")"
	}
	return s
}

// digestFacts are what the digests list and a digest's page both say of
// a digest, in words, from one function so that they never disagree
// (issue 25 item 3): when it sends next and when it last sent, in the
// schedule's zone, and where it goes, by name.
type digestFacts struct {
	Loc                             *time.Location
	NextSend, LastSent, LastSentHow string
	Targets                         string
}

// factsOf says a digest's facts; runs are its latest runs, newest first,
// ch the scope's sinks and connections (for their names).
func factsOf(d digests.Digest, runs []digests.Run, ch digestChoices) digestFacts {
	f := digestFacts{Loc: schedulePlace(d)}
	f.NextSend = inZone(d.NextSendAt, f.Loc)
	if run, ok := lastSent(runs); ok {
		f.LastSent = inZone(run.RanAt, f.Loc)
		f.LastSentHow = map[string]string{"manual": "sent by hand (Send now)", "scheduled": "on schedule"}[run.Kind]
	} else if d.LastSentAt != nil {
		f.LastSent = inZone(*d.LastSentAt, f.Loc)
	} else {
		f.LastSent = "never"
	}
	var names []string
	for _, id := range d.SinkIDs {
		name := "a deleted sink"
		if i := slices.IndexFunc(ch.Sinks, func(s engine.Sink) bool { return s.ID == id }); i >= 0 {
			name = ch.Sinks[i].Name
		}
		names = append(names, name)
	}
	if d.CairnConnectionID > 0 {
		name := "Cairn"
		if i := slices.IndexFunc(ch.Connections, func(c engine.Connection) bool { return c.ID == d.CairnConnectionID }); i >= 0 {
			name = "Cairn (" + ch.Connections[i].Name + ")"
		}
		names = append(names, "published to "+name)
	}
	f.Targets = strings.Join(names, ", ")
	if f.Targets == "" {
		f.Targets = "nowhere yet"
	}
	return f
}

// lastSent is the newest run that sent the digest, by schedule or by
// hand (runs newest first): digests.last_sent_at is the scheduler's claim
// on its slots, which a manual send does not spend, so it is not what a
// person means by "last sent".
func lastSent(runs []digests.Run) (digests.Run, bool) {
	for _, run := range runs {
		if run.Outcome == "sent" {
			return run, true
		}
	}
	return digests.Run{}, false
}
