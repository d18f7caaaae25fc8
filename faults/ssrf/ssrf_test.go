package ssrf_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/gotify"
)

// receiver is a loopback server that counts what reaches it.
type receiver struct {
	*httptest.Server
	hits atomic.Int32
	port string
}

func listen(t *testing.T, ip string, h http.HandlerFunc) *receiver {
	t.Helper()
	r := &receiver{}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	require.NoError(t, err)
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		w.Header().Set("Connection", "close") // every request dials anew
		if h != nil {
			h(w, req)
			return
		}
		_, _ = w.Write([]byte(`{"id":1}`))
	}))
	r.Listener = ln
	r.Start()
	t.Cleanup(r.Close)
	_, r.port, _ = net.SplitHostPort(ln.Addr().String())
	return r
}

var (
	dns     *fakeDNS
	results = struct {
		sync.Mutex
		tried, refused, secrets int
		unresolved              int
		pending                 faults.Pending
	}{}
)

// names the test DNS answers. Numeric spellings are answered as a libc
// resolver's inet_aton would read them, so the guard (not the resolver)
// must refuse them.
var names = map[string][]netip.Addr{
	"loopback.faults.test": {netip.MustParseAddr("127.0.0.1")},
	"private.faults.test":  {netip.MustParseAddr("10.1.2.3")},
	"metadata.faults.test": {netip.MustParseAddr("169.254.169.254")},
	"cgnat.faults.test":    {netip.MustParseAddr("100.64.0.7")},
	// Rebinding: the first answer is the allowed receiver, the next the
	// metadata address.
	"rebind.faults.test": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("169.254.169.254")},
	"2130706433":         {netip.MustParseAddr("127.0.0.1")},
	"0x7f000001":         {netip.MustParseAddr("127.0.0.1")},
	"0177.0.0.1":         {netip.MustParseAddr("127.0.0.1")},
	"127.1":              {netip.MustParseAddr("127.0.0.1")},
	"017700000001":       {netip.MustParseAddr("127.0.0.1")},
}

func TestMain(m *testing.M) {
	var err error
	if dns, err = startFakeDNS(names); err != nil {
		fmt.Fprintln(os.Stderr, "error starting the test DNS server:", err)
		os.Exit(1)
	}
	net.DefaultResolver = dns.resolver()
	code := m.Run()
	results.Lock()
	row := faults.Row{
		Scenario:  "4. SSRF corpus (guarded client, at dial time)",
		Load:      fmt.Sprintf("%d destinations", results.tried),
		Faults:    "hostile DNS answers, rebinding, redirect to private",
		BadInputs: results.tried, RowsLost: faults.NotApplicable, Duplicates: faults.NotApplicable,
		SecretsFound: results.secrets,
		Figures: []string{fmt.Sprintf("%d of %d hostile destinations refused as blocked or an unfollowed redirect, %d numeric spellings never resolved (class network), none reached; the allowlist let through exactly the prefix it names",
			results.refused, results.tried, results.unresolved)},
		Pending: results.pending.Notes(), Failed: code != 0,
	}
	results.Unlock()
	if err := faults.ReportRow(row); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func deliver(t *testing.T, cfg sinks.GuardConfig, base string) sinks.Result {
	t.Helper()
	g := gotify.New(gotify.Config{BaseURL: base, Token: notifytype.NewSecret(faults.PlantedSecrets().GotifyToken)}, sinks.NewClient(cfg))
	r := g.Deliver(context.Background(), sinks.RenderTest())
	if r.Err != nil {
		n := faults.CountCanary(r.Err.Error(), fmt.Sprintf("%v %+v", r.Err, r.Err))
		results.Lock()
		results.secrets += n
		results.Unlock()
		require.Zero(t, n, "the token in the error")
	}
	return r
}

func count(refused bool) {
	results.Lock()
	defer results.Unlock()
	results.tried++
	if refused {
		results.refused++
	}
}

func TestSSRFCorpusIsBlocked(t *testing.T) {
	t.Parallel()
	recv := listen(t, "127.0.0.1", nil)
	p := recv.port
	corpus := []string{
		"http://127.0.0.1:" + p,
		"http://localhost:" + p,
		"http://loopback.faults.test:" + p,
		"http://[::1]:" + p,
		"http://10.0.0.1",
		"http://172.16.0.1",
		"http://192.168.1.1",
		"http://private.faults.test",
		"http://169.254.1.1",
		"http://169.254.169.254/latest/meta-data/",
		"http://metadata.faults.test",
		"http://100.64.0.1",
		"http://cgnat.faults.test",
		"http://[fd00:ec2::254]",
		"http://[fe80::1]",
		"http://[fc00::1]",
		"http://[::ffff:127.0.0.1]:" + p,
		"http://[::ffff:7f00:1]:" + p,
		"http://[::ffff:169.254.169.254]",
		"http://[::ffff:10.0.0.1]",
		"http://[64:ff9b::a9fe:a9fe]", // NAT64 of 169.254.169.254
		"http://0.0.0.0:" + p,
		"http://[::]:" + p,
		"http://2130706433:" + p,
		"http://0x7f000001:" + p,
		"http://0177.0.0.1:" + p,
		"http://017700000001:" + p,
		"http://127.1:" + p,
		"http://192.0.2.1",  // TEST-NET-1
		"http://198.18.0.1", // benchmarking
		"http://224.0.0.1",  // multicast
		"http://255.255.255.255",
	}
	cfg := sinks.GuardConfig{AllowHTTP: true}
	for _, base := range corpus {
		t.Run(base, func(t *testing.T) {
			r := deliver(t, cfg, base)
			count(r.Class == notifytype.ClassBlocked)
			if host := hostOf(base); numericSpelling(host) {
				// Go's resolver refuses an all-numeric name before asking
				// anyone, so these never reach an address; they end as
				// network (retried) rather than blocked (final at once).
				var dnsErr *net.DNSError
				if r.Class != notifytype.ClassBlocked {
					results.Lock()
					results.unresolved++
					results.Unlock()
					require.ErrorAs(t, r.Err, &dnsErr, "%s: %v", base, r.Err)
					require.True(t, dnsErr.IsNotFound, "%s: %v", base, r.Err)
				}
				results.pending.Expect(t, "ssrf/numeric-spellings-blocked", r.Class == notifytype.ClassBlocked,
					"%s ends as %s, not blocked", host, r.Class)
				return
			}
			require.Equal(t, notifytype.ClassBlocked, r.Class, "%s: %v", base, r.Err)
		})
	}
	require.Zero(t, recv.hits.Load(), "a refused destination reached the loopback receiver")
}

func hostOf(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// numericSpelling reports a host that is an IPv4 address in a spelling
// other than dotted decimal: decimal, octal or shortened.
func numericSpelling(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil || host == "" {
		return false
	}
	return strings.Trim(host, "0123456789.") == ""
}

func TestSSRFHTTPWithoutOptIn(t *testing.T) {
	t.Parallel()
	recv := listen(t, "127.0.0.1", nil)
	r := deliver(t, sinks.GuardConfig{AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, recv.URL)
	count(r.Class == notifytype.ClassBlocked)
	require.Equal(t, notifytype.ClassBlocked, r.Class, "plain http without the operator's opt-in: %v", r.Err)
	require.Zero(t, recv.hits.Load())
}

func TestSSRFRebinding(t *testing.T) {
	t.Parallel()
	recv := listen(t, "127.0.0.1", nil)
	cfg := sinks.GuardConfig{AllowHTTP: true, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	base := "http://rebind.faults.test:" + recv.port
	first := deliver(t, cfg, base)
	require.True(t, first.OK(), "the first answer is the allowed receiver: %v", first.Err)
	second := deliver(t, cfg, base)
	count(second.Class == notifytype.ClassBlocked)
	require.Equal(t, notifytype.ClassBlocked, second.Class, "the second answer is the metadata address: %v", second.Err)
	require.EqualValues(t, 1, recv.hits.Load())
}

func TestSSRFRedirectToPrivateIsNotFollowed(t *testing.T) {
	t.Parallel()
	inner := listen(t, "127.0.0.2", nil)
	for _, target := range []string{"http://169.254.169.254/latest/meta-data/", inner.URL + "/message", "http://10.0.0.1/"} {
		t.Run(target, func(t *testing.T) {
			outer := listen(t, "127.0.0.1", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target, http.StatusTemporaryRedirect)
			})
			cfg := sinks.GuardConfig{AllowHTTP: true, AllowedPrefixes: []netip.Prefix{
				netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("127.0.0.2/32")}}
			r := deliver(t, cfg, outer.URL)
			count(r.Class == notifytype.ClassRedirect)
			require.Equal(t, notifytype.ClassRedirect, r.Class, "%v", r.Err)
			require.EqualValues(t, 1, outer.hits.Load())
		})
	}
	require.Zero(t, inner.hits.Load(), "the redirect was followed")
}

// The operator allowlist lets through exactly what it names: a /32 opens
// one address, not its neighbours; the IPv4-mapped form of a prefix opens
// what the prefix does.
func TestSSRFAllowlistIsExact(t *testing.T) {
	t.Parallel()
	one := listen(t, "127.0.0.1", nil)
	two := listen(t, "127.0.0.2", nil)
	for _, tc := range []struct {
		allow        string
		oneOK, twoOK bool
	}{
		{"127.0.0.1/32", true, false},
		{"127.0.0.2/32", false, true},
		{"::ffff:127.0.0.1/128", true, false},
		{"127.0.0.0/30", true, true},
		{"10.0.0.0/8", false, false},
	} {
		cfg := sinks.GuardConfig{AllowHTTP: true, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix(tc.allow)}}
		r1, r2 := deliver(t, cfg, one.URL), deliver(t, cfg, two.URL)
		require.Equal(t, tc.oneOK, r1.OK(), "allow %s, 127.0.0.1: %v", tc.allow, r1.Err)
		require.Equal(t, tc.twoOK, r2.OK(), "allow %s, 127.0.0.2: %v", tc.allow, r2.Err)
		for _, r := range []sinks.Result{r1, r2} {
			if !r.OK() {
				require.Equal(t, notifytype.ClassBlocked, r.Class)
			}
		}
		// A named prefix never opens the metadata address.
		m := deliver(t, cfg, "http://169.254.169.254")
		count(m.Class == notifytype.ClassBlocked)
		require.Equal(t, notifytype.ClassBlocked, m.Class)
	}
}
