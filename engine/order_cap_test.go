package engine_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host/hosttest"
)

// The rows of a coalesced message each keep their own outcome: a failed
// message ends an old row at its seventh attempt as undeliverable, alone,
// and a newer row in the same message is held for its own second attempt
// on its own schedule (on e6a7fa7 every row took the first row's count
// and schedule: the newer row ended undeliverable after one attempt, or
// the old one was held for an eighth).
func TestCoalescedMessageRowsKeepTheirOwnOutcome(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	g.setStatus(http.StatusInternalServerError)
	_, p, scope := w.Human()
	eng := w.Engine()
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.per-row"})
	w.Emit(eng, deadLetterOf(scope, 1))
	w.Emit(eng, deadLetterOf(scope, 2))
	now := w.Clock.Now()
	var old, fresh int64
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT min(id), max(id) FROM switchboard.outbox WHERE sink_id = $1`, sink).Scan(&old, &fresh))
	// Both wait, held, for a token: the old one for its seventh attempt.
	_, err := w.Pool.Exec(w.Ctx, `
		UPDATE switchboard.outbox SET state = 'held', due_at = $2,
		       attempts = CASE WHEN id = $3 THEN 6 ELSE 0 END,
		       first_attempt_at = CASE WHEN id = $3 THEN $2::timestamptz - $4::interval END
		WHERE sink_id = $1`, sink, now, old, engine.RetryDelay(engine.MaxAttempts))
	require.NoError(t, err)

	w.Serve()
	reports := map[string][]int64{}
	for _, a := range w.WaitN(2) { // one report per outcome of the one send
		require.Equal(t, "coalesced", string(a.EventType))
		reports[a.State] = a.Rows
	}
	require.Equal(t, map[string][]int64{"undeliverable": {old}, "held": {fresh}}, reports)
	require.Len(t, g.received(), 1, "one coalesced message")

	type row struct {
		state    string
		attempts int
		due      time.Time
		first    *time.Time
	}
	read := func(id int64) row {
		var r row
		require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT state, attempts, due_at, first_attempt_at FROM switchboard.outbox WHERE id = $1`, id).
			Scan(&r.state, &r.attempts, &r.due, &r.first))
		return r
	}
	o, f := read(old), read(fresh)
	require.Equal(t, "undeliverable", o.state, "the old row had its last attempt")
	require.Equal(t, engine.MaxAttempts, o.attempts)
	require.Equal(t, "held", f.state, "the newer row waits for its own retry")
	require.Equal(t, 1, f.attempts)
	require.NotNil(t, f.first)
	require.Equal(t, f.first.Add(engine.RetryDelay(2)), f.due, "on its own schedule")
	statuses, _ := recordsOf(t, w, sink)
	require.Equal(t, []string{"failed/server"}, statuses, "one record for the one message")
}
