package hooks

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
)

// New returns the handler of POST /hooks/{id}. A delivery is signed the
// Standard Webhooks way (host.Envelope: webhook-id, webhook-timestamp,
// webhook-signature). It answers 202 with {"delivery_id", "outcome"} for a
// stored delivery, and 200 with the first delivery's id and outcome
// "duplicate" for a webhook-id the webhook already stored (a retry or a
// replay: nothing is done again); 413 for a body over 256 KiB, 400
// invalid_argument naming the header for a malformed webhook-id or
// webhook-timestamp, 403 for a timestamp more than 5 minutes from the
// server's clock, 403 for a bad signature, 400 for a body that is not one
// JSON object, each changing nothing. An id that names no webhook (not a
// number, never created, or deleted) is answered exactly as a bad signature
// is, 403 with the same body, after the same work (the HMAC under a dummy
// secret), so the route reveals no webhook id that exists; the log line
// "webhook delivery refused" tells the operator which it was (reason
// unknown_webhook, bad_signature or stale_timestamp), never with the body
// or the signature. Each refusal spends one of the client address's failed
// authentications and one of the webhook id's (d.AuthFailures); a refusal
// while either is spent is answered 429 with Retry-After instead (reason
// too_many_failures). A delivery signed right is never refused by them:
// failures from its sender's address (a proxy shared with others) or
// forgeries against its webhook do not lock its sender out.
func New(d httpx.Deps) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/{id}", func(w http.ResponseWriter, r *http.Request) {
		// An id that does not parse names no webhook: it goes the unknown
		// webhook's way (id 0 is never a row), not a quicker one.
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil || id < 0 {
			id = 0
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, host.DeliveryMaxBytes))
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			httpx.WriteJSON(w, http.StatusRequestEntityTooLarge, map[string]any{
				"error": notifytype.InvalidArgument("body", "must be at most 256 KiB"),
			})
			return
		}
		if err != nil {
			httpx.WriteError(w, r, d.Logger, notifytype.InvalidArgument("body", "could not be read"))
			return
		}
		got, err := d.Webhooks.Receive(r.Context(), id, body, host.EnvelopeOf(r.Header))
		var refusal *host.ReceiveRefusal
		if errors.As(err, &refusal) {
			reason := refusal.Reason
			// Every id has its own bucket, whether it names a webhook or
			// not, so the limit tells no id that exists from one that
			// does not.
			if limited := d.AuthFailures.Fail(r, "hook:"+strconv.FormatInt(id, 10)); limited != nil {
				err, reason = limited, reasonTooManyFailures
			}
			d.Logger.WarnContext(r.Context(), "webhook delivery refused", "webhook_id", loggableID(r.PathValue("id")),
				"reason", reason, "body_bytes", len(body))
		}
		if err == nil {
			httpx.Authenticated(r.Context())
		}
		if err != nil {
			httpx.WriteError(w, r, d.Logger, err)
			return
		}
		if got.Outcome == host.OutcomeDuplicate {
			httpx.WriteJSON(w, http.StatusOK, got)
			return
		}
		httpx.WriteJSON(w, http.StatusAccepted, got)
	})
	return mux
}

// reasonTooManyFailures is the log's reason for a delivery refused because
// its client address spent its failed authentications.
const reasonTooManyFailures = "too_many_failures"

// loggableID is the path's id as the log may carry it: the caller wrote
// it, so it is cut to 24 bytes (longer than any int64).
func loggableID(v string) string {
	if len(v) > 24 {
		return v[:24] + "…"
	}
	return v
}
