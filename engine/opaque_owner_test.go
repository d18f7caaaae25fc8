package engine_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/engine/history"
	"github.com/switchboard/notify/engine/pages"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// stringDirectory is an embedder's Directory keyed by its own string ids:
// the humans listed, no teams, and every filter id the owner's.
type stringDirectory struct{ humans []string }

func (d stringDirectory) TeamRole(context.Context, string, string) (engine.Role, error) {
	return engine.RoleNone, nil
}

func (d stringDirectory) Owned(_ context.Context, _ notifytype.OwnerScope, _ engine.Resource, ids []int64) ([]int64, error) {
	return ids, nil
}

func (d stringDirectory) KnownActor(_ context.Context, humanID string, endpointID int64) (bool, error) {
	return endpointID == 0 && slices.Contains(d.humans, humanID), nil
}

// An embedder keyed by uuid, or by slug, needs no mapping table: its own
// ids are the owners, from configuring a sink through Emit to the message
// at the receiver and the notifications listed by that owner.
func TestOpaqueOwnerIDsGoEndToEnd(t *testing.T) {
	t.Parallel()
	const uuid, slug = "7b0c4e2a-1d3f-4c5b-9a8e-2f6d0c1b3a4e", "ops.team-7"
	ctx := context.Background()
	pool := hosttest.New(t)

	received := make(chan string, 4)
	gotify := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct{ Title string }
		_ = json.NewDecoder(r.Body).Decode(&m)
		received <- r.Header.Get("X-Gotify-Key") + " " + m.Title
	}))
	t.Cleanup(gotify.Close)

	key := make([]byte, 32)
	eng, err := engine.New(engine.Config{
		Events: host.Events(), Links: host.Links(),
		Pool: pool, Directory: stringDirectory{humans: []string{uuid, slug}}, SecretKey: key, PushAllowHTTP: true,
		PrivateHosts: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	require.NoError(t, err)

	for _, id := range []string{uuid, slug} {
		p, owner := engine.HumanPrincipal(id), notifytype.Human(id)
		conn, err := eng.CreateConnection(ctx, p, engine.ConnectionInput{
			Owner: owner, Kind: engine.KindGotify, Name: "phone", BaseURL: gotify.URL,
			Secret: notifytype.NewSecret("token-" + id),
		})
		require.NoError(t, err)
		require.Equal(t, id, conn.CreatedByHumanID)
		sink, err := eng.CreateSink(ctx, p, engine.SinkInput{Owner: owner, Name: "phone", Kind: engine.KindGotify, ConnectionID: conn.ID})
		require.NoError(t, err)
		require.Equal(t, id, sink.UpdatedByHumanID)
		sub, err := eng.AddSubscription(ctx, p, sink.ID, engine.SubscriptionInput{
			EventTypes: []notifytype.EventType{host.EventTodoDeadLettered},
		})
		require.NoError(t, err)
		require.Equal(t, id, sub.CreatedByHumanID)
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return eng.Emit(ctx, tx, engine.Event{
				Type: host.EventTodoDeadLettered, Owner: owner, OccurrenceKey: host.DeadLetterKey(1, 1),
				Content: sinks.Content{Title: "job of " + id, Place: "jobs", LinkPath: "/jobs/1"},
			})
		}))
	}
	// One owner never reaches the other's sinks.
	_, err = eng.ListSinks(ctx, engine.HumanPrincipal(slug), notifytype.Human(uuid))
	requireRefusal(t, err, notifytype.CodeNotFound, "")

	require.NoError(t, eng.Start(ctx))
	var got []string
	for range 2 {
		select {
		case m := <-received:
			got = append(got, m)
		case <-time.After(enginetest.WaitTimeout):
			t.Fatalf("only %v arrived", got)
		}
	}
	require.ElementsMatch(t, []string{
		"token-" + uuid + " Dead letter in jobs: job of " + uuid,
		"token-" + slug + " Dead letter in jobs: job of " + slug,
	}, got)

	// Stop drains: every delivery is recorded when it returns.
	drain, cancel := context.WithTimeout(ctx, enginetest.WaitTimeout)
	defer cancel()
	require.NoError(t, eng.Stop(drain))
	for _, id := range []string{uuid, slug} {
		ns, err := history.RecentNotifications(ctx, eng, engine.HumanPrincipal(id), []notifytype.OwnerScope{notifytype.Human(id)}, "", 10)
		require.NoError(t, err)
		require.Len(t, ns, 1, "%s lists its own notification", id)
		require.Equal(t, notifytype.Human(id), ns[0].Owner)
		require.Equal(t, host.EventTodoDeadLettered, ns[0].EventType)
		require.Equal(t, "delivered", ns[0].State)
	}
}

// A bad owner id changes nothing: the service refuses it with
// invalid_argument naming the field, Emit the same, and the schema's
// domain refuses it even when written past the engine.
func TestBadOwnerIDsAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := hosttest.New(t)
	eng, err := engine.New(engine.Config{Pool: pool, Events: host.Events(), Links: host.Links(), Directory: stringDirectory{humans: []string{"ada"}}, SecretKey: make([]byte, 32)})
	require.NoError(t, err)

	_, err = eng.CreateConnection(ctx, engine.HumanPrincipal("ada"), engine.ConnectionInput{
		Owner: notifytype.Human("ada lovelace"), Kind: engine.KindGotify, Name: "phone", BaseURL: "https://gotify.example.net",
		Secret: notifytype.NewSecret("t"),
	})
	requireRefusal(t, err, notifytype.CodeInvalidArgument, "owner")
	_, err = eng.CreateConnection(ctx, engine.HumanPrincipal("ada/1"), engine.ConnectionInput{
		Owner: notifytype.Human("ada"), Kind: engine.KindGotify, Name: "phone", BaseURL: "https://gotify.example.net",
		Secret: notifytype.NewSecret("t"),
	})
	requireRefusal(t, err, notifytype.CodeInvalidArgument, "human_id")
	_, err = pages.SendSignInLink(ctx, eng, "ada lovelace", "https://example.test/login/x", "12:00 UTC")
	requireRefusal(t, err, notifytype.CodeInvalidArgument, "human_id")
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return eng.Emit(ctx, tx, engine.Event{Type: host.EventTodoDeadLettered, Owner: notifytype.Human(long129()), OccurrenceKey: host.DeadLetterKey(1, 1)})
	})
	requireRefusal(t, err, notifytype.CodeInvalidArgument, "owner")

	for _, owner := range []string{"human:ada lovelace", "human:", "robot:1", "human:" + long129()} {
		_, err = pool.Exec(ctx, `INSERT INTO switchboard.connections (owner, kind, name, account_key) VALUES ($1, 'gotify', 'x', 'https://gotify.example.net')`, owner)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, owner)
		require.Equal(t, "23514", pgErr.Code, "%s: check_violation of the domain", owner)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM switchboard.connections) + (SELECT count(*) FROM switchboard.outbox_events)`).Scan(&n))
	require.Zero(t, n, "nothing written")
}

func long129() string {
	b := make([]byte, 129)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}
