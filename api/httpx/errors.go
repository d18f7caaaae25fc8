package httpx

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/switchboard/notify/notifytype"
)

// StatusOf maps an error to its HTTP status: the one table for the spec's
// codes (REQ-15). Anything uncoded is a 500 whose detail goes to the log,
// never to the caller.
func StatusOf(err error) int {
	e, ok := notifytype.AsError(err)
	if !ok {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return http.StatusRequestEntityTooLarge
		}
		return http.StatusInternalServerError
	}
	switch e.Code {
	case notifytype.CodeInvalidArgument, notifytype.CodeForbiddenScheme:
		return http.StatusBadRequest
	case notifytype.CodeForbidden:
		return http.StatusForbidden
	case notifytype.CodeNotFound:
		return http.StatusNotFound
	case notifytype.CodeEncryptionRequired:
		return http.StatusConflict
	case notifytype.CodeRateLimited:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// Public returns the error as a caller may see it: the coded refusal as it
// is, a body over the limit as invalid_argument on body, anything else as
// a bare "internal" error.
func Public(err error) *notifytype.Error {
	if e, ok := notifytype.AsError(err); ok {
		return e
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return notifytype.InvalidArgument("body", "must be at most 16 KiB")
	}
	return &notifytype.Error{Code: "internal", Message: "internal error"}
}

// WriteError answers err as JSON {"error": {code, field, scheme, message}}
// with its status, and logs an uncoded error.
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	status := StatusOf(err)
	SetRetryAfter(w, err)
	if status == http.StatusInternalServerError {
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	WriteJSON(w, status, map[string]any{"error": Public(err)})
}

// WriteJSON answers v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// DecodeJSON reads a JSON body into v, refusing unknown fields. A body
// declared as anything but JSON is invalid_argument naming Content-Type; a
// bad body, or one with anything after its one JSON value, is
// invalid_argument naming the body. Nothing is read past the first refusal.
func DecodeJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSONMediaType(ct) {
		return notifytype.InvalidArgument("Content-Type", "must be application/json")
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// One value only: a second object after the first is refused, not
		// silently ignored.
		if _, next := dec.Token(); next != io.EOF {
			err = errTrailingJSON
		}
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return notifytype.InvalidArgument("body", "must be a JSON object of the documented fields: "+jsonProblem(err))
	}
	return nil
}

var errTrailingJSON = errors.New("one JSON value only, nothing after it")

// isJSONMediaType reports whether a Content-Type names JSON
// (application/json or a +json type, any parameters).
func isJSONMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// jsonProblem describes a decoding error without echoing values.
func jsonProblem(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return "malformed JSON"
	case errors.As(err, &typ):
		return "field " + typ.Field + " has the wrong type"
	default:
		msg := err.Error()
		if len(msg) > 80 {
			msg = msg[:80]
		}
		return msg
	}
}

// WriteUnauthenticated answers 401 with WWW-Authenticate: Bearer and the
// error body {"error": {"code": "unauthenticated", "message": msg}}, the
// same on every surface.
func WriteUnauthenticated(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard-notify"`)
	WriteJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]string{"code": "unauthenticated", "message": msg}})
}
