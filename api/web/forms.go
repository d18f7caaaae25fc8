package web

import (
	"html"
	"html/template"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/notifytype"
)

// fieldNote is a message under one form input that is not a refusal: a
// failed Send test names the input to fix ("Token").
type fieldNote struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// InvalidWith is Invalid for an input that also has a help line (helpID):
// aria-describedby names the help, and the message under the input when
// the refusal is about it.
func (v view) InvalidWith(name, helpID string) template.HTMLAttr {
	ids := helpID
	attr := ""
	if v.errField() == name && name != "" {
		attr = `aria-invalid="true" `
		ids += " error-" + name
	}
	return template.HTMLAttr(attr + `aria-describedby="` + html.EscapeString(strings.TrimSpace(ids)) + `"`)
}

// OptionsInvalid reports whether the refusal is about an input folded
// under a sink form's Options, which then opens.
func (v view) OptionsInvalid() bool {
	return slices.Contains([]string{"priority_low", "priority_normal", "priority_high", "tag", "budget_per_hour", "budget_burst"}, v.errField())
}

// testField is the input of the sink form a failed test is about, so the
// form marks it: the token that was refused, the base URL that could not
// be reached or answered 404, the Apprise URLs or config key Apprise had
// nothing for. A saved connection's token or address is not on the form:
// then the Connection picker. "" when no input is to blame.
func testField(res engine.TestMessageResult, f sinkForm) string {
	if res.Delivered {
		return ""
	}
	fresh := f.ConnectionID == newConnection
	onConn := func(field string) string {
		if fresh {
			return field
		}
		return "connection_id"
	}
	switch res.Class {
	case notifytype.ClassAuth:
		if f.Kind == engine.KindGotify {
			return onConn("secret")
		}
		return "connection_id"
	case notifytype.ClassNetwork, notifytype.ClassTimeout, notifytype.ClassTLS, notifytype.ClassRedirect, notifytype.ClassBlocked:
		return onConn("account_key")
	case notifytype.ClassRejected:
		if f.Kind == engine.KindGotify {
			return onConn("account_key")
		}
		if strings.TrimSpace(f.ConfigKey) != "" {
			return "config_key"
		}
		return onConn("apprise_urls")
	case notifytype.ClassConfig:
		if strings.TrimSpace(f.ConfigKey) != "" {
			return "config_key"
		}
		return onConn("apprise_urls")
	case notifytype.ClassPartial:
		if strings.TrimSpace(f.Tag) != "" {
			return "tag"
		}
		return onConn("apprise_urls")
	}
	return ""
}

// kindClassHelp is classHelp for a sink of kind: a Gotify sink is never
// told about an Apprise config key, and each says where to look.
func kindClassHelp(kind string, c notifytype.ErrorClass) string {
	switch {
	case kind == engine.KindGotify && c == notifytype.ClassAuth:
		return "Gotify refused the token (HTTP 401 or 403). Copy it again: in Gotify, Apps → your application → its token. A client token does not work here: it must be an application's."
	case kind == engine.KindGotify && c == notifytype.ClassRejected:
		return "Gotify refused the message (an HTTP 4xx other than 401 and 403; a 404 is usually a wrong address). Check that the base URL is the address you open Gotify at, without /message."
	case kind == engine.KindApprise && c == notifytype.ClassAuth:
		return "The Apprise API server refused the request (HTTP 401 or 403): it wants an authorization header. Set it on the connection (Connections → Edit)."
	case kind == engine.KindApprise && c == notifytype.ClassRejected:
		return "The Apprise API server refused the message (an HTTP 4xx other than 401 and 403). Check the config key and the tag, and that the base URL is the Apprise API server's address."
	}
	return classHelp(c)
}

// testText says a test's result in words: delivered, or what failed and
// what to do for the sink's kind, with the HTTP status when there was
// one. Nothing was saved.
func testText(res engine.TestMessageResult, kind string) string {
	if res.Delivered {
		return "Test message delivered: check that it arrived. Nothing is saved until you create the sink."
	}
	t := "The test message was not delivered (" + string(res.Class)
	if res.Status != 0 {
		t += ", HTTP " + strconv.Itoa(res.Status)
	}
	return t + "). " + kindClassHelp(kind, res.Class) + " Nothing was saved."
}
