package surface_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/apprise"
)

// fuzzInputs counts the inputs the fuzz targets ran, seeds included.
var fuzzInputs atomic.Int64

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
		for _, et := range []notifytype.EventType{host.EventTodoDeadLettered, host.EventRuleNotify} {
			c := host.WithTodo(sinks.Content{Title: title, Place: place, Summary: summary, Subject: summary, Body: body, LinkPath: "/board/todos/1"},
				host.TodoContent{AttemptSummary: title, OriginDisplay: place, Cause: summary})
			msg := host.Render(c,
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
// off (D23): the lookahead of apprise.utils.URL_DETECTION_RE,
// [\s,]+[a-z0-9]{2,9}?:// under re.I, over Python's Unicode \s (every
// space, U+001C to U+001F and U+0085) and the four non-ASCII letters
// IGNORECASE folds onto ASCII ones (İ ı ſ K). A scheme with "+", "." or
// "-" does not split: Debian's apprise 1.2 reads "tgrAm://,A+://" as one
// URL, which an RFC-shaped scheme here once took for two.
var aSecondURL = regexp.MustCompile(`(?i)[\s\x{1c}-\x{1f}\x{85}\p{Z},][a-z0-9\x{130}\x{131}\x{17f}\x{212a}]{2,9}://`)

// FuzzAppriseURL: an accepted Apprise URL has an allowed scheme and is
// one URL to Apprise; a refusal never repeats the URL.
func FuzzAppriseURL(f *testing.F) {
	for _, s := range []string{"tgram://bot/chat", "json://evil.example", "JSON://evil.example", " json://x", "tgram://a/b,json://evil.example",
		"tgram://a/b json://evil.example", "tgram://a\x00", "file:///etc/passwd", "windows://", "://nothing", "tgram:/x", "mailto://u:p@h", "tgrAm://,A+://"} {
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
			(SELECT count(*) FROM switchboard.connections), (SELECT count(*) FROM switchboard.sinks), (SELECT count(*) FROM switchboard.subscriptions),
			(SELECT count(*) FROM endpoints), (SELECT max(updated_at)::text FROM switchboard.sinks))`).Scan(&out); err != nil {
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

// Every fuzz target of the module is run by the suite (faults.FuzzTargets,
// which make faults-fuzz runs and counts into the table), the schedule
// parser's (engine/digest FuzzParse) and the rule save path's (host
// FuzzRuleSave) among them; a target added anywhere without being listed
// fails here.
func TestSuiteRunsEveryFuzzTarget(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "the module root")
	found := map[string]string{} // target → package
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // another module (bench/)
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range fuzzFuncRE.FindAllStringSubmatch(string(b), -1) {
			found[m[1]] = "./" + filepath.ToSlash(rel)
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, found)

	listed := map[string]string{}
	for _, ft := range faults.FuzzTargets {
		listed[ft.Name] = ft.Pkg
		require.Equal(t, found[ft.Name], ft.Pkg, "%s is listed in faults.FuzzTargets under a package that has no such target", ft.Name)
	}
	for name, pkg := range found {
		ok := listed[name] == pkg
		switch name {
		case "FuzzParse":
			rows.pending.Expect(t, "surface/fuzz-schedule", ok, "the schedule parser's fuzzer %s (%s) is not run by the suite", name, pkg)
		case "FuzzRuleSave":
			rows.pending.Expect(t, "surface/fuzz-rules", ok, "the rule save fuzzer %s (%s) is not run by the suite", name, pkg)
		default:
			require.True(t, ok, "fuzz target %s (%s) is not in faults.FuzzTargets: make faults-fuzz would never run it", name, pkg)
		}
	}
	require.Contains(t, found, "FuzzParse", "the schedule parser's fuzzer")
	require.Contains(t, found, "FuzzRuleSave", "the rule save fuzzer")
}

var fuzzFuncRE = regexp.MustCompile(`(?m)^func (Fuzz\w+)\(\w+ \*testing\.F\)`)
