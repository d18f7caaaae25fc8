package apprise_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/apprise"
	"github.com/switchboard/notify/sinks/sinktest"
)

// staticDNS answers the names it knows; any other is not found (and the
// test learns of any lookup it did not expect).
type staticDNS map[string][]netip.Addr

func (d staticDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := d[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func TestHosts(t *testing.T) {
	t.Parallel()

	for u, want := range map[string][]string{
		"gotify://127.0.0.1/tok":                                 {"127.0.0.1"},
		"gotifys://u:p@[::1]:8443/tok":                           {"[::1]"},
		"gotify://::1/tok":                                       {"::1"},
		"GOTIFY://Gotify.Example.net:80/tok":                     {"Gotify.Example.net"},
		"gotify://127.0.0.1./tok":                                {"127.0.0.1."},
		"json://LOCALHOST./hook":                                 {"LOCALHOST."},
		"gotify://a@b@127.0.0.1/tok":                             nil, // refused: Apprise ends the user at the first @, Go at the last
		"gotify://127.0.0.1#x/tok":                               nil, // refused: a # before the path
		"ntfys://ntfy.internal/alerts":                           {"ntfy.internal"},
		"ntfy://mytopic":                                         nil, // ntfy.sh; the topic is no host
		"ntfy://mytopic?priority=high":                           nil,
		"ntfy://ntfy.internal?to=alerts":                         {"ntfy.internal"},
		"ntfy://ntfy.internal?mode=private":                      {"ntfy.internal"},
		"ntfy://127.0.0.1":                                       {"127.0.0.1"}, // an address needs no lookup
		"ntfy://2130706433":                                      {"2130706433"},
		"notica://token":                                         nil,
		"noticas://notica.internal/token":                        {"notica.internal"},
		"matrix://t2bottoken":                                    {"t2bottoken"}, // Apprise 1.2 needs a server here
		"zulip://bot@myorg/abcdefghijklmnopqrstuvwxyz123456":     nil,            // myorg.zulipchat.com
		"zulip://bot@127.0.0.1/abcdefghijklmnopqrstuvwxyz123456": {"127.0.0.1"},
		"mailto://u:p@example.com?SMTP=10.1.1.1":                 nil, // refused: a capital argument name
		"matrixs://user:pw@matrix.internal":                      {"matrix.internal"},
		"lametric://apikey@10.0.0.9":                             {"10.0.0.9"},
		"mailto://user:pw@mail.internal?to=a@b.net":              {"mail.internal"},
		"mailto://user:pw@example.com?smtp=10.1.1.1":             {"example.com", "10.1.1.1"},
		"tgram://123456:ABCDEF/987":                              nil, // cloud: the "host" is a bot token
		"tgram://127.0.0.1/987":                                  nil,
		"mailgun://user@sender.example.net/apikey":               nil, // the sender's domain, not a server
		"nothing here":                                           nil,
	} {
		require.Equal(t, want, apprise.Hosts(u), u)
	}
}

// TestDeliverRefusesPrivateHostsInsideAppriseURLs: issue 18 item 12. An
// allowlisted scheme whose own URL names a private host (gotify://127.0.0.1/…)
// is refused at send time as class blocked, before anything reaches the
// Apprise server, exactly as a sink whose own server is private: unless
// the operator's SWITCHBOARD_PRIVATE_HOSTS allows it. Names resolve as
// other destinations do. No error repeats the URL or its host.
func TestDeliverRefusesPrivateHostsInsideAppriseURLs(t *testing.T) {
	t.Parallel()

	dns := staticDNS{
		"gotify.internal":    {netip.MustParseAddr("10.20.0.5")},
		"mixed.example.net":  {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("192.168.1.20")},
		"public.example.net": {netip.MustParseAddr("93.184.216.34")},
	}
	ten := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	loop := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, tc := range []struct {
		url     string
		allowed []netip.Prefix
		class   notifytype.ErrorClass
	}{
		{url: "gotify://127.0.0.1/CANARYtok", class: notifytype.ClassBlocked},
		{url: "gotifys://[::1]:8443/CANARYtok", class: notifytype.ClassBlocked},
		{url: "gotify://::1/CANARYtok", class: notifytype.ClassBlocked},
		{url: "json://169.254.169.254/CANARY", class: notifytype.ClassBlocked},
		{url: "ntfys://10.0.0.7/CANARYtopic", class: notifytype.ClassBlocked},
		{url: "ntfy://gotify.internal/CANARYtopic", class: notifytype.ClassBlocked},
		{url: "gotify://gotify.internal/CANARYtok", class: notifytype.ClassBlocked},
		{url: "gotify://mixed.example.net/CANARYtok", class: notifytype.ClassBlocked},
		{url: "mailto://u:CANARY@public.example.net?smtp=127.0.0.1", class: notifytype.ClassBlocked},
		{url: "gotify://2130706433/CANARYtok", class: notifytype.ClassBlocked},
		// Trailing dots are blocked even with the loopback range allowed.
		{url: "gotify://127.0.0.1./CANARYtok", allowed: loop, class: notifytype.ClassBlocked},
		{url: "gotify://LOCALHOST./CANARYtok", allowed: loop, class: notifytype.ClassBlocked},
		{url: "gotify://localhost./CANARYtok", allowed: loop, class: notifytype.ClassBlocked},
		// The operator's allowlist lets a private host through, as it
		// does a private sink server.
		{url: "gotify://gotify.internal/CANARYtok", allowed: ten},
		{url: "gotify://127.0.0.1/CANARYtok", allowed: loop},
		{url: "gotify://public.example.net/CANARYtok"},
		{url: "tgram://CANARYbot/123"},
		{url: "ntfy://CANARYtopic"}, // ntfy.sh: the topic is not looked up
		// A name that does not resolve here is not vouched for: a network
		// error, retried.
		{url: "gotify://CANARY.unknown.example/tok", class: notifytype.ClassNetwork},
	} {
		srv := sinktest.NewServer(t, nil)
		a := apprise.New(apprise.Config{
			BaseURL:      srv.URL,
			Secret:       apprise.Secret{URLs: []string{"tgram://bot/1", tc.url}},
			PrivateHosts: tc.allowed,
			Resolver:     dns,
		}, sinktest.Client(t, sinktest.Guard()))
		r := a.Deliver(t.Context(), sinks.Message{Title: "T", Body: "B"})
		require.Equal(t, tc.class, r.Class, "%s: %v", tc.url, r.Err)
		if tc.class != notifytype.ClassNone {
			require.Empty(t, srv.Requests(), tc.url)
			require.NotContains(t, r.Err.Error(), "CANARY")
			host := apprise.Hosts(tc.url)[0]
			require.NotContains(t, r.Err.Error(), strings.Trim(host, "[]."), tc.url)
			continue
		}
		require.Len(t, srv.Requests(), 1, tc.url)
	}
}

// TestIssue24URLsNeverReachLoopback: issue 24 item 4. Each crafted URL
// that made a real Apprise connect to loopback while Switchboard checked
// a public host is either refused when saved (CheckSchemes, under the
// default allowlist) or refused as blocked when sent, with nothing
// reaching the Apprise server: a capital SMTP argument, a repeated smtp
// argument, a backslash before the host, a name resolving to loopback
// with a capital TO argument, zulip's host, and another Apprise API
// (apprise://, off the default list now: it would relay anywhere).
func TestIssue24URLsNeverReachLoopback(t *testing.T) {
	t.Parallel()

	dns := staticDNS{
		"pub.example.net":      {netip.MustParseAddr("93.184.216.34")},
		"loopback.example.net": {netip.MustParseAddr("127.0.0.1")},
	}
	for _, u := range []string{
		"mailto://u:CANARY@pub.example.net?SMTP=127.0.0.1&port=2525",
		"mailto://u:CANARY@pub.example.net?smtp=pub.example.net&smtp=127.0.0.1",
		"mailto://u:CANARY@pub.example.net?to=a@pub.example.net#&smtp=127.0.0.1",
		"mailto://u:CANARY@pub.example.net?to=a@pub.example.net;smtp=127.0.0.1",
		`gotify://pub.example.net\@127.0.0.1:8080/CANARY`,
		"ntfy://loopback.example.net:8080?TO=CANARY",
		"zulip://bot@127.0.0.1/abcdefghijklmnopqrstuvwxyzCANARY",
		"apprise://127.0.0.1:8000/CANARY",
		"gotify:////127.0.0.1/CANARY",
		"gotify://[::ffff:127.0.0.1]/CANARY",
	} {
		t.Run(u, func(t *testing.T) {
			t.Parallel()
			if err := apprise.CheckSchemes([]string{u}, apprise.DefaultAllowedSchemes); err != nil {
				require.NotContains(t, err.Error(), "CANARY")
				return
			}
			srv := sinktest.NewServer(t, nil)
			a := apprise.New(apprise.Config{BaseURL: srv.URL, Secret: apprise.Secret{URLs: []string{u}}, Resolver: dns},
				sinktest.Client(t, sinktest.Guard()))
			r := a.Deliver(t.Context(), sinks.Message{Title: "T", Body: "B"})
			require.Equal(t, notifytype.ClassBlocked, r.Class, "%v", r.Err)
			require.Empty(t, srv.Requests())
		})
	}
}
