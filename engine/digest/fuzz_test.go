package digest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/switchboard/notify/engine/digest"
	"github.com/switchboard/notify/notifytype"
)

// FuzzParse checks that whatever the input, Parse either refuses it with
// invalid_argument naming schedule, or returns a schedule whose canonical
// form parses to itself and whose next send is after the given instant,
// within a week and a day, and is its own Prev. The seed corpus is in
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add("TZ=America/Los_Angeles Mon-Fri 09:00,17:00", int64(0))
	f.Add("Mon-Fri 25:00", int64(1))
	f.Add("TZ=Europe/Berlin * 02:30", int64(1774746000))
	f.Fuzz(func(t *testing.T, s string, unix int64) {
		sch, err := digest.Parse(s)
		if err != nil {
			var ce *notifytype.Error
			if !errors.As(err, &ce) || ce.Code != notifytype.CodeInvalidArgument || ce.Field != "schedule" {
				t.Fatalf("Parse(%q) refused without invalid_argument on schedule: %v", s, err)
			}
			return
		}
		again, err := digest.Parse(sch.String())
		if err != nil || again.String() != sch.String() {
			t.Fatalf("canonical form %q of %q does not parse to itself: %v", sch.String(), s, err)
		}
		// Instants from 1970 to about 2100.
		at := time.Unix(unix%4_100_000_000, 0)
		if at.Before(time.Unix(0, 0)) {
			at = time.Unix(-unix%4_100_000_000, 0)
		}
		next := sch.Next(at)
		if !next.After(at) || next.Sub(at) > 8*24*time.Hour+2*time.Hour {
			t.Fatalf("%q: Next(%v) = %v", s, at, next)
		}
		if prev := sch.Prev(next); !prev.Equal(next) {
			t.Fatalf("%q: Prev(Next(%v)) = %v, want %v", s, at, prev, next)
		}
		if prev := sch.Prev(at); !prev.IsZero() && (prev.After(at) || !sch.Next(prev).After(prev)) {
			t.Fatalf("%q: Prev(%v) = %v", s, at, prev)
		}
	})
}
