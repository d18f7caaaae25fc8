package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store/storetest"
)

func TestTodosEnqueue(t *testing.T) {
	t.Parallel()

	t.Run("DefaultsAndQueueOwner", func(t *testing.T) {
		t.Parallel()
		w, ctx := newTodoWorld(t)
		team := hostid.Team(w.f.Team(""))
		queue := w.f.Queue(team, "forge")

		todo := w.enqueue(t, ctx, queue, host.TodoInput{Title: "  triage #12  "})
		require.Equal(t, "triage #12", todo.Title)
		require.Equal(t, team, todo.Owner)
		require.Equal(t, queue, todo.QueueID)
		require.Equal(t, host.TodoPending, todo.State)
		require.Equal(t, host.AttemptCapDefault, todo.AttemptCap)
		require.Equal(t, host.LeaseTTLDefault, todo.LeaseTTL)
		require.JSONEq(t, `{}`, string(todo.Payload))
		require.True(t, w.clock.Now().Equal(todo.CreatedAt))
		require.True(t, w.clock.Now().Equal(todo.UpdatedAt))
	})

	t.Run("KeepsInput", func(t *testing.T) {
		t.Parallel()
		w, ctx := newTodoWorld(t)
		p := w.person(t, "")
		webhook := w.f.Webhook(hostid.Human(w.f.Human("")), "")

		todo := w.enqueue(t, ctx, p.queue, host.TodoInput{
			Title: "t", Payload: json.RawMessage(`{"body":"hello"}`), AttemptCap: 5, LeaseTTL: 1500 * time.Millisecond,
			OriginDisplay: "org/repo#12", OriginPermalink: "https://forge.example.test/org/repo/issues/12",
			WebhookID: webhook,
		})
		require.Equal(t, 5, todo.AttemptCap)
		require.Equal(t, 2*time.Second, todo.LeaseTTL, "rounded up to whole seconds")
		require.JSONEq(t, `{"body":"hello"}`, string(todo.Payload))
		require.Equal(t, "org/repo#12", todo.OriginDisplay)
		require.Equal(t, "https://forge.example.test/org/repo/issues/12", todo.OriginPermalink)
		require.Equal(t, webhook, todo.WebhookID, "a webhook of another scope may route here")
	})

	t.Run("RefusesBadInput", func(t *testing.T) {
		t.Parallel()
		w, ctx := newTodoWorld(t)
		p := w.person(t, "")

		for _, tc := range []struct {
			field string
			in    host.TodoInput
		}{
			{"title", host.TodoInput{Title: " \t"}},
			{"payload", host.TodoInput{Title: "t", Payload: json.RawMessage(`[1]`)}},
			{"payload", host.TodoInput{Title: "t", Payload: json.RawMessage(`null`)}},
			{"payload", host.TodoInput{Title: "t", Payload: json.RawMessage(`{`)}},
			{"attempt_cap", host.TodoInput{Title: "t", AttemptCap: -1}},
			{"lease_ttl", host.TodoInput{Title: "t", LeaseTTL: -time.Second}},
			{"origin_permalink", host.TodoInput{Title: "t", OriginPermalink: "javascript:alert(1)"}},
			{"webhook_id", host.TodoInput{Title: "t", WebhookID: 999999}},
		} {
			_, err := w.todos.Enqueue(ctx, p.queue, tc.in)
			requireCode(t, err, notifytype.CodeInvalidArgument, tc.field)
		}
		require.Zero(t, w.f.Count(`SELECT count(*) FROM todos`))
	})

	t.Run("UnknownQueueIsNotFound", func(t *testing.T) {
		t.Parallel()
		w, ctx := newTodoWorld(t)

		_, err := w.todos.Enqueue(ctx, 999999, host.TodoInput{Title: "t"})
		require.ErrorIs(t, err, notifytype.ErrNotFound)
	})
}

func TestTodosClaim(t *testing.T) {
	t.Parallel()

	t.Run("OldestFirstWithLeaseAndAttempt", func(t *testing.T) {
		t.Parallel()
		w, ctx := newTodoWorld(t)
		p := w.person(t, "")
		first := w.enqueue(t, ctx, p.queue, host.TodoInput{LeaseTTL: time.Minute})
		w.enqueue(t, ctx, p.queue, host.TodoInput{})
		w.clock.Advance(time.Hour)

		got := w.claim(t, ctx, p.endpoint, p.queue)
		require.Equal(t, first.ID, got.ID)
		require.Equal(t, host.TodoClaimed, got.State)
		require.Equal(t, p.endpoint, got.ClaimedBy)
		require.Equal(t, 1, got.Attempts)
		require.True(t, w.clock.Now().Add(time.Minute).Equal(got.LeaseExpiresAt), got.LeaseExpiresAt)
		require.True(t, w.clock.Now().Equal(got.LastHeartbeatAt))

		a := row(t, w.pool, `SELECT number, kind, endpoint_id, outcome, started_at FROM attempts WHERE todo_id = $1`, got.ID)
		require.EqualValues(t, 1, a["number"])
		require.Equal(t, "agent", a["kind"])
		require.Equal(t, p.endpoint, a["endpoint_id"])
		require.Nil(t, a["outcome"])
		require.True(t, w.clock.Now().Equal(a["started_at"].(time.Time)))
	})

	t.Run("RelayAttempt", func(t *testing.T) {
		t.Parallel()
		w, ctx := newTodoWorld(t)
		p := w.person(t, "")
		w.enqueue(t, ctx, p.queue, host.TodoInput{})

		got := w.claim(t, ctx, p.endpoint, p.queue, host.ClaimOpts{Relay: true})
		require.Equal(t, "relay", row(t, w.pool, `SELECT kind FROM attempts WHERE todo_id = $1`, got.ID)["kind"])
	})

	t.Run("EmptyQueue", func(t *testing.T) {
		t.Parallel()
		w, ctx := newTodoWorld(t)
		p := w.person(t, "")

		_, ok, err := w.todos.Claim(ctx, p.endpoint, p.queue)
		require.NoError(t, err)
		require.False(t, ok)
	})

	t.Run("WhoMayClaim", func(t *testing.T) {
		t.Parallel()
		w, ctx := newTodoWorld(t)
		a, b := w.person(t, ""), w.person(t, "")
		teamID := w.f.Team("")
		team := hostid.Team(teamID)
		w.f.Member(teamID, a.human, "member")
		teamQueue := w.f.Queue(team, "team-queue")
		teamEndpoint := w.f.Endpoint(hosttest.EndpointOpts{Owner: team, Human: b.human})
		for range 3 {
			w.enqueue(t, ctx, teamQueue, host.TodoInput{})
		}
		w.enqueue(t, ctx, a.queue, host.TodoInput{})

		// Another human's queue, and a team queue of a team one is not in.
		_, _, err := w.todos.Claim(ctx, b.endpoint, a.queue)
		require.ErrorIs(t, err, notifytype.ErrNotFound)
		_, _, err = w.todos.Claim(ctx, b.endpoint, teamQueue)
		require.ErrorIs(t, err, notifytype.ErrNotFound)
		// A team endpoint may not claim a human's queue.
		_, _, err = w.todos.Claim(ctx, teamEndpoint, a.queue)
		require.ErrorIs(t, err, notifytype.ErrNotFound)
		_, _, err = w.todos.Claim(ctx, 999999, a.queue)
		require.ErrorIs(t, err, notifytype.ErrNotFound)

		// A member's personal endpoint claims from the team's queue; the
		// todo stays the team's.
		got := w.claim(t, ctx, a.endpoint, teamQueue)
		require.Equal(t, team, got.Owner)
		require.Equal(t, a.endpoint, got.ClaimedBy)
		w.claim(t, ctx, teamEndpoint, teamQueue)
		w.claim(t, ctx, a.endpoint, a.queue)
	})

	t.Run("RevokedOrUngrantedEndpointIsForbidden", func(t *testing.T) {
		t.Parallel()
		w, ctx := newTodoWorld(t)
		p := w.person(t, "")
		rulesOnly := w.f.Endpoint(hosttest.EndpointOpts{Human: p.human, Grants: []string{"rules"}})
		w.enqueue(t, ctx, p.queue, host.TodoInput{})

		_, _, err := w.todos.Claim(ctx, rulesOnly, p.queue)
		require.ErrorIs(t, err, notifytype.ErrForbidden)

		require.NoError(t, w.todos.RevokeEndpoint(ctx, p.endpoint))
		_, _, err = w.todos.Claim(ctx, p.endpoint, p.queue)
		require.ErrorIs(t, err, notifytype.ErrForbidden)
		require.Zero(t, w.f.Count(`SELECT count(*) FROM attempts`))
	})

	t.Run("ConcurrentClaimersGetDistinctTodos", func(t *testing.T) {
		t.Parallel()
		w, ctx := newTodoWorld(t)
		p := w.person(t, "")
		const n = 10
		for range n {
			w.enqueue(t, ctx, p.queue, host.TodoInput{})
		}

		var mu sync.Mutex
		claimed := map[int64]int{}
		var wg sync.WaitGroup
		errs := make([]error, 2*n)
		for i := range 2 * n {
			wg.Go(func() {
				todo, ok, err := w.todos.Claim(ctx, p.endpoint, p.queue)
				errs[i] = err
				if ok {
					mu.Lock()
					claimed[todo.ID]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Len(t, claimed, n)
		for id, k := range claimed {
			require.Equal(t, 1, k, "todo %d", id)
		}
		require.Equal(t, n, w.f.Count(`SELECT count(*) FROM attempts`))
	})
}

func TestTodosHeartbeat(t *testing.T) {
	t.Parallel()
	w, ctx := newTodoWorld(t)
	p, other := w.person(t, ""), w.person(t, "")
	todo := w.claim(t, ctx, p.endpoint, w.enqueue(t, ctx, p.queue, host.TodoInput{LeaseTTL: time.Minute}).QueueID)
	w.clock.Advance(50 * time.Second)

	got, err := w.todos.Heartbeat(ctx, p.endpoint, todo.ID)
	require.NoError(t, err)
	require.True(t, w.clock.Now().Add(time.Minute).Equal(got.LeaseExpiresAt))
	require.True(t, w.clock.Now().Equal(got.LastHeartbeatAt))

	// Only the claimant: another endpoint, even of another scope, sees
	// nothing.
	_, err = w.todos.Heartbeat(ctx, other.endpoint, todo.ID)
	require.ErrorIs(t, err, notifytype.ErrNotFound)
	_, err = w.todos.Heartbeat(ctx, p.endpoint, 999999)
	require.ErrorIs(t, err, notifytype.ErrNotFound)

	// A reaped lease is no longer the claimant's.
	w.clock.Advance(2 * time.Minute)
	n, err := w.todos.ReapExpired(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = w.todos.Heartbeat(ctx, p.endpoint, todo.ID)
	require.ErrorIs(t, err, notifytype.ErrNotFound)
}

func TestTodosComplete(t *testing.T) {
	t.Parallel()
	w, ctx := newTodoWorld(t)
	p, other := w.person(t, ""), w.person(t, "")
	w.subscribedSink(p.scope, storetest.SubscriptionOpts{}, host.EventTodoDeadLettered)
	todo := w.claim(t, ctx, p.endpoint, w.enqueue(t, ctx, p.queue, host.TodoInput{}).QueueID)

	_, err := w.todos.Complete(ctx, other.endpoint, todo.ID, host.AttemptReport{})
	require.ErrorIs(t, err, notifytype.ErrNotFound)
	_, err = w.todos.Complete(ctx, p.endpoint, todo.ID, host.AttemptReport{Summary: string(make([]rune, host.AttemptSummaryMaxLen+1))})
	requireCode(t, err, notifytype.CodeInvalidArgument, "summary")

	w.clock.Advance(time.Minute)
	got, err := w.todos.Complete(ctx, p.endpoint, todo.ID, host.AttemptReport{Summary: "merged", ArtifactHandle: "cairn:42"})
	require.NoError(t, err)
	require.Equal(t, host.TodoDone, got.State)
	require.Zero(t, got.ClaimedBy)
	require.True(t, got.LeaseExpiresAt.IsZero())

	a := row(t, w.pool, `SELECT outcome, summary, artifact_handle, finished_at FROM attempts WHERE todo_id = $1`, todo.ID)
	require.Equal(t, "done", a["outcome"])
	require.Equal(t, "merged", a["summary"])
	require.Equal(t, "cairn:42", a["artifact_handle"])
	require.True(t, w.clock.Now().Equal(a["finished_at"].(time.Time)))

	_, err = w.todos.Complete(ctx, p.endpoint, todo.ID, host.AttemptReport{})
	require.ErrorIs(t, err, notifytype.ErrNotFound, "a done todo is no longer claimed")
	require.Empty(t, w.rec.Events())
	require.Empty(t, w.outbox(t))
}

func TestTodosFailBelowTheCapRequeues(t *testing.T) {
	t.Parallel()
	w, ctx := newTodoWorld(t)
	p := w.person(t, "")
	w.subscribedSink(p.scope, storetest.SubscriptionOpts{}, host.EventTodoDeadLettered)
	todo := w.enqueue(t, ctx, p.queue, host.TodoInput{AttemptCap: 3})

	for i := 1; i <= 2; i++ {
		w.claim(t, ctx, p.endpoint, p.queue)
		got, err := w.todos.Fail(ctx, p.endpoint, todo.ID, host.AttemptReport{Summary: fmt.Sprintf("try %d", i)})
		require.NoError(t, err)
		require.Equal(t, host.TodoPending, got.State)
		require.Equal(t, i, got.Attempts)
		require.Zero(t, got.ClaimedBy)
		require.Zero(t, got.DeadLetterCount)
	}
	as := allRows(t, w.pool, `SELECT number, outcome, summary FROM attempts WHERE todo_id = $1 ORDER BY number`, todo.ID)
	require.Len(t, as, 2)
	for i, a := range as {
		require.EqualValues(t, i+1, a["number"])
		require.Equal(t, "failed", a["outcome"])
		require.Equal(t, fmt.Sprintf("try %d", i+1), a["summary"])
	}
	require.Empty(t, w.rec.Events())
	require.Empty(t, w.outbox(t))
}

func TestTodosReapBelowTheCapRequeues(t *testing.T) {
	t.Parallel()
	w, ctx := newTodoWorld(t)
	p := w.person(t, "")
	w.subscribedSink(p.scope, storetest.SubscriptionOpts{}, host.EventTodoDeadLettered)
	short := w.enqueue(t, ctx, p.queue, host.TodoInput{LeaseTTL: time.Minute})
	long := w.enqueue(t, ctx, p.queue, host.TodoInput{LeaseTTL: time.Hour})
	w.claim(t, ctx, p.endpoint, p.queue)
	w.claim(t, ctx, p.endpoint, p.queue)

	w.clock.Advance(59 * time.Second)
	n, err := w.todos.ReapExpired(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "no lease has expired yet")

	w.clock.Advance(time.Second)
	n, err = w.todos.ReapExpired(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	got := row(t, w.pool, `SELECT state, claimed_by, attempts FROM todos WHERE id = $1`, short.ID)
	require.Equal(t, "pending", got["state"])
	require.Nil(t, got["claimed_by"])
	require.EqualValues(t, 1, got["attempts"])
	require.Equal(t, "expired", row(t, w.pool, `SELECT outcome FROM attempts WHERE todo_id = $1`, short.ID)["outcome"])
	require.Equal(t, "claimed", row(t, w.pool, `SELECT state FROM todos WHERE id = $1`, long.ID)["state"])
	require.Empty(t, w.rec.Events())
	require.Empty(t, w.outbox(t))
}

func TestTodosHumanVerbs(t *testing.T) {
	t.Parallel()
	w, ctx := newTodoWorld(t)
	a, b := w.person(t, ""), w.person(t, "")
	teamID := w.f.Team("")
	w.f.Member(teamID, b.human, "member")
	teamQueue := w.f.Queue(hostid.Team(teamID), "")
	mine := w.enqueue(t, ctx, a.queue, host.TodoInput{})
	theirs := w.enqueue(t, ctx, teamQueue, host.TodoInput{})

	// Another scope's todo is not_found, never forbidden (D3).
	_, err := w.todos.Interrupt(ctx, b.human, mine.ID)
	require.ErrorIs(t, err, notifytype.ErrNotFound)
	_, err = w.todos.Interrupt(ctx, a.human, theirs.ID)
	require.ErrorIs(t, err, notifytype.ErrNotFound)
	_, err = w.todos.Requeue(ctx, b.human, mine.ID)
	require.ErrorIs(t, err, notifytype.ErrNotFound)
	_, err = w.todos.Interrupt(ctx, a.human, 999999)
	require.ErrorIs(t, err, notifytype.ErrNotFound)

	// Only a dead todo re-queues; a dead or done one does not interrupt.
	_, err = w.todos.Requeue(ctx, a.human, mine.ID)
	requireCode(t, err, notifytype.CodeInvalidArgument, "todo_id")

	// A team member may interrupt and re-queue the team's todo.
	got, err := w.todos.Interrupt(ctx, b.human, theirs.ID)
	require.NoError(t, err)
	require.Equal(t, host.TodoDead, got.State)
	_, err = w.todos.Interrupt(ctx, b.human, theirs.ID)
	requireCode(t, err, notifytype.CodeInvalidArgument, "todo_id")
	got, err = w.todos.Requeue(ctx, b.human, theirs.ID)
	require.NoError(t, err)
	require.Equal(t, host.TodoPending, got.State)
	require.Equal(t, 1, got.DeadLetterCount)
	require.Empty(t, got.DeadReason)

	done := w.claim(t, ctx, a.endpoint, a.queue)
	_, err = w.todos.Complete(ctx, a.endpoint, done.ID, host.AttemptReport{})
	require.NoError(t, err)
	_, err = w.todos.Interrupt(ctx, a.human, done.ID)
	requireCode(t, err, notifytype.CodeInvalidArgument, "todo_id")
}

func TestTodosRevokeEndpoint(t *testing.T) {
	t.Parallel()
	w, ctx := newTodoWorld(t)
	p := w.person(t, "")
	held := w.claim(t, ctx, p.endpoint, w.enqueue(t, ctx, p.queue, host.TodoInput{}).QueueID)
	w.enqueue(t, ctx, p.queue, host.TodoInput{})

	require.ErrorIs(t, w.todos.RevokeEndpoint(ctx, 999999), notifytype.ErrNotFound)
	require.NoError(t, w.todos.RevokeEndpoint(ctx, p.endpoint))
	require.True(t, w.clock.Now().Equal(row(t, w.pool, `SELECT revoked_at FROM endpoints WHERE id = $1`, p.endpoint)["revoked_at"].(time.Time)))

	_, err := w.todos.Heartbeat(ctx, p.endpoint, held.ID)
	require.ErrorIs(t, err, notifytype.ErrForbidden)
	_, err = w.todos.Complete(ctx, p.endpoint, held.ID, host.AttemptReport{})
	require.ErrorIs(t, err, notifytype.ErrForbidden)
	_, err = w.todos.Fail(ctx, p.endpoint, held.ID, host.AttemptReport{})
	require.ErrorIs(t, err, notifytype.ErrForbidden)

	// Revoking again announces nothing more; the pending todo was never
	// the endpoint's.
	require.NoError(t, w.todos.RevokeEndpoint(ctx, p.endpoint))
	require.Len(t, w.rec.Events(), 1)
	require.Equal(t, 1, w.f.Count(`SELECT count(*) FROM todos WHERE state = 'pending'`))
}

// TestTodosDeadLetterPaths: every way to dead-letter emits exactly once, in
// the todo's scope, with its cause, and leaves the todo dead, unclaimed and
// counted.
func TestTodosDeadLetterPaths(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name     string
		cause    host.Cause
		outcome  any // of the closing attempt; nil when none was open
		claimed  bool
		deadFunc func(t *testing.T, ctx context.Context, w *todoWorld, p person, todo host.Todo)
	}{
		{"FailAtTheCap", host.CauseFailAtCap, "failed", true,
			func(t *testing.T, ctx context.Context, w *todoWorld, p person, todo host.Todo) {
				_, err := w.todos.Fail(ctx, p.endpoint, todo.ID, host.AttemptReport{Summary: "gave up", ArtifactHandle: "cairn:7"})
				require.NoError(t, err)
			}},
		{"ReaperAtTheCap", host.CauseLeaseExpired, "expired", true,
			func(t *testing.T, ctx context.Context, w *todoWorld, p person, todo host.Todo) {
				w.clock.Advance(todo.LeaseTTL)
				n, err := w.todos.ReapExpired(ctx)
				require.NoError(t, err)
				require.Equal(t, 1, n)
			}},
		{"Revocation", host.CauseEndpointRevoked, "revoked", true,
			func(t *testing.T, ctx context.Context, w *todoWorld, p person, todo host.Todo) {
				require.NoError(t, w.todos.RevokeEndpoint(ctx, p.endpoint))
			}},
		{"InterruptClaimed", host.CauseInterrupted, "interrupted", true,
			func(t *testing.T, ctx context.Context, w *todoWorld, p person, todo host.Todo) {
				_, err := w.todos.Interrupt(ctx, p.human, todo.ID)
				require.NoError(t, err)
			}},
		{"InterruptPending", host.CauseInterrupted, nil, false,
			func(t *testing.T, ctx context.Context, w *todoWorld, p person, todo host.Todo) {
				_, err := w.todos.Interrupt(ctx, p.human, todo.ID)
				require.NoError(t, err)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, ctx := newTodoWorld(t)
			p := w.person(t, "forge")
			sink := w.subscribedSink(p.scope, storetest.SubscriptionOpts{}, host.EventTodoDeadLettered)
			todo := w.enqueue(t, ctx, p.queue, host.TodoInput{AttemptCap: 1, LeaseTTL: time.Minute})
			var claimant int64
			if tc.claimed {
				todo = w.claim(t, ctx, p.endpoint, p.queue)
				claimant = p.endpoint
			}

			tc.deadFunc(t, ctx, w, p, todo)

			evs := w.rec.Events()
			require.Len(t, evs, 1)
			ev := evs[0]
			require.Equal(t, host.EventTodoDeadLettered, ev.Type)
			require.Equal(t, p.scope, ev.Owner)
			require.Equal(t, p.queue, ev.QueueID)
			require.Equal(t, claimant, ev.EndpointID)
			require.Equal(t, host.DeadLetterKey(todo.ID, 1), ev.OccurrenceKey)
			require.Equal(t, string(tc.cause), host.TodoContentOf(ev.Content).Cause)
			require.Equal(t, fmt.Sprintf("/board/todos/%d", todo.ID), ev.Content.LinkPath)
			require.Equal(t, "forge", ev.Content.Place)

			require.Equal(t, []outboxRow{{
				SinkID: sink, Owner: p.scope.String(), EventType: string(host.EventTodoDeadLettered),
				DedupKey: fmt.Sprintf("todo:%d:1", todo.ID),
			}}, w.outbox(t))

			got := row(t, w.pool, `SELECT state, claimed_by, lease_expires_at, dead_letter_count, dead_reason FROM todos WHERE id = $1`, todo.ID)
			require.Equal(t, map[string]any{
				"state": "dead", "claimed_by": nil, "lease_expires_at": nil,
				"dead_letter_count": int32(1), "dead_reason": string(tc.cause),
			}, got)
			if tc.claimed {
				a := row(t, w.pool, `SELECT outcome, finished_at FROM attempts WHERE todo_id = $1`, todo.ID)
				require.Equal(t, tc.outcome, a["outcome"])
				require.True(t, w.clock.Now().Equal(a["finished_at"].(time.Time)))
			}
		})
	}
}

func TestTodosDeadLetterContent(t *testing.T) {
	t.Parallel()

	t.Run("FromTheTodoAndItsClosingAttempt", func(t *testing.T) {
		t.Parallel()
		w, ctx := newTodoWorld(t)
		p := w.person(t, "forge")
		todo := w.enqueue(t, ctx, p.queue, host.TodoInput{
			Title: "Flaky test in ci", Payload: json.RawMessage(`{"body":"The issue body","n":1}`), AttemptCap: 2,
			OriginDisplay: "org/repo#12", OriginPermalink: "https://forge.example.test/org/repo/issues/12",
		})
		w.claim(t, ctx, p.endpoint, p.queue)
		_, err := w.todos.Fail(ctx, p.endpoint, todo.ID, host.AttemptReport{Summary: "first", ArtifactHandle: "cairn:1"})
		require.NoError(t, err)
		w.claim(t, ctx, p.endpoint, p.queue)
		_, err = w.todos.Fail(ctx, p.endpoint, todo.ID, host.AttemptReport{Summary: "second", ArtifactHandle: "cairn:2"})
		require.NoError(t, err)

		evs := w.rec.Events()
		require.Len(t, evs, 1)
		// The todo's own values are in Data, under the keys rows written
		// before they moved there carried at top level (the engine reads
		// those into Data): the key names are stored, so they are pinned.
		require.Equal(t, sinks.Content{
			Title:    "Flaky test in ci",
			Place:    "forge",
			Summary:  "Todo dead-lettered after 2 attempts",
			LinkPath: fmt.Sprintf("/board/todos/%d", todo.ID),
			Data: map[string]string{
				"cause":            string(host.CauseFailAtCap),
				"origin_display":   "org/repo#12",
				"origin_permalink": "https://forge.example.test/org/repo/issues/12",
				"attempts":         "2",
				"attempt_summary":  "second",
				"artifact_handle":  "cairn:2",
			},
			Body: "The issue body",
		}, evs[0].Content)
		require.Equal(t, host.TodoContent{
			Cause: string(host.CauseFailAtCap), Attempts: 2, AttemptSummary: "second", ArtifactHandle: "cairn:2",
			OriginDisplay: "org/repo#12", OriginPermalink: "https://forge.example.test/org/repo/issues/12",
		}, host.TodoContentOf(evs[0].Content))
	})

	t.Run("NoBodyUnlessAString", func(t *testing.T) {
		t.Parallel()
		w, ctx := newTodoWorld(t)
		p := w.person(t, "")
		todo := w.enqueue(t, ctx, p.queue, host.TodoInput{Payload: json.RawMessage(`{"body":{"text":"x"}}`)})

		_, err := w.todos.Interrupt(ctx, p.human, todo.ID)
		require.NoError(t, err)
		ev := w.rec.Events()[0]
		require.Empty(t, ev.Content.Body)
		require.Zero(t, host.TodoContentOf(ev.Content).Attempts)
		require.Empty(t, host.TodoContentOf(ev.Content).AttemptSummary, "no attempt closed this dead letter")
		require.Equal(t, "Todo dead-lettered before any attempt", ev.Content.Summary)
	})

	t.Run("AfterRequeueOnlyTheNewRoundsAttempt", func(t *testing.T) {
		t.Parallel()
		w, ctx := newTodoWorld(t)
		p := w.person(t, "")
		todo := w.enqueue(t, ctx, p.queue, host.TodoInput{AttemptCap: 1})
		w.failToDeath(t, ctx, p.endpoint, p.queue)
		_, err := w.todos.Requeue(ctx, p.human, todo.ID)
		require.NoError(t, err)

		_, err = w.todos.Interrupt(ctx, p.human, todo.ID)
		require.NoError(t, err)
		evs := w.rec.Events()
		require.Len(t, evs, 2)
		require.Equal(t, "tests still red", host.TodoContentOf(evs[0].Content).AttemptSummary)
		require.Empty(t, host.TodoContentOf(evs[1].Content).AttemptSummary, "the first round's attempt did not close the second dead letter")
		require.Equal(t, host.DeadLetterKey(todo.ID, 2), evs[1].OccurrenceKey)
	})
}

// TestTodosRequeueFiresAgain: REQ-6, "A manual re-queue of a dead letter
// followed by another dead letter MUST fire again".
func TestTodosRequeueFiresAgain(t *testing.T) {
	t.Parallel()
	w, ctx := newTodoWorld(t)
	p := w.person(t, "")
	sink := w.subscribedSink(p.scope, storetest.SubscriptionOpts{}, host.EventTodoDeadLettered)
	todo := w.enqueue(t, ctx, p.queue, host.TodoInput{AttemptCap: 2})

	dead := w.failToDeath(t, ctx, p.endpoint, p.queue)
	require.Equal(t, 2, dead.Attempts)
	got, err := w.todos.Requeue(ctx, p.human, todo.ID)
	require.NoError(t, err)
	require.Equal(t, host.TodoPending, got.State)
	require.Zero(t, got.Attempts)
	require.Equal(t, 1, got.DeadLetterCount)
	dead = w.failToDeath(t, ctx, p.endpoint, p.queue)
	require.Equal(t, 2, dead.DeadLetterCount)

	typ := string(host.EventTodoDeadLettered)
	require.Equal(t, []outboxRow{
		{SinkID: sink, Owner: p.scope.String(), EventType: typ, DedupKey: fmt.Sprintf("todo:%d:1", todo.ID)},
		{SinkID: sink, Owner: p.scope.String(), EventType: typ, DedupKey: fmt.Sprintf("todo:%d:2", todo.ID)},
	}, w.outbox(t))
	require.Equal(t, 4, w.f.Count(`SELECT count(*) FROM attempts WHERE todo_id = $1`, todo.ID), "attempt numbers run on across the re-queue")
}

// TestTodosReapersRace: several instances reaping one database dead-letter
// each expired todo exactly once.
func TestTodosReapersRace(t *testing.T) {
	t.Parallel()
	url := hosttest.URL(t)
	ctx := context.Background()
	clock := newFakeClock()
	const instances, n = 3, 40

	var worlds []*todoWorld
	for range instances {
		pool, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		worlds = append(worlds, newTodoWorldOn(t, pool, clock))
	}
	w := worlds[0]
	p := w.person(t, "")
	sink := w.subscribedSink(p.scope, storetest.SubscriptionOpts{}, host.EventTodoDeadLettered)
	for range n {
		w.enqueue(t, ctx, p.queue, host.TodoInput{AttemptCap: 1, LeaseTTL: time.Minute})
		w.claim(t, ctx, p.endpoint, p.queue)
	}
	clock.Advance(time.Minute)

	reaped := make([]int, instances)
	errs := make([]error, instances)
	var wg sync.WaitGroup
	for i, iw := range worlds {
		wg.Go(func() { reaped[i], errs[i] = iw.todos.ReapExpired(ctx) })
	}
	wg.Wait()
	total := 0
	for i := range worlds {
		require.NoError(t, errs[i])
		total += reaped[i]
	}
	require.Equal(t, n, total)

	seen := map[string]bool{}
	for _, iw := range worlds {
		for _, ev := range iw.rec.Events() {
			todo, _, _ := strings.Cut(ev.OccurrenceKey, ":")
			require.False(t, seen[todo], "todo %s emitted twice", todo)
			seen[todo] = true
		}
	}
	require.Len(t, seen, n)
	rows := w.outbox(t)
	require.Len(t, rows, n)
	keys := map[string]bool{}
	for _, r := range rows {
		require.Equal(t, sink, r.SinkID)
		keys[r.DedupKey] = true
	}
	require.Len(t, keys, n)
	require.Equal(t, n, w.f.Count(`SELECT count(*) FROM todos WHERE state = 'dead' AND dead_letter_count = 1`))
}

// TestTodosNoSinkNoOutboxRow: a dead letter nobody subscribed to is still
// offered to Emit, and writes nothing (REQ-6).
func TestTodosNoSinkNoOutboxRow(t *testing.T) {
	t.Parallel()
	w, ctx := newTodoWorld(t)
	p, other := w.person(t, ""), w.person(t, "")
	// A sink exists, but of another scope, and one of this scope subscribed
	// to something else.
	w.subscribedSink(other.scope, storetest.SubscriptionOpts{}, host.EventTodoDeadLettered)
	w.subscribedSink(p.scope, storetest.SubscriptionOpts{}, engine.EventDigest)

	dead := w.failToDeath(t, ctx, p.endpoint, w.enqueue(t, ctx, p.queue, host.TodoInput{AttemptCap: 1}).QueueID)
	require.Equal(t, host.TodoDead, dead.State)
	require.Len(t, w.rec.Events(), 1)
	require.Empty(t, w.outbox(t))
}

// A compile-time check that the engine is what the host emits through.
var _ host.Emitter = (*engine.Engine)(nil)
