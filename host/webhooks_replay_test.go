package host_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// A captured signed delivery posted again is answered with the first
// delivery and outcome duplicate, and changes nothing: no second delivery,
// todo or event. A sender's honest retry (same id, a later timestamp and
// its own signature) is the same duplicate. (Issue 18 item 9.)
func TestReplayedDeliveryChangesNothing(t *testing.T) {
	t.Parallel()
	w, ctx := newHookWorld(t)
	hook, secret, p := w.hook(t, ctx)
	w.subscribedSink(hook.Owner, storetest.SubscriptionOpts{}, host.EventDeliveryQuarantined)
	queue := w.f.Queue(hook.Owner, "forge")
	_, err := w.hooks.SetRules(ctx, p, hook.ID, []host.RuleInput{{Name: "route", Expr: `true`, Action: host.RuleAction{Queue: queue}}})
	require.NoError(t, err)

	for _, sender := range []string{"octocat", "mallory"} { // routed, quarantined
		body := []byte(issue(sender, 7, "seven"))
		captured := host.Sign(secret, host.NewMessageID(), w.clock.Now(), body)
		first, err := w.hooks.Receive(ctx, hook.ID, body, captured)
		require.NoError(t, err)
		require.NotEqual(t, host.OutcomeDuplicate, first.Outcome)
		deliveries, todos, events := w.f.Count(`SELECT count(*) FROM webhook_deliveries`),
			w.f.Count(`SELECT count(*) FROM todos`), w.f.Count(`SELECT count(*) FROM switchboard.outbox_events`)

		w.clock.Advance(4 * time.Minute)
		replayed, err := w.hooks.Receive(ctx, hook.ID, body, captured)
		require.NoError(t, err)
		require.Equal(t, host.Received{DeliveryID: first.DeliveryID, Outcome: host.OutcomeDuplicate, Summary: "already received; nothing was done again"}, replayed)
		retried, err := w.hooks.Receive(ctx, hook.ID, body, host.Sign(secret, captured.MessageID, w.clock.Now(), body))
		require.NoError(t, err)
		require.Equal(t, replayed, retried, "a retry with the same id is the same duplicate")

		require.Equal(t, deliveries, w.f.Count(`SELECT count(*) FROM webhook_deliveries`), sender)
		require.Equal(t, todos, w.f.Count(`SELECT count(*) FROM todos`), sender)
		require.Equal(t, events, w.f.Count(`SELECT count(*) FROM switchboard.outbox_events`), sender)

		// Past the tolerance the capture is stale.
		w.clock.Advance(host.SignatureTolerance)
		_, err = w.hooks.Receive(ctx, hook.ID, body, captured)
		requireRefusal(t, err, host.RefusalStaleTimestamp)
		require.Equal(t, deliveries, w.f.Count(`SELECT count(*) FROM webhook_deliveries`))
	}

	// Another webhook may use the same message id: ids are per webhook.
	other, otherSecret, _ := w.hook(t, ctx)
	body := []byte(issue("octocat", 8, "eight"))
	env := host.Sign(secret, "msg_shared", w.clock.Now(), body)
	_, err = w.hooks.Receive(ctx, hook.ID, body, env)
	require.NoError(t, err)
	got, err := w.hooks.Receive(ctx, other.ID, body, host.Sign(otherSecret, "msg_shared", w.clock.Now(), body))
	require.NoError(t, err)
	require.NotEqual(t, host.OutcomeDuplicate, got.Outcome)
}

// Two copies of one delivery racing store it once: the message id's row,
// written in the delivery's transaction, decides.
func TestConcurrentRepeatsStoreOneDelivery(t *testing.T) {
	t.Parallel()
	w, ctx := newHookWorld(t)
	hook, secret, _ := w.hook(t, ctx)
	w.subscribedSink(hook.Owner, storetest.SubscriptionOpts{}, host.EventDeliveryQuarantined)
	body := []byte(issue("mallory", 1, "race"))
	env := host.Sign(secret, host.NewMessageID(), w.clock.Now(), body)
	got := receiveAtOnce(t, w, ctx, hook.ID, body, env, 8)
	stored := 0
	for _, r := range got {
		if r.Outcome != host.OutcomeDuplicate {
			stored++
		}
		require.Equal(t, got[0].DeliveryID, r.DeliveryID, "every copy names the one delivery")
	}
	require.Equal(t, 1, stored)
	require.Equal(t, 1, w.f.Count(`SELECT count(*) FROM webhook_deliveries`))
	require.Equal(t, 1, w.f.Count(`SELECT count(*) FROM switchboard.outbox_events`))
}

// The same for a delivery stored in one statement (a trusted sender's, left
// unrouted by no rules): the message id taken in that statement decides.
func TestConcurrentRepeatsOfADeliveryStoredInOneStatementStoreOne(t *testing.T) {
	t.Parallel()
	w, ctx := newHookWorld(t)
	hook, secret, _ := w.hook(t, ctx)
	body := []byte(issue("octocat", 1, "race"))
	env := host.Sign(secret, host.NewMessageID(), w.clock.Now(), body)
	got := receiveAtOnce(t, w, ctx, hook.ID, body, env, 8)
	stored := 0
	for _, r := range got {
		if r.Outcome != host.OutcomeDuplicate {
			require.Equal(t, host.OutcomeUnrouted, r.Outcome)
			stored++
		}
		require.Equal(t, got[0].DeliveryID, r.DeliveryID, "every copy names the one delivery")
	}
	require.Equal(t, 1, stored)
	require.Equal(t, 1, w.f.Count(`SELECT count(*) FROM webhook_deliveries`))
}

// The envelope is checked before any webhook is read: a malformed id or
// timestamp is invalid_argument naming its header, a stale or future
// timestamp a stale_timestamp refusal, the old X-Switchboard-Signature
// scheme a missing webhook-id; none changes anything.
func TestEnvelopeIsChecked(t *testing.T) {
	t.Parallel()
	w, ctx := newHookWorld(t)
	hook, secret, _ := w.hook(t, ctx)
	body := []byte(issue("octocat", 1, "x"))
	now := w.clock.Now()
	sign := func(id string, at time.Time) host.Envelope { return host.Sign(secret, id, at, body) }
	withTS := func(ts string) host.Envelope {
		e := host.Envelope{MessageID: "msg_1", Timestamp: ts}
		e.Signature = sign("msg_1", now).Signature
		return e
	}
	for name, tc := range map[string]struct {
		env   host.Envelope
		field string
	}{
		"old scheme only":     {host.Envelope{Signature: "sha256=" + strings.Repeat("ab", 32)}, host.MessageIDHeader},
		"no id":               {sign("", now), host.MessageIDHeader},
		"id with a dot":       {sign("msg.1", now), host.MessageIDHeader},
		"id with a space":     {sign("msg 1", now), host.MessageIDHeader},
		"id not ASCII":        {sign("msg_é", now), host.MessageIDHeader},
		"id too long":         {sign(strings.Repeat("a", host.MessageIDMaxLen+1), now), host.MessageIDHeader},
		"no timestamp":        {withTS(""), host.TimestampHeader},
		"timestamp in ms":     {withTS("17000000000000"), host.TimestampHeader},
		"timestamp not a num": {withTS("yesterday"), host.TimestampHeader},
		"negative timestamp":  {withTS("-1"), host.TimestampHeader},
	} {
		_, err := w.hooks.Receive(ctx, hook.ID, body, tc.env)
		requireCode(t, err, notifytype.CodeInvalidArgument, tc.field)
		require.NotContains(t, err.Error(), secret.Reveal(), name)
	}
	_, err := w.hooks.Receive(ctx, hook.ID, body, sign(strings.Repeat("a", host.MessageIDMaxLen), now))
	require.NoError(t, err, "an id of the longest length is taken")

	for _, at := range []time.Time{now.Add(-host.SignatureTolerance - time.Second), now.Add(host.SignatureTolerance + time.Second)} {
		_, err := w.hooks.Receive(ctx, hook.ID, body, sign(host.NewMessageID(), at))
		requireRefusal(t, err, host.RefusalStaleTimestamp)
		requireCode(t, err, notifytype.CodeForbidden, "")
		// An unknown webhook's stale delivery is refused the same way,
		// before it is looked up.
		_, unknown := w.hooks.Receive(ctx, 1<<40, body, sign(host.NewMessageID(), at))
		require.Equal(t, err.Error(), unknown.Error())
		requireRefusal(t, unknown, host.RefusalStaleTimestamp)
	}
	for _, at := range []time.Time{now.Add(-host.SignatureTolerance), now.Add(host.SignatureTolerance)} {
		_, err := w.hooks.Receive(ctx, hook.ID, body, sign(host.NewMessageID(), at))
		require.NoError(t, err, "the tolerance's edges are inside it")
	}
	require.Equal(t, 3, w.f.Count(`SELECT count(*) FROM webhook_deliveries`))
}

// webhook-signature may carry several signatures: one valid v1 is enough;
// other versions are skipped; a signature over another id, timestamp or
// body is refused; so is a header with more than SignaturesMax.
func TestSignatureHeaderForms(t *testing.T) {
	t.Parallel()
	w, ctx := newHookWorld(t)
	hook, secret, _ := w.hook(t, ctx)
	body := []byte(issue("octocat", 1, "x"))
	now := w.clock.Now()
	wrong := host.Sign(notifytype.NewSecret("sbw_old"), "x", now, body).Signature
	for name, tc := range map[string]struct {
		sig func(good host.Envelope) string
		ok  bool
	}{
		"one":                 {func(g host.Envelope) string { return g.Signature }, true},
		"rotated: old first":  {func(g host.Envelope) string { return wrong + " " + g.Signature }, true},
		"v1a beside":          {func(g host.Envelope) string { return "v1a,AAAA " + g.Signature }, true},
		"wrong version":       {func(g host.Envelope) string { return "v2," + strings.TrimPrefix(g.Signature, "v1,") }, false},
		"bare base64":         {func(g host.Envelope) string { return strings.TrimPrefix(g.Signature, "v1,") }, false},
		"wrong only":          {func(host.Envelope) string { return wrong }, false},
		"too many signatures": {func(g host.Envelope) string { return strings.Repeat(wrong+" ", host.SignaturesMax) + g.Signature }, false},
		"other id":            {func(g host.Envelope) string { return host.Sign(secret, "msg_other", now, body).Signature }, false},
		"other time": {func(g host.Envelope) string {
			return host.Sign(secret, g.MessageID, now.Add(time.Second), body).Signature
		}, false},
		"other body": {func(g host.Envelope) string { return host.Sign(secret, g.MessageID, now, append(body, ' ')).Signature }, false},
	} {
		good := host.Sign(secret, host.NewMessageID(), now, body)
		env := good
		env.Signature = tc.sig(good)
		_, err := w.hooks.Receive(ctx, hook.ID, body, env)
		if tc.ok {
			require.NoError(t, err, name)
		} else {
			requireRefusal(t, err, host.RefusalBadSignature)
		}
	}
}

// A message id's record goes when it expires (its timestamp, the
// tolerance and a margin), by the janitor's PruneSpent, not before.
func TestMessageIDsArePruned(t *testing.T) {
	t.Parallel()
	w, ctx := newHookWorld(t)
	hook, secret, _ := w.hook(t, ctx)
	body := []byte(issue("octocat", 1, "x"))
	signedAt := w.clock.Now()
	_, err := w.hooks.Receive(ctx, hook.ID, body, host.Sign(secret, host.NewMessageID(), signedAt, body))
	require.NoError(t, err)
	count := func() int { return w.f.Count(`SELECT count(*) FROM webhook_message_ids`) }
	require.Equal(t, 1, count())

	// Kept while a copy could still pass the timestamp check on an
	// instance whose clock is minutes off.
	p, err := hoststore.PruneSpent(ctx, w.pool, signedAt.Add(2*host.SignatureTolerance-time.Second))
	require.NoError(t, err)
	require.Zero(t, p.WebhookMessageIDs)
	require.Equal(t, 1, count())
	p, err = hoststore.PruneSpent(ctx, w.pool, signedAt.Add(2*host.SignatureTolerance))
	require.NoError(t, err)
	require.EqualValues(t, 1, p.WebhookMessageIDs)
	require.Zero(t, count())
}

func requireRefusal(t *testing.T, err error, reason string) {
	t.Helper()
	var refusal *host.ReceiveRefusal
	require.ErrorAs(t, err, &refusal)
	require.Equal(t, reason, refusal.Reason)
}

// receiveAtOnce sends copies copies of one signed delivery at once and
// returns what each was answered.
func receiveAtOnce(t *testing.T, w *hookWorld, ctx context.Context, hookID int64, body []byte, env host.Envelope, copies int) []host.Received {
	t.Helper()
	got := make([]host.Received, copies)
	var wg sync.WaitGroup
	for i := range copies {
		wg.Go(func() {
			r, err := w.hooks.Receive(ctx, hookID, body, env)
			require.NoError(t, err)
			got[i] = r
		})
	}
	wg.Wait()
	return got
}
