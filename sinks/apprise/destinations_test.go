package apprise_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/apprise"
)

// oracle is testdata/oracle.py in one long-lived Python process with
// Debian's apprise: for each URL, whether Apprise instantiates it and the
// hosts its service's notify() tried to reach (the network refused and
// recorded, nothing leaves the process).
type oracle struct {
	mu  sync.Mutex
	in  *json.Encoder
	out *json.Decoder
}

type destination struct {
	OK    bool     `json:"ok"`
	Hosts []string `json:"hosts"`
}

// python is the interpreter with Debian's apprise: CI installs the
// package (.ci/run); elsewhere a test without it skips, under CI=true it
// fails.
func python(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import apprise").Run() == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no python3 with the apprise module: CI must install Debian's apprise package")
	}
	t.Skip("no python3 with the apprise module (apt-get install apprise)")
	return ""
}

func startOracle(t testing.TB) *oracle {
	t.Helper()
	o, stop, err := newOracle(python(t))
	require.NoError(t, err)
	t.Cleanup(stop)
	return o
}

// newOracle starts testdata/oracle.py; stop ends it.
func newOracle(python string) (o *oracle, stop func(), err error) {
	cmd := exec.Command(python, "-W", "ignore", filepath.Join("testdata", "oracle.py"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	stop = func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}
	o = &oracle{in: json.NewEncoder(stdin), out: json.NewDecoder(stdout)}
	var hello struct {
		Version string `json:"version"`
	}
	if err := o.out.Decode(&hello); err != nil {
		stop()
		return nil, nil, fmt.Errorf("the Apprise oracle did not start: %w: %s", err, &stderr)
	}
	if hello.Version != apprise.HostFieldsVersion {
		stop()
		return nil, nil, fmt.Errorf("hostfields_gen.go comes from Apprise %s, the installed one is %s: go generate ./sinks/apprise", apprise.HostFieldsVersion, hello.Version)
	}
	return o, stop, nil
}

// reach asks Apprise where each URL connects.
func (o *oracle) reach(t testing.TB, urls []string) []destination {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	require.NoError(t, o.in.Encode(map[string]any{"urls": urls}))
	var ans struct {
		Results []destination `json:"results"`
	}
	require.NoError(t, o.out.Decode(&ans))
	require.Len(t, ans.Results, len(urls))
	return ans.Results
}

// normHost is a host as the comparison sees it: lower case, without
// brackets or trailing dots.
func normHost(h string) string {
	return strings.ToLower(strings.TrimRight(strings.Trim(h, "[]"), "."))
}

// unaccounted returns the hosts Apprise reached for u that Switchboard's
// reading (apprise.Destinations) did not name and that are not under one
// of the scheme's own service domains (api.telegram.org for tgram).
func unaccounted(u string, reached []string) []string {
	ours, _ := apprise.Destinations(u)
	var names []string
	for _, h := range ours {
		names = append(names, normHost(h))
	}
	var out []string
	for _, h := range reached {
		n := normHost(h)
		if slices.Contains(names, n) {
			continue
		}
		under := false
		for _, d := range apprise.ServiceDomains(apprise.Scheme(u)) {
			under = under || n == d || strings.HasSuffix(n, "."+d)
		}
		if !under {
			out = append(out, h)
		}
	}
	return out
}

// everyScheme allows every Apprise scheme that reaches the network, the
// generic and relay ones included, so that the differential test covers
// any allowlist an operator can set.
var everyScheme = apprise.NetworkSchemes()

// issue24 are the crafted URLs of issue 24 item 4 that made a real Apprise
// connect to loopback (or would have) while Switchboard checked another
// host, and more of the same kind. Each is either refused when saved or
// read as Apprise reads it.
var issue24 = []string{
	"mailto://u:p@pub.example.com?SMTP=127.0.0.1&port=2525",
	"mailto://u:p@pub.example.com?smtp=pub.example.com&smtp=127.0.0.1",
	"mailto://u:p@pub.example.com?smtp=pub.example.com;smtp=127.0.0.1",
	"mailto://u:p@pub.example.com?to=a@example.com;smtp=127.0.0.1",
	"mailto://u:p@pub.example.com?to=a@example.com#&smtp=127.0.0.1",
	"mailto://u:p@pub.example.com?%73mtp=127.0.0.1",
	"mailto://u:p@pub.example.com?smtp=127.0.0.1:2525",
	"mailto://u:p@pub.example.com?smtp=%31%32%37.0.0.1",
	"mailto://u:p@pub.example.com?smtp=%20127.0.0.1",
	"mailtos://u:p@pub.example.com?smtp=[::1]:465",
	"mailto://u:p@pub.example.com?Smtp=127.0.0.1",
	"gotify://pub.example.com\\@127.0.0.1:8080/token",
	"gotify://pub.example.com%40127.0.0.1:8080/token",
	"gotify://u:p@ss@127.0.0.1:8080/token",
	"gotify://u@pub.example.com@127.0.0.1/token",
	"gotify:////127.0.0.1/token",
	"gotify://127.0.0.1#@pub.example.com/token",
	"gotify://127.0.0.1%2e/token",
	"gotify://127%2e0.0.1/token",
	"gotify://127\u30020.0.1/token",
	"gotify://127.0.0.1./token",
	"gotify://2130706433/token",
	"gotify://0177.0.0.1/token",
	"gotify://0x7f.1/token",
	"gotify://[::1]:8080/token",
	"gotify://[::ffff:127.0.0.1]/token",
	"gotify://::1/token",
	"gotify://[fe80::1%25eth0]/token",
	"ntfy://loopback.example.net:8080?TO=topic",
	"ntfy://loopback.example.net:8080?to=topic",
	"ntfy://loopback.example.net:8080/topic",
	"ntfys://loopback.example.net?mode=private",
	"ntfy://topic",
	"zulip://bot@127.0.0.1/abcdefghijklmnopqrstuvwxyz123456",
	"zulip://bot@chat.example.net/abcdefghijklmnopqrstuvwxyz123456",
	"zulip://bot@myorg/abcdefghijklmnopqrstuvwxyz123456",
	"apprise://127.0.0.1:8000/key",
	"apprises://relay.example.net/key",
	"json://127.0.0.1:8080/hook",
	"json://u:p@pub.example.com@127.0.0.1/",
	"jsons://pub.example.com?:host=127.0.0.1&+X-Forwarded-Host=127.0.0.1",
	"xml://127.0.0.1/",
	"form://LOCALHOST./",
	"matrix://u:p@127.0.0.1/room",
	"lametric://abcdef0123456789abcdef0123456789@127.0.0.1",
	"notica://127.0.0.1/token",
	"signal://127.0.0.1:8080/+15551234567/+15557654321",
	"rocket://u:p@127.0.0.1/room",
	"mmost://127.0.0.1/abcdefghijklmnopqrstuvwxyz",
	"tgram://123456789:abcdefghijklmnopqrstuvwxyz12345678/12345",
	"msteams://team/abcdefghij/abcdefghij/abcdefghij",
	"slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7F/#general",
	"gotify://[0:0:0:0:0:0:0:1]:80/tok",
	"gotify://127.1/tok",
	"gotify://0x7f000001/tok",
	"gotifys://gotify.example.net.:443/tok",
	"ntfys://ntfy.example.net/topic?attach=http://127.0.0.1/x&click=http://127.0.0.1/",
	"discord://1234567890/abcdefghij?avatar_url=http://127.0.0.1/a.png",
	"mailtos://u:p@127.0.0.1.nip.io/",
	"mailto://u:p@pub.example.com?from=a@127.0.0.1&to=b@127.0.0.1",
	"lametrics://0@A",
	"lametric://abcdef0123456789abcdef0123456789@127.0.0.1?mode=cloud",
	"notica://127.0.0.1",
	"matrixs://u:p@127.0.0.1:8448/!room?mode=matrix",
	"zulip://bot@org.127.0.0.1.nip.io/abcdefghijklmnopqrstuvwxyz123456",
	"msteams://127.0.0.1/abcdefghij/abcdefghij/abcdefghij",
	"sns://abcdefghij/abcdefghij/us-east-1/+15551234567?region=127.0.0.1",
}

// fuzzCoordinator reports the process that coordinates go test -fuzz's
// workers (and runs no input itself).
func fuzzCoordinator() bool {
	fuzz, worker := flag.Lookup("test.fuzz"), flag.Lookup("test.fuzzworker")
	return fuzz != nil && fuzz.Value.String() != "" && (worker == nil || worker.Value.String() != "true")
}

// differentialSeeds are FuzzDestinationsMatchApprise's seeds: the issue's URLs
// and the shapes the mutator can least easily reach on its own.
var differentialSeeds = []string{
	"mailto://u:p@pub.example.com?SMTP=127.0.0.1&port=2525",
	"mailto://u:p@pub.example.com?smtp=pub.example.com&smtp=127.0.0.1",
	"mailtos://u:p%40ss@pub.example.com/?to=a@example.com;smtp=smtp.example.com",
	"gotify://pub.example.com\\@127.0.0.1:8080/token",
	"gotifys://u:p@[::1]:8443/a/token",
	"ntfy://loopback.example.net:8080?TO=topic",
	"zulip://bot@127.0.0.1/abcdefghijklmnopqrstuvwxyz123456",
	"lametric://abcdef0123456789abcdef0123456789@10.0.0.1/?mode=device",
	"json://127.0.0.1:8080/hook?+X-Header=1&:key=v#x",
	"apprise://127.0.0.1:8000/key",
}

// TestDestinationsReadURLsAsAppriseDoes: issue 24 item 4. Every host a
// real Apprise connects to for a URL Switchboard accepts is a host
// Switchboard checks (or the service's own public domain), for the
// issue's URLs and the attacks on this fix; the URLs whose meaning could
// differ between parsers are refused when saved instead.
func TestDestinationsReadURLsAsAppriseDoes(t *testing.T) {
	t.Parallel()

	o := startOracle(t)
	corpus := append(slices.Clone(issue24), appriseSeeds(t)...)
	corpus = append(corpus, differentialSeeds...)
	for _, s := range everyScheme {
		corpus = append(corpus, s+"://u:p@pub.example.com:8080/a/b?to=x", s+"://u@127.0.0.1", s+"://127.0.0.1/a")
		for _, p := range apprise.HostParams(s) {
			corpus = append(corpus, s+"://u:p@pub.example.com/a?"+p+"=127.0.0.1&port=25")
		}
	}
	got := o.reach(t, corpus)
	accepted := 0
	for i, u := range corpus {
		if apprise.CheckSchemes([]string{u}, everyScheme) != nil {
			continue
		}
		accepted++
		require.Empty(t, unaccounted(u, got[i].Hosts), "%q: Apprise reached hosts Switchboard did not check (it checked %q)", u, apprise.Hosts(u))
	}
	require.Greater(t, accepted, len(corpus)/3, "the corpus must exercise accepted URLs too")
}

// TestCheckSchemesRefusesURLsParsersReadDifferently: issue 24 item 4. A URL
// whose host could be read differently by Apprise and another parser is
// refused with invalid_argument on secret.urls, saying what, never
// repeating the URL.
func TestCheckSchemesRefusesURLsParsersReadDifferently(t *testing.T) {
	t.Parallel()

	for u, what := range map[string]string{
		"mailto://u:CANARY@pub.example.com?SMTP=127.0.0.1&port=2525":             "lower case",
		"mailto://u:CANARY@pub.example.com?smtp=pub.example.com&smtp=127.0.0.1":  "once",
		"mailto://u:CANARY@pub.example.com?smtp=pub.example.com;smtp=127.0.0.1":  "once",
		"mailto://u:CANARY@pub.example.com?to=a@example.com#&smtp=127.0.0.1":     "#",
		"mailto://u:CANARY@pub.example.com?%73mtp=127.0.0.1":                     "lower case",
		"mailto://u:CANARY@pub.example.com?smtp=%31%32%37.0.0.1":                 "smtp argument",
		"gotify://pub.example.com\\@127.0.0.1:8080/CANARY":                       "backslash",
		"gotify://u:CANARY@ss@127.0.0.1/tok":                                     "@",
		"gotify:////127.0.0.1/CANARY":                                            "third slash",
		"gotify://127.0.0.1#@pub.example.com/CANARY":                             "#",
		"gotify://127%2e0.0.1/CANARY":                                            "percent",
		"gotify://127\u30020.0.1/CANARY":                                         "ASCII",
		"gotify://[fe80::1%25eth0]/CANARY":                                       "percent",
		"gotify://[2001:db8::1]/CANARY":                                          "IPv6",
		"gotify://[::ffff:127.0.0.1]/CANARY":                                     "IPv6",
		"gotify://[::FFFF:7F00:1]:80/CANARY":                                     "IPv6",
		"gotify://127.0.0.1:80x/CANARY":                                          "port",
		"gotify://127.0.0.1:/CANARY":                                             "port",
		"ntfy://loopback.example.net:8080?TO=CANARY":                             "lower case",
		"zulip://bot@127.0.0.1:8x/abcdefghijklmnopqrstuvwxyz12345CANARY":         "port",
		"json://pub.example.com?X-CANARY=1&x-canary=2":                           "lower case",
		"jsons://pub.example.com?+X-Header=1&+x-header=2&canary=1&Canary=2":      "",
		"tgram://123456789:abcdefghijklmnopqrstuvwxyz12345678/12345?CANARY=1&a=": "lower case",
	} {
		err := apprise.CheckSchemes([]string{u}, everyScheme)
		require.ErrorIs(t, err, notifytype.ErrInvalidArgument, "%q", u)
		e, _ := notifytype.AsError(err)
		require.Equal(t, "secret.urls", e.Field, "%q", u)
		require.NotContains(t, err.Error(), "CANARY", "%q", u)
		require.NotContains(t, err.Error(), "127.0.0.1", "%q", u)
		require.Contains(t, err.Error(), what, "%q", u)
	}
	// What every parser reads alike stays allowed.
	for _, u := range []string{
		"mailto://u:p%40ss@pub.example.com?smtp=smtp.example.com&port=587&to=a@example.com,b@example.com",
		"gotify://gotify.example.net:8443/tok",
		"gotifys://[2001:db8:0:0:0:0:0:1]:8443/tok",
		"gotifys://[::1]:8443/tok",
		"ntfys://ntfy.example.net/alerts?priority=high&tags=a,b",
		"json://hook.example.net/path?+X-Token=abc&-User-Agent&:payload=x",
		"slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7F/#general",
		"tgram://123456789:abcdefghijklmnopqrstuvwxyz12345678/12345",
		"zulip://bot@myorg/abcdefghijklmnopqrstuvwxyz123456",
	} {
		require.NoError(t, apprise.CheckSchemes([]string{u}, everyScheme), u)
	}
}

// TestHostFieldsAreApprises: hostfields_gen.go is what testdata/
// hostfields.py derives from the installed Apprise now (go generate
// ./sinks/apprise rewrites it).
func TestHostFieldsAreApprises(t *testing.T) {
	t.Parallel()

	cmd := exec.Command(python(t), "-W", "ignore", filepath.Join("testdata", "hostfields.py"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	want, err := format.Source(out)
	require.NoError(t, err)
	have, err := os.ReadFile("hostfields_gen.go")
	require.NoError(t, err)
	require.Equal(t, string(want), string(have), "hostfields_gen.go is stale: go generate ./sinks/apprise")
}

// appriseSeeds are the differential fuzz target's seed corpus.
func appriseSeeds(t testing.TB) []string {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", "FuzzDestinationsMatchApprise")
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		lines := strings.Split(string(b), "\n")
		if len(lines) >= 2 && strings.HasPrefix(lines[1], "string(") {
			var s string
			require.NoError(t, json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(lines[1], "string("), ")")), &s))
			out = append(out, s)
		}
	}
	return out
}

// FuzzDestinationsMatchApprise: the differential fuzz test of issue 24
// item 4. For any URL Switchboard accepts (under an allowlist of every
// Apprise scheme that reaches the network), every host the installed
// Apprise connects to is one Switchboard checks, or under the scheme's
// own service domain. Seeds: the issue's URLs, the attacks on this fix,
// and one URL per scheme with each of its host-bearing arguments.
func FuzzDestinationsMatchApprise(f *testing.F) {
	// A few seeds, so that the baseline (every seed through Apprise)
	// fits in CI's 5 s; TestDestinationsReadURLsAsAppriseDoes runs all of
	// issue24 and a URL per scheme, and the corpus directory's inputs are
	// seeds too.
	for _, u := range differentialSeeds {
		f.Add(u)
	}
	// The oracle runs in the process that runs the inputs: go test
	// itself, or each fuzzing worker, never the fuzzing coordinator, which
	// runs none. It starts here, before the inputs, as a worker panics
	// when one call of the fuzz function outlasts 10 s.
	var o *oracle
	if !fuzzCoordinator() {
		o = startOracle(f)
	}
	f.Fuzz(func(t *testing.T, u string) {
		if apprise.CheckSchemes([]string{u}, everyScheme) != nil {
			return
		}
		require.NotNil(t, o, "no Apprise oracle in this process")
		got := o.reach(t, []string{u})[0]
		if bad := unaccounted(u, got.Hosts); len(bad) > 0 {
			t.Fatalf("%q: Apprise reached %q, which Switchboard did not check (it checked %q)", u, bad, apprise.Hosts(u))
		}
	})
}
