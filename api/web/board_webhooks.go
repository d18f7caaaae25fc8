package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
)

// The board page of a webhook delivery (D13): the link a delivery.quarantined
// or rule.notify message carries, /board/webhooks/<id>/deliveries/<id>. It
// is behind the web session and scope-checked by host.Webhooks: a delivery
// of a webhook of another scope is not_found (D3). A delivery outlives its
// webhook until retention (as a sink's delivery records do), so the page
// opens after the webhook was deleted too, and says so.

type boardDeliveryData struct {
	Webhook  host.Webhook
	Delivery host.Delivery
	// WebhookDeleted: the webhook was deleted since; Webhook holds only its
	// id and scope.
	WebhookDeleted bool
	// Payload is the delivery's JSON, indented; sender-written, shown as
	// escaped text.
	Payload string
}

func (s *server) boardDelivery(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "webhook")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	deliveryID, err := pathID(r, "delivery", "delivery")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	d, err := s.d.Webhooks.Delivery(r.Context(), a.P, id, deliveryID)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	deleted := false
	hook, err := s.d.Webhooks.Get(r.Context(), a.P, id)
	if errors.Is(err, notifytype.ErrNotFound) {
		// The caller may see the delivery, so the webhook, of the same
		// scope, is gone rather than hidden.
		hook, deleted, err = host.Webhook{ID: id, Owner: d.Owner, Name: "a deleted webhook"}, true, nil
	}
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, d.Payload, "", "  ") != nil {
		pretty.Reset()
		pretty.Write(d.Payload)
	}
	s.render(w, r, http.StatusOK, "board_delivery", a, view{
		Title: "Delivery " + strconv.FormatInt(d.ID, 10) + " of " + hook.Name, Nav: "webhooks", Scope: hook.Owner,
		Data: boardDeliveryData{Webhook: hook, Delivery: d, Payload: pretty.String(), WebhookDeleted: deleted},
	})
}
