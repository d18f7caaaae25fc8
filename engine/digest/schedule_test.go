package digest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine/digest"
	"github.com/switchboard/notify/notifytype"
)

func mustParse(t *testing.T, s string) digest.Schedule {
	t.Helper()
	sch, err := digest.Parse(s)
	require.NoError(t, err, s)
	return sch
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func requireSame(t *testing.T, want, got time.Time, msg ...any) {
	t.Helper()
	require.True(t, want.Equal(got), "want %v, got %v %v", want, got.UTC(), msg)
}

func TestParseRefusesWithInvalidArgumentNamingSchedule(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"Mon-Fri 25:00", "", "09:00", "Mon-Fri", "Mon-Fri 9:00", "Mon-Fri 09:60", "Funday 09:00",
		"Mon-Fun 09:00", "TZ=Mars/Olympus Mon 09:00", "TZ= Mon 09:00", "TZ=Local Mon 09:00",
		"Mon-Fri 09:00 17:00", "Mon-Fri 09:00,", "Mon,,Tue 09:00", "Mon-Fri -1:00", "Mon-Fri +9:00",
		"TZ=America/Los_Angeles", "Mon 24:00",
	} {
		_, err := digest.Parse(bad)
		require.Error(t, err, bad)
		var ce *notifytype.Error
		require.True(t, errors.As(err, &ce), bad)
		require.Equal(t, notifytype.CodeInvalidArgument, ce.Code, bad)
		require.Equal(t, "schedule", ce.Field, bad)
	}
}

func TestParseAcceptsTheGrammar(t *testing.T) {
	t.Parallel()
	for in, canon := range map[string]string{
		"TZ=America/Los_Angeles Mon-Fri 09:00,17:00": "TZ=America/Los_Angeles Mon-Fri 09:00,17:00",
		"* 08:30":                            "* 08:30",
		"daily 17:00,08:30,08:30":            "daily 08:30,17:00",
		"TZ=UTC Sat,Sun 10:00":               "Sat,Sun 10:00",
		"Fri-Mon 07:05":                      "Fri-Mon 07:05",
		"TZ=Europe/Berlin mon,Wed-fri 23:59": "TZ=Europe/Berlin mon,Wed-fri 23:59",
	} {
		sch := mustParse(t, in)
		require.Equal(t, canon, sch.String(), in)
	}
}

func TestNextFollowsDaysAndTimes(t *testing.T) {
	t.Parallel()
	sch := mustParse(t, "Fri-Mon 07:00,19:00")
	// Thursday 2026-12-03 12:00 UTC: next is Friday 07:00.
	requireSame(t, utc("2026-12-04T07:00:00Z"), sch.Next(utc("2026-12-03T12:00:00Z")))
	requireSame(t, utc("2026-12-04T19:00:00Z"), sch.Next(utc("2026-12-04T07:00:00Z")), "strictly after")
	// Monday 19:00 is followed by Friday 07:00 (wrapping range).
	requireSame(t, utc("2026-12-11T07:00:00Z"), sch.Next(utc("2026-12-07T19:00:00Z")))
	requireSame(t, utc("2026-12-07T19:00:00Z"), sch.Prev(utc("2026-12-10T23:00:00Z")))
	requireSame(t, utc("2026-12-07T19:00:00Z"), sch.Prev(utc("2026-12-07T19:00:00Z")), "at or before")
}

func TestNextAcrossDSTInLosAngeles(t *testing.T) {
	t.Parallel()
	// 2026-03-08: 02:00 PST jumps to 03:00 PDT; 02:30 does not exist and
	// fires at the first instant after the gap, 03:00 PDT (10:00 UTC).
	gap := mustParse(t, "TZ=America/Los_Angeles * 02:30")
	first := gap.Next(utc("2026-03-08T08:00:00Z")) // 00:00 PST
	requireSame(t, utc("2026-03-08T10:00:00Z"), first)
	require.Equal(t, "03:00 PDT", first.In(gap.Location()).Format("15:04 MST"))
	requireSame(t, utc("2026-03-09T09:30:00Z"), gap.Next(first), "the next day at 02:30 PDT")
	requireSame(t, first, gap.Prev(utc("2026-03-08T12:00:00Z")))

	// 2026-11-01: 02:00 PDT falls back to 01:00 PST; 01:30 happens twice
	// and fires once, at its first occurrence (01:30 PDT, 08:30 UTC).
	twice := mustParse(t, "TZ=America/Los_Angeles * 01:30")
	first = twice.Next(utc("2026-11-01T07:00:00Z")) // 00:00 PDT
	requireSame(t, utc("2026-11-01T08:30:00Z"), first)
	requireSame(t, utc("2026-11-02T09:30:00Z"), twice.Next(first), "not again at 01:30 PST")
	requireSame(t, first, twice.Prev(utc("2026-11-01T09:45:00Z")), "the second 01:30 is no send time")

	// A working-day schedule keeps its local hour across the change.
	weekdays := mustParse(t, "TZ=America/Los_Angeles Mon-Fri 09:00")
	fri := weekdays.Next(utc("2026-03-06T12:00:00Z"))
	requireSame(t, utc("2026-03-06T17:00:00Z"), fri)                // 09:00 PST
	requireSame(t, utc("2026-03-09T16:00:00Z"), weekdays.Next(fri)) // Monday 09:00 PDT
}

func TestNextAcrossDSTInBerlin(t *testing.T) {
	t.Parallel()
	// 2026-03-29: 02:00 CET jumps to 03:00 CEST.
	gap := mustParse(t, "TZ=Europe/Berlin * 02:30")
	first := gap.Next(utc("2026-03-28T23:00:00Z")) // 00:00 CET
	requireSame(t, utc("2026-03-29T01:00:00Z"), first)
	require.Equal(t, "03:00 CEST", first.In(gap.Location()).Format("15:04 MST"))
	requireSame(t, utc("2026-03-30T00:30:00Z"), gap.Next(first))

	// 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 fires once.
	twice := mustParse(t, "TZ=Europe/Berlin * 02:30")
	first = twice.Next(utc("2026-10-24T22:00:00Z")) // 00:00 CEST
	requireSame(t, utc("2026-10-25T00:30:00Z"), first)
	requireSame(t, utc("2026-10-26T01:30:00Z"), twice.Next(first))

	// Two times inside one gap fire once, together, at its end.
	both := mustParse(t, "TZ=Europe/Berlin * 02:15,02:45")
	first = both.Next(utc("2026-03-28T23:00:00Z"))
	requireSame(t, utc("2026-03-29T01:00:00Z"), first)
	requireSame(t, utc("2026-03-30T00:15:00Z"), both.Next(first))
}
