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

// New returns the handler of POST /hooks/{id}. It answers 202 with
// {"delivery_id", "outcome"} for a stored delivery; 413 for a body over
// 256 KiB, 403 for a bad signature, 400 for a body that is not one JSON
// object and 404 for an unknown webhook, each changing nothing.
func New(d httpx.Deps) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil || id <= 0 {
			httpx.WriteError(w, r, d.Logger, notifytype.NotFound("webhook"))
			return
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
		got, err := d.Webhooks.Receive(r.Context(), id, body, r.Header.Get(host.SignatureHeader))
		if err != nil {
			httpx.WriteError(w, r, d.Logger, err)
			return
		}
		httpx.WriteJSON(w, http.StatusAccepted, got)
	})
	return mux
}
