package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// A statement on held rows finds each row by the tid it has in the
// statement's snapshot. A row another transaction changes meanwhile is
// followed to its latest version, and the claim is checked on that
// version: a change that leaves the row with this instance is kept and the
// outcome applied on top of it; a row another instance took is left alone.
func TestHeldRowStatementsFollowARowChangedMeanwhile(t *testing.T) {
	t.Parallel()
	pool := storetest.New(t)
	ctx := context.Background()
	f := storetest.NewFactory(t, pool)
	sink := f.Sink(storetest.SinkOpts{Owner: notifytype.Human(1)})

	writers := map[string]func(id int64) error{
		"FinishRows": func(id int64) error {
			return store.FinishRows(ctx, pool, []int64{id}, "instance-a", store.RowOutcome{State: "delivered"}, time.Now())
		},
		"RecordFinished": func(id int64) error {
			return store.RecordFinished(ctx, pool, []store.Finished{{Rows: []int64{id}, Status: "delivered",
				Outcome: store.RowOutcome{State: "delivered"}, At: time.Now()}}, "instance-a")
		},
	}
	for writer, write := range writers {
		for _, tc := range []struct {
			name, change string
			// want is the row's state and holder once both have committed.
			wantState, wantBy string
		}{
			{"kept", `UPDATE outbox SET claim_expires_at = claim_expires_at + interval '1 minute' WHERE id = $1`, "delivered", ""},
			{"taken", `UPDATE outbox SET claimed_by = 'instance-b' WHERE id = $1`, "claimed", "instance-b"},
		} {
			t.Run(writer+"/"+tc.name, func(t *testing.T) {
				var id int64
				require.NoError(t, pool.QueryRow(ctx, `
				INSERT INTO outbox (sink_id, owner, event_type, severity, payload, due_at, state, claimed_by, claim_expires_at)
				VALUES ($1, 'human:1', 'dead_letter', 'normal', '{"title": "t"}', now(), 'claimed', 'instance-a', now() + interval '1 minute')
				RETURNING id`, sink).Scan(&id))

				other, err := pool.Begin(ctx)
				require.NoError(t, err)
				defer func() { _ = other.Rollback(ctx) }()
				_, err = other.Exec(ctx, tc.change, id)
				require.NoError(t, err)

				done := make(chan error, 1)
				go func() {
					done <- write(id)
				}()
				// The statement has read the row's tid and waits for the other
				// transaction's lock on it.
				require.Eventually(t, func() bool {
					var waiting bool
					err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%WITH u AS MATERIALIZED%')`).Scan(&waiting)
					return err == nil && waiting
				}, 10*time.Second, 5*time.Millisecond)
				require.NoError(t, other.Commit(ctx))
				require.NoError(t, <-done)

				var state string
				var by *string
				require.NoError(t, pool.QueryRow(ctx, `SELECT state, claimed_by FROM outbox WHERE id = $1`, id).Scan(&state, &by))
				require.Equal(t, tc.wantState, state)
				if tc.wantBy == "" {
					require.Nil(t, by)
				} else {
					require.NotNil(t, by)
					require.Equal(t, tc.wantBy, *by)
				}
			})
		}
	}
}
