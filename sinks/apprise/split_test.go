package apprise_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/apprise"
)

// smuggled are URLs that Apprise reads as more than one service, each
// hiding a refused scheme behind an allowed one, and the scheme the check
// must name. CANARY marks what no error may repeat.
var smuggled = []struct{ url, scheme string }{
	{"mailto://u:p@example.com,json://169.254.169.254/latest/meta-data/CANARY", "json"},
	{"tgram://bot/chat, json://CANARY.example.net/", "json"},
	{"tgram://bot/chat,,,xmls://CANARY.example.net/", "xmls"},
	{"tgram://bot/chat\tform://CANARY.example.net/", "form"},
	{"tgram://bot/chat\u00a0jsons://CANARY.example.net/", "jsons"},
	{"tgram://bot/chat\u2028json://CANARY.example.net/", "json"},
	{"tgram://bot/chat\x1cjson://CANARY.example.net/", "json"},
	{"tgram://bot/chat\u3000syslog://CANARY", "syslog"},
	{"tgram://bot/chat,JSON://CANARY.example.net/", "json"},
	{"tgram://bot/chat\n\njson://CANARY.example.net/", "json"},
	{"json://CANARY.example.net/,tgram://bot/chat", "json"},
	{"mailto://CANARY@example.net,windows://", "windows"},
}

func TestCheckSchemesRefusesSmuggledServices(t *testing.T) {
	t.Parallel()

	for _, tc := range smuggled {
		err := apprise.CheckSchemes([]string{"ntfys://topic", tc.url}, apprise.DefaultAllowedSchemes)
		require.ErrorIs(t, err, notifytype.ErrForbiddenScheme, "%q", tc.url)
		e, _ := notifytype.AsError(err)
		require.Equal(t, tc.scheme, e.Scheme, "%q", tc.url)
		require.NotContains(t, err.Error(), "CANARY")
		require.NotContains(t, err.Error(), "example.net")
	}
}

func TestCheckSchemesRefusesTwoAllowedServicesInOneURL(t *testing.T) {
	t.Parallel()

	for _, u := range []string{
		"mailto://u:p@CANARY.example.com,tgram://bot/chat",
		"mailto://u:p@CANARY.example.com tgram://bot/chat",
		"mailto://u:p@CANARY.example.com\u2003ntfys://topic",
	} {
		err := apprise.CheckSchemes([]string{u}, apprise.DefaultAllowedSchemes)
		require.ErrorIs(t, err, notifytype.ErrInvalidArgument, "%q", u)
		e, _ := notifytype.AsError(err)
		require.Equal(t, "secret.urls", e.Field)
		require.NotContains(t, err.Error(), "CANARY")
	}
	// Commas Apprise does not split on stay allowed: several e-mail
	// recipients in one mailto URL.
	require.NoError(t, apprise.CheckSchemes([]string{"mailto://u:p@example.com?to=a@example.com,b@example.com"}, apprise.DefaultAllowedSchemes))
}

func TestCheckSchemesIsAnAllowlist(t *testing.T) {
	t.Parallel()

	// A scheme no Apprise service has, and one that only looks like an
	// allowed one (the Kelvin sign folds onto k under Python's IGNORECASE).
	err := apprise.CheckSchemes([]string{"xyzzy://CANARY.example.net"}, apprise.DefaultAllowedSchemes)
	require.ErrorIs(t, err, notifytype.ErrForbiddenScheme)
	e, _ := notifytype.AsError(err)
	require.Equal(t, "xyzzy", e.Scheme)
	err = apprise.CheckSchemes([]string{"\u212Ade://CANARY"}, apprise.DefaultAllowedSchemes)
	require.ErrorIs(t, err, notifytype.ErrInvalidArgument)
	require.NotContains(t, err.Error(), "CANARY")

	for _, s := range apprise.ExcludedSchemes {
		require.NotContains(t, apprise.DefaultAllowedSchemes, s)
		err := apprise.CheckSchemes([]string{s + "://CANARY.example.net/"}, apprise.DefaultAllowedSchemes)
		require.ErrorIs(t, err, notifytype.ErrForbiddenScheme, s)
	}
	for _, s := range []string{"tgram", "mailto", "gotifys", "ntfys", "slack", "discord", "msteams"} {
		require.Contains(t, apprise.DefaultAllowedSchemes, s)
	}
	// The operator's list replaces the default: json allowed, tgram not.
	require.NoError(t, apprise.CheckSchemes([]string{"json://hook.example.net"}, []string{"json"}))
	require.ErrorIs(t, apprise.CheckSchemes([]string{"tgram://bot/chat"}, []string{"json"}), notifytype.ErrForbiddenScheme)
	require.True(t, slices.IsSorted(apprise.DefaultAllowedSchemes))
}

// splitCorpus are texts whose splitting matters; the fuzz seeds are added
// to it.
var splitCorpus = []string{
	"", "tgram://bot/chat", "  tgram://bot/chat  ", "a://x b://y", "ab://x cd://y",
	"mailto://a\nb json://x", "tgram://a\n", "tgram://a\n\n", "x mailto://a", "tgram://a,,",
	"nothing here, at all", "[a];b c", "mailto://u:p@example.com?to=a@example.com,b@example.com",
	"tgram://a,abcdefghij://b", "tgram://a,abcdefghi://b", "tgram://a, 1a://b",
	"İs://x tgram://y", "\u212Ade://x", "tgram://a ſlack://b", "tgram://a ıi://b",
	"tgram://a\u00a0json://b", "tgram://a\x1cjson://b", "tgram://a\u0085json://b",
	"tgram://a\u200bjson://b", "tgram://a\u2028json://b", "tgram://a\u3000json://b",
	"tgram://a\u202ejson://b", "tgram://a\x7fjson://b", "tgram://a;json://b",
	"::// ://", "a://", "a:// b:// cc://", "é://x, tgram://y", "TGRAM://A,JSON://B",
}

// realApprise is the installed Apprise (Debian's apprise package) in a
// Python process that answers one JSON line per request: for a list of
// texts, what its own parse_urls makes of each, and what its
// URL_DETECTION_RE makes of each with the next scheme's length range
// swapped for each of apprise.Splitters' (Python's re engine, so the newer
// Apprises' splitting is checked against the real regex engine too).
type realApprise struct {
	version     string
	schemes     []string
	hostSchemes []string // the schemes of services with a host token
	in          *json.Encoder
	out         *json.Decoder
}

type appriseAnswer struct {
	Own     [][]string            `json:"own"`
	ByRange map[string][][]string `json:"by_range"`
}

const appriseProgram = `
import json, re, sys
import apprise
from apprise.utils import parse_urls, URL_DETECTION_RE, STRING_DELIMITERS
pattern = URL_DETECTION_RE.pattern
assert re.search(r"\{\d+,\d+\}\?:", pattern), pattern
def split_with(rx, text):
    found = rx.findall(text) if text else []
    if found or not text:
        return found
    return [x for x in re.split(STRING_DELIMITERS, text) if x]
schemes, host_schemes = set(), set()
for s in apprise.Apprise().details(show_disabled=True)["schemas"]:
    protocols = []
    for k in ("protocols", "secure_protocols"):
        v = s.get(k) or []
        protocols += [v] if isinstance(v, str) else v
    schemes.update(protocols)
    if "host" in s.get("details", {}).get("tokens", {}):
        host_schemes.update(protocols)
print(json.dumps({"version": apprise.__version__, "schemes": sorted(schemes), "host_schemes": sorted(host_schemes)}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    by_range = {}
    for r in req["ranges"]:
        rx = re.compile(re.sub(r"\{\d+,\d+\}\?:", "{" + r + "}?:", pattern), URL_DETECTION_RE.flags)
        by_range[r] = [split_with(rx, x) for x in req["texts"]]
    print(json.dumps({"own": [parse_urls(x) for x in req["texts"]], "by_range": by_range}), flush=True)
`

// startApprise starts the installed Apprise. Without an interpreter that
// has Apprise it skips, except under CI=true, where it fails: CI installs
// Debian's apprise package.
func startApprise(t *testing.T) *realApprise {
	t.Helper()
	for _, python := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(python)
		if err != nil {
			continue
		}
		cmd := exec.Command(path, "-c", appriseProgram)
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		a := &realApprise{in: json.NewEncoder(stdin), out: json.NewDecoder(stdout)}
		var hello struct {
			Version     string   `json:"version"`
			Schemes     []string `json:"schemes"`
			HostSchemes []string `json:"host_schemes"`
		}
		if err := a.out.Decode(&hello); err != nil {
			_ = stdin.Close()
			_ = cmd.Wait()
			t.Logf("%s cannot run Apprise: %v: %s", path, err, stderr.String())
			continue
		}
		t.Cleanup(func() {
			_ = stdin.Close()
			_ = cmd.Wait()
		})
		a.version, a.schemes, a.hostSchemes = hello.Version, hello.Schemes, hello.HostSchemes
		return a
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no python3 with the apprise module: CI must install Debian's apprise package")
	}
	t.Skip("no python3 with the apprise module (apt-get install apprise)")
	return nil
}

func rangeKey(sp apprise.Splitter) string { return fmt.Sprintf("%d,%d", sp.MinScheme, sp.MaxScheme) }

// split asks Apprise to split texts.
func (a *realApprise) split(t require.TestingT, texts []string) appriseAnswer {
	ranges := make([]string, len(apprise.Splitters))
	for i, sp := range apprise.Splitters {
		ranges[i] = rangeKey(sp)
	}
	require.NoError(t, a.in.Encode(map[string]any{"texts": texts, "ranges": ranges}))
	var ans appriseAnswer
	require.NoError(t, a.out.Decode(&ans))
	require.Len(t, ans.Own, len(texts))
	return ans
}

func orNil(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestSplitURLsMatchesApprise(t *testing.T) {
	t.Parallel()

	corpus := append(slices.Clone(splitCorpus), fuzzSeeds(t)...)
	for _, s := range smuggled {
		corpus = append(corpus, s.url)
	}
	real := startApprise(t)
	ans := real.split(t, corpus)
	// The installed Apprise (Debian 12's 1.2) splits as the oldest splitter.
	require.True(t, strings.HasPrefix(real.version, "1."), real.version)
	for i, text := range corpus {
		require.Equal(t, orNil(ans.Own[i]), orNil(apprise.Splitters[0].Split(text)),
			"Splitters[0].Split(%q) differs from Apprise %s's parse_urls", text, real.version)
		for _, sp := range apprise.Splitters {
			require.Equal(t, orNil(ans.ByRange[rangeKey(sp)][i]), orNil(sp.Split(text)),
				"Splitter %s on %q differs from Python's re with Apprise's regex", sp.Versions, text)
		}
	}

	// The default allowlist is Apprise's schemes less the excluded ones.
	wantAllowed := slices.DeleteFunc(real.schemes, func(s string) bool { return slices.Contains(apprise.ExcludedSchemes, s) })
	require.Equal(t, wantAllowed, apprise.DefaultAllowedSchemes, "update DefaultAllowedSchemes to the installed Apprise's services")
}

// fuzzSeeds reads the seed corpus of FuzzCheckSchemes.
func fuzzSeeds(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzCheckSchemes", "*"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		require.Equal(t, "go test fuzz v1", lines[0], f)
		lit := strings.TrimSuffix(strings.TrimPrefix(lines[1], "string("), ")")
		s, err := strconv.Unquote(lit)
		require.NoError(t, err, f)
		out = append(out, s)
	}
	return out
}

// secondService is an independent statement of when any Apprise sees a
// second service: a run of separators, then letters or digits (with the
// four non-ASCII letters Python folds onto ASCII ones), however many, then
// "://".
var secondService = regexp.MustCompile("(?i)[\\s\\x{1c}-\\x{1f}\\x{85}\\p{Z},][a-z0-9\\x{130}\\x{131}\\x{17f}\\x{212a}]+://")

func FuzzCheckSchemes(f *testing.F) {
	for _, s := range smuggled {
		f.Add(s.url)
	}
	for _, s := range splitCorpus {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		err := apprise.CheckSchemes([]string{u}, apprise.DefaultAllowedSchemes)
		if err != nil {
			if _, ok := notifytype.AsError(err); !ok {
				t.Fatalf("CheckSchemes(%q) gave an uncoded error: %v", u, err)
			}
			if strings.Contains(u, "CANARY") && strings.Contains(err.Error(), "CANARY") {
				t.Fatalf("CheckSchemes(%q) echoed the URL: %v", u, err)
			}
			return
		}
		// Accepted: Apprise reads exactly this one URL, of an allowed
		// scheme, and no separator hides a second service.
		for _, sp := range apprise.Splitters {
			parts := sp.Split(strings.TrimSpace(u))
			if len(parts) != 1 || parts[0] != strings.TrimSpace(u) {
				t.Fatalf("accepted %q, which Apprise %s reads as %q", u, sp.Versions, parts)
			}
		}
		if !slices.Contains(apprise.DefaultAllowedSchemes, apprise.Scheme(u)) {
			t.Fatalf("accepted %q, whose scheme %q is not allowed", u, apprise.Scheme(u))
		}
		if secondService.MatchString(strings.TrimSpace(u)) {
			t.Fatalf("accepted %q, which hides a second service", u)
		}
	})
}
