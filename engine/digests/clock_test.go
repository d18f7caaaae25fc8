package digests_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/engine/enginetest"
)

// A digest's outbox rows are due at the database's now, whatever the
// sending instance's own clock says (issue 18, item 5): an instance a day
// ahead or behind neither delays them by a day nor makes them due early.
func TestDigestRowsDueAtTheDatabasesTime(t *testing.T) {
	t.Parallel()
	for _, by := range []time.Duration{24 * time.Hour, -24 * time.Hour} {
		t.Run(by.String(), func(t *testing.T) {
			t.Parallel()
			d := newDigestWorld(t, enginetest.LocalClockOff(by))
			dg := d.digest(t, digests.Input{Schedule: slotAgo(t, d.w, time.Minute)})
			var before, after, due time.Time
			require.NoError(t, d.w.Pool.QueryRow(d.w.Ctx, `SELECT clock_timestamp()`).Scan(&before))
			run, err := d.dgs.SendNow(d.w.Ctx, d.p, dg.ID)
			require.NoError(t, err)
			require.Equal(t, 1, run.SinksQueued)
			require.NoError(t, d.w.Pool.QueryRow(d.w.Ctx, `SELECT clock_timestamp()`).Scan(&after))
			require.NoError(t, d.w.Pool.QueryRow(d.w.Ctx, `SELECT due_at FROM switchboard.outbox WHERE event_type = 'digest'`).Scan(&due))
			require.False(t, due.Before(before) || due.After(after),
				"digest row due at %v, the database's time was between %v and %v (local clock off by %v)", due, before, after, by)
		})
	}
}
