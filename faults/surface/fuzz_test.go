package surface_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/apprise"
)

// fuzzInputs counts the inputs the fuzz targets ran, seeds included.
var fuzzInputs atomic.Int64

// Fuzzers is every fuzz target of the suite, for make faults and CI (each
// runs alone: go test -fuzz needs one target per run).
var _ = []string{"FuzzClean", "FuzzRender", "FuzzAppriseURL", "FuzzAppriseSecret", "FuzzRESTBody"}

// hostileText are seeds every text fuzzer starts from.
var hostileText = []string{
	"", "plain", "line\nbreak\r\nand\ttab", "\x00\x01\x1b[31mred\x1b[0m\x7f\u0085\u009b2J",
	"bidi \u202eevil\u202c \u2066iso\u2069 \u200b\ufeff", "invalid \xff\xfe utf-8 \xc3", strings.Repeat("é", 500),
	strings.Repeat("\u202e", 300), "\u2028sep\u2029", "\ue000private\U000f0000", "a" + strings.Repeat(" ", 300) + "b",
	strings.Repeat("x", 70_000),
}

// FuzzClean: sender-written text comes out on one line, valid UTF-8,
// without control, format (bidi, zero-width) or private-use characters,
// within its limit.
func FuzzClean(f *testing.F) {
	for _, s := range hostileText {
		f.Add(s, 120)
		f.Add(s, 1)
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		fuzzInputs.Add(1)
		limit = ((limit % 400) + 400) % 400
		out := sinks.Clean(s, limit)
		checkLine(t, out)
		if n := utf8.RuneCountInString(out); n > limit {
			t.Fatalf("Clean(%q, %d) has %d runes", s, limit, n)
		}
		if strings.HasPrefix(out, " ") || strings.HasSuffix(out, " ") || strings.Contains(out, "  ") {
			t.Fatalf("Clean(%q) leaves loose spaces: %q", s, out)
		}
	})
}

func checkLine(t *testing.T, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("invalid UTF-8 in %q", s)
	}
	for _, r := range s {
		if r == '\n' || unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Co, unicode.Cs) || r == 0x2028 || r == 0x2029 {
			t.Fatalf("%U left in %q", r, s)
		}
	}
}

// FuzzRender: whatever a sender or agent writes, the title is one clean
// line of bounded length, and every line of the body is clean.
func FuzzRender(f *testing.F) {
	for _, s := range hostileText {
		f.Add(s, s, s, s)
	}
	f.Fuzz(func(t *testing.T, title, place, summary, body string) {
		fuzzInputs.Add(1)
		for _, et := range []notifytype.EventType{notifytype.EventTodoDeadLettered, notifytype.EventAgentNotify} {
			msg := sinks.Render(sinks.Content{Title: title, Place: place, Summary: summary, Body: body, AttemptSummary: title,
				OriginDisplay: place, LinkPath: "/board/todos/1"},
				sinks.Meta{EventType: et, Count: 3, IncludeExcerpt: true, BaseURL: "https://notify.example.net"})
			checkLine(t, msg.Title)
			if n := utf8.RuneCountInString(msg.Title); n > 400 {
				t.Fatalf("title of %d runes", n)
			}
			for _, line := range strings.Split(msg.Body, "\n") {
				checkLine(t, line)
			}
		}
	})
}

// aSecondURL finds a second Apprise URL that the Apprise API would split
// off (at a comma or white space before scheme://), D23.
var aSecondURL = regexp.MustCompile(`[\s,]+[A-Za-z][A-Za-z0-9+.-]*://`)

// FuzzAppriseURL: an accepted Apprise URL has an allowed scheme and is
// one URL to Apprise; a refusal never repeats the URL.
func FuzzAppriseURL(f *testing.F) {
	for _, s := range []string{"tgram://bot/chat", "json://evil.example", "JSON://evil.example", " json://x", "tgram://a/b,json://evil.example",
		"tgram://a/b json://evil.example", "tgram://a\x00", "file:///etc/passwd", "windows://", "://nothing", "tgram:/x", "mailto://u:p@h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		fuzzInputs.Add(1)
		err := apprise.CheckSchemes([]string{u}, apprise.DefaultAllowedSchemes)
		if err != nil {
			if len(u) >= 12 && strings.Contains(err.Error(), u) {
				t.Fatalf("the refusal repeats the URL: %v", err)
			}
			return
		}
		if slices.Contains(apprise.ExcludedSchemes, apprise.Scheme(u)) {
			t.Fatalf("denied scheme %q accepted in %q", apprise.Scheme(u), u)
		}
		rows.pending.Expect(t, "surface/apprise-one-url", !aSecondURL.MatchString(strings.TrimSpace(u)),
			"accepted as one URL, read by Apprise as several: %q", u)
	})
}

// FuzzAppriseSecret: a sealed secret's plaintext parses or is refused
// without echoing it, and what parses encodes back to itself.
func FuzzAppriseSecret(f *testing.F) {
	for _, s := range []string{`{"urls":["tgram://a/b"],"authorization":"Bearer x"}`, `{"urls":["tgram://a/b"]}{}`, `{"authorization":"a\r\nX-Evil: 1"}`,
		`{"urls":"tgram://a"}`, `{"urls":[""]}`, `{"extra":1}`, `null`, `[]`, `{"urls":["a b://c"]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fuzzInputs.Add(1)
		sec, err := apprise.ParseSecret(s)
		if err != nil {
			if len(s) >= 12 && strings.Contains(err.Error(), s) {
				t.Fatalf("the refusal repeats the secret: %v", err)
			}
			return
		}
		if strings.ContainsAny(sec.Authorization, "\r\n\x00") {
			t.Fatalf("a header value with a line break was accepted: %q", sec.Authorization)
		}
		if fmt.Sprint(sec) != sec.String() || strings.Contains(fmt.Sprintf("%v %+v %#v", sec, sec, sec), sec.Authorization+"\x00") {
			t.Fatalf("the secret prints its content")
		}
		again, err := apprise.ParseSecret(sec.Encode())
		if err != nil || !slices.Equal(again.URLs, sec.URLs) || again.Authorization != sec.Authorization {
			t.Fatalf("the secret does not survive Encode: %v", err)
		}
	})
}

// FuzzRESTBody: whatever a management body holds, the API answers below
// 500, and a refusal is a JSON error that changed nothing.
func FuzzRESTBody(f *testing.F) {
	s := newServer(f, serverOpts{})
	a := s.person(f)
	conn := s.connection(f, a, map[string]any{"kind": "gotify", "account_key": "https://push.example.net", "token": "gtfya.fuzz"})
	sink := s.sink(f, a, engine.KindGotify, conn, nil)
	routes := []struct{ method, path string }{
		{http.MethodPost, "/api/v1/connections"},
		{http.MethodPost, "/api/v1/sinks"},
		{http.MethodPatch, fmt.Sprintf("/api/v1/sinks/%d", sink)},
		{http.MethodPost, fmt.Sprintf("/api/v1/sinks/%d/subscriptions", sink)},
		{http.MethodPut, fmt.Sprintf("/api/v1/sinks/%d/subscriptions", sink)},
		{http.MethodPost, "/api/v1/endpoints"},
	}
	for _, b := range []string{
		`{}`, `null`, `[]`, `{"name":null}`, `{"owner":"human:1","name":"x","kind":"gotify","connection_id":1}`,
		`{"owner":"team:1","name":"x","kind":"apprise","account_key":"http://169.254.169.254","urls":["json://x"]}`,
		`{"budget_per_hour":-1}`, `{"budget_burst":1e309}`, `{"options":{"priorities":{"low":"9"}}}`, `{"event_types":["todo.dead_lettered","nope"]}`,
		`{"event_types":[],"queues":[-1]}`, `{"grants":["notify_owner","notifications","todos"],"name":"\u202e"}`, `{"enabled":"yes"}`,
		`{"name":"` + strings.Repeat("\\u0000", 100) + `"}`, `{"a":` + strings.Repeat("[", 5000) + `}`,
	} {
		for i := range routes {
			f.Add(uint8(i), b)
		}
	}
	state := func(t *testing.T) string {
		var out string
		if err := s.w.Pool.QueryRow(context.Background(), `SELECT concat_ws('|',
			(SELECT count(*) FROM connections), (SELECT count(*) FROM sinks), (SELECT count(*) FROM subscriptions),
			(SELECT count(*) FROM endpoints), (SELECT max(updated_at)::text FROM sinks))`).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		fuzzInputs.Add(1)
		rt := routes[int(route)%len(routes)]
		before := state(t)
		status, got := s.do(t, request{method: rt.method, path: rt.path, token: a.token, body: body, contentType: "application/json"})
		if status >= 500 {
			t.Fatalf("%s %s %q: %d %s", rt.method, rt.path, body, status, got)
		}
		if status < 400 {
			return
		}
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(got), &e); err != nil || e.Error.Code == "" {
			t.Fatalf("%s %s %q: %d is not a JSON error: %s", rt.method, rt.path, body, status, got)
		}
		if after := state(t); after != before {
			t.Fatalf("%s %s %q answered %d but changed %s to %s", rt.method, rt.path, body, status, before, after)
		}
	})
}

// The schedule parser's and the rule expressions' fuzzers come with the
// digests and webhooks branches; until they land, their absence is on the
// table, not hidden.
func TestFuzzersOfOtherBranches(t *testing.T) {
	t.Parallel()
	rows.pending.Note(t, "surface/fuzz-schedule")
	rows.pending.Note(t, "surface/fuzz-rules")
}
