package digest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // the zone database is embedded (REQ-12, D19)

	"github.com/switchboard/notify/notifytype"
)

// MaxSendTimes bounds how many HH:MM times one schedule may list.
const MaxSendTimes = 48

// Schedule is a parsed digest schedule (D19):
//
//	[TZ=<IANA zone>] <days> <HH:MM>[,<HH:MM>…]
//
// where days is `*`, `daily`, a day name Mon…Sun, a range Mon-Fri (wrapping
// allowed, Fri-Mon), or a comma list of these. The zone defaults to UTC.
type Schedule struct {
	loc   *time.Location
	days  [7]bool // by time.Weekday
	times []int   // minutes after local midnight, ascending, no repeats
	text  string  // canonical form
}

var dayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// Parse parses a schedule. A schedule it refuses is invalid_argument naming
// the field "schedule", with a message saying what is wrong.
func Parse(s string) (Schedule, error) {
	sch, err := parse(s)
	if err != nil {
		return Schedule{}, notifytype.InvalidArgument("schedule", err.Error()+` (expected "[TZ=<zone>] <days> <HH:MM>[,<HH:MM>…]", e.g. "TZ=America/Los_Angeles Mon-Fri 09:00,17:00")`)
	}
	return sch, nil
}

func parse(s string) (Schedule, error) {
	fields := strings.Fields(s)
	sch := Schedule{loc: time.UTC}
	zone := "UTC"
	if len(fields) > 0 && strings.HasPrefix(fields[0], "TZ=") {
		zone = strings.TrimPrefix(fields[0], "TZ=")
		loc, err := time.LoadLocation(zone)
		if err != nil || zone == "" || strings.EqualFold(zone, "local") {
			return sch, fmt.Errorf("unknown time zone %q", zone)
		}
		sch.loc = loc
		fields = fields[1:]
	}
	if len(fields) != 2 {
		return sch, fmt.Errorf("a schedule is days then send times, separated by one space")
	}
	days, err := parseDays(fields[0])
	if err != nil {
		return sch, err
	}
	sch.days = days
	for _, t := range strings.Split(fields[1], ",") {
		m, err := parseClock(t)
		if err != nil {
			return sch, err
		}
		if !slices.Contains(sch.times, m) {
			sch.times = append(sch.times, m)
		}
	}
	if len(sch.times) > MaxSendTimes {
		return sch, fmt.Errorf("at most %d send times", MaxSendTimes)
	}
	slices.Sort(sch.times)
	sch.text = sch.canonical(zone, fields[0])
	return sch, nil
}

func parseDays(s string) (days [7]bool, err error) {
	for _, part := range strings.Split(s, ",") {
		switch lower := strings.ToLower(part); {
		case lower == "*" || lower == "daily":
			for i := range days {
				days[i] = true
			}
		case strings.Contains(lower, "-"):
			from, to, _ := strings.Cut(lower, "-")
			a, b := slices.Index(dayNames, from), slices.Index(dayNames, to)
			if a < 0 || b < 0 {
				return days, fmt.Errorf("%q is not a day range like Mon-Fri", part)
			}
			for d := a; ; d = (d + 1) % 7 {
				days[d] = true
				if d == b {
					break
				}
			}
		default:
			d := slices.Index(dayNames, lower)
			if d < 0 {
				return days, fmt.Errorf("%q is not a day (*, daily, Mon…Sun, a range Mon-Fri, or a comma list)", part)
			}
			days[d] = true
		}
	}
	return days, nil
}

// parseClock reads HH:MM, 00:00 to 23:59, two digits each.
func parseClock(s string) (int, error) {
	hh, mm, ok := strings.Cut(s, ":")
	if !ok || len(hh) != 2 || len(mm) != 2 {
		return 0, fmt.Errorf("%q is not a time HH:MM", s)
	}
	h, err1 := strconv.Atoi(hh)
	m, err2 := strconv.Atoi(mm)
	if err1 != nil || err2 != nil || hh[0] == '+' || hh[0] == '-' || mm[0] == '+' || mm[0] == '-' {
		return 0, fmt.Errorf("%q is not a time HH:MM", s)
	}
	if h > 23 || m > 59 {
		return 0, fmt.Errorf("%q is not a time of day (00:00 to 23:59)", s)
	}
	return h*60 + m, nil
}

func (s Schedule) canonical(zone, days string) string {
	var b strings.Builder
	if zone != "UTC" {
		b.WriteString("TZ=" + zone + " ")
	}
	b.WriteString(days)
	b.WriteByte(' ')
	for i, m := range s.times {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%02d:%02d", m/60, m%60)
	}
	return b.String()
}

// String is the schedule as given, with its times sorted and without
// repeats.
func (s Schedule) String() string { return s.text }

// Location is the schedule's time zone.
func (s Schedule) Location() *time.Location { return s.loc }

// Next is the first send instant strictly after t.
//
// A send time that does not exist on a day (the clocks spring forward over
// it) fires at the first instant after the gap; a send time that occurs
// twice (the clocks fall back) fires once, at its first occurrence (D19).
func (s Schedule) Next(t time.Time) time.Time {
	local := t.In(s.loc)
	y, m, d := local.Date()
	var best time.Time
	for off := -1; off <= 8; off++ {
		day := time.Date(y, m, d+off, 12, 0, 0, 0, time.UTC)
		if !s.days[day.Weekday()] {
			continue
		}
		for _, min := range s.times {
			inst := resolve(day.Year(), day.Month(), day.Day(), min, s.loc)
			if inst.After(t) && (best.IsZero() || inst.Before(best)) {
				best = inst
			}
		}
		if !best.IsZero() && off >= 1 {
			break
		}
	}
	return best
}

// Prev is the last send instant at or before t, under the same rules as
// Next.
func (s Schedule) Prev(t time.Time) time.Time {
	local := t.In(s.loc)
	y, m, d := local.Date()
	var best time.Time
	for off := 1; off >= -8; off-- {
		day := time.Date(y, m, d+off, 12, 0, 0, 0, time.UTC)
		if !s.days[day.Weekday()] {
			continue
		}
		for _, min := range s.times {
			inst := resolve(day.Year(), day.Month(), day.Day(), min, s.loc)
			if !inst.After(t) && inst.After(best) {
				best = inst
			}
		}
		if !best.IsZero() && off <= -1 {
			break
		}
	}
	return best
}

// resolve is the instant the local wall clock of loc reads the date at min
// minutes after midnight: the earlier one when it reads it twice, the end
// of the gap when it never does.
func resolve(y int, mo time.Month, d, min int, loc *time.Location) time.Time {
	wall := time.Date(y, mo, d, min/60, min%60, 0, 0, time.UTC)
	var best time.Time
	for _, probe := range []time.Duration{-26 * time.Hour, 0, 26 * time.Hour} {
		_, offset := wall.Add(probe).In(loc).Zone()
		u := wall.Add(-time.Duration(offset) * time.Second)
		if sameWall(u.In(loc), wall) && (best.IsZero() || u.Before(best)) {
			best = u
		}
	}
	if !best.IsZero() {
		return best
	}
	// A gap: read the wall time with the offset from before the change; at
	// that instant the new offset is already in force, and its zone began at
	// the end of the gap.
	_, before := wall.Add(-26 * time.Hour).In(loc).Zone()
	u := wall.Add(-time.Duration(before) * time.Second)
	start, _ := u.In(loc).ZoneBounds()
	if start.IsZero() || start.After(u) {
		return u
	}
	return start
}

func sameWall(local, wall time.Time) bool {
	y1, m1, d1 := local.Date()
	y2, m2, d2 := wall.Date()
	return y1 == y2 && m1 == m2 && d1 == d2 && local.Hour() == wall.Hour() && local.Minute() == wall.Minute()
}
