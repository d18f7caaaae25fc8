package pages

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/internal/enginecore"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// SignInSinks is how many of a human's own sinks a sign-in link is sent
// to at most (the first enabled ones, by id).
const SignInSinks = 3

// SignInEventType is the event type of the delivery record a sign-in link
// leaves on each sink it went to (the sink's page lists it as "sign-in
// link"; the record holds no link).
const SignInEventType = "sign_in_link"

// SendSignInLink delivers, through e, a one-time sign-in link (link, valid until
// until, in words) to the human's own enabled sinks, now: at most
// SignInSinks of them, never a team's sink, so the link reaches only the
// person it signs in. It is the web UI's "send me a sign-in link": the
// caller minted the link for this human. Each send passes the guarded
// client like any delivery, leaves a delivery record without the link
// (counted with the sink's test messages, engine.SendTestsPerMinute a
// minute per sink) and bypasses subscriptions and the budget. It returns how many
// sinks accepted the message; the link is never logged.
func SendSignInLink(ctx context.Context, e *engine.Engine, humanID string, link, until string) (int, error) {
	n, err := sendSignInLink(ctx, enginecore.Of(e), humanID, link, until)
	return n, enginecore.WrapErr(err, "sending a sign-in link")
}

func sendSignInLink(ctx context.Context, core *enginecore.Core, humanID string, link, until string) (int, error) {
	owner := notifytype.Human(humanID)
	if !owner.Valid() {
		return 0, notifytype.InvalidArgument("human_id", "not a human id (1 to 128 of A-Z a-z 0-9 . _ ~ : @ -)")
	}
	all, err := store.ListSinks(ctx, core.Pool, owner)
	if err != nil {
		return 0, err
	}
	msg := signInMessage(link, until)
	sent, tried := 0, 0
	for _, sk := range all {
		if tried == SignInSinks {
			break
		}
		if !sk.Enabled {
			continue
		}
		tried++
		ok, err := sendSignInTo(ctx, core, sk.ID, owner, msg)
		if err != nil {
			core.Logger.Warn("sign-in link not sent", "sink_id", sk.ID, "owner_scope", owner.String(), "error", err)
			continue
		}
		if ok {
			sent++
		}
	}
	return sent, nil
}

// recordTimeout bounds writing a sign-in link's outcome, as the engine's
// recorder bounds an attempt's.
const recordTimeout = 10 * time.Second

// errSignInSkipped is a sink a sign-in link may not go to now.
var errSignInSkipped = errors.New("sink skipped")

func sendSignInTo(ctx context.Context, core *enginecore.Core, sinkID int64, owner notifytype.OwnerScope, msg sinks.Message) (bool, error) {
	now, err := core.Now(ctx)
	if err != nil {
		return false, err
	}
	var (
		adapter  sinks.Adapter
		recordID int64
	)
	err = pgx.BeginFunc(ctx, core.Pool, func(tx pgx.Tx) error {
		s, err := store.LockSinkForDelivery(ctx, tx, sinkID)
		if err != nil {
			return enginecore.NotFoundIfNoRows(err, "sink")
		}
		if s.Owner != owner.String() {
			return errSignInSkipped // moved since it was listed
		}
		n, _, err := store.CountTestsSince(ctx, tx, sinkID, now.Add(-time.Minute))
		if err != nil {
			return err
		}
		if n >= engine.SendTestsPerMinute {
			return fmt.Errorf("%w: at most %d test messages and sign-in links a minute per sink", errSignInSkipped, engine.SendTestsPerMinute)
		}
		a, refusal := core.AdapterFor(s)
		if refusal != "" {
			return fmt.Errorf("%w: %s", errSignInSkipped, refusal)
		}
		adapter = a
		recordID, err = store.InsertDeliveryRecord(ctx, tx, store.DeliveryRecord{
			SinkID: s.ID, Owner: s.Owner, EventType: SignInEventType, IsTest: true, CountsBudget: false, SentAt: now,
		})
		return err
	})
	if err != nil {
		return false, err
	}
	result := core.Send(ctx, adapter, msg)
	status := "delivered"
	if !result.OK() {
		status = "undeliverable"
		core.Logger.Warn("sign-in link failed", "sink_id", sinkID, "owner_scope", owner.String(), "class", result.Class,
			"http_status", result.Status)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := store.FinishDeliveryRecord(rctx, core.Pool, recordID, status, string(result.Class), result.Status, core.NowOrLocal(rctx)); err != nil {
		return false, err
	}
	return result.OK(), nil
}

// signInMessage is the sign-in link's message: the link (a tap opens it),
// how long it works, and what to do when it was not asked for.
func signInMessage(link, until string) sinks.Message {
	const title = "Sign in to Switchboard"
	lead := "Someone (you, we hope) asked to sign in to Switchboard with your email."
	tail := "It works once, until " + until + ". Whoever opens it is signed in as you: do not forward it. If you did not ask for it, ignore this message."
	return sinks.Message{
		Title:    title,
		Body:     lead + "\nSign in: " + link + "\n" + tail,
		Markdown: lead + "\n\n[Sign in](" + strings.ReplaceAll(link, ")", "%29") + ")\n\n" + tail,
		Link:     link,
		Severity: notifytype.SeverityNormal,
	}
}
