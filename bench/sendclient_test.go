package bench_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/switchboard/notify/bench/internal/rig"
	"github.com/switchboard/notify/sinks"
)

// BenchmarkGuardedClientPost times one POST through the guarded client
// every delivery goes through (sinks.NewClient: the SSRF guard, the scheme
// check, the attempt's timeout) against a bare http.Transport posting the
// same body to the same server, one request after another on a kept
// connection. The server is in the process, so both sides count.
func BenchmarkGuardedClientPost(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":1}`))
	}))
	defer srv.Close()
	body := bytes.Repeat([]byte("x"), 400)
	bare := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer bare.CloseIdleConnections()
	guarded := sinks.NewClient(sinks.GuardConfig{AllowHTTP: true, AllowedPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	defer guarded.CloseIdleConnections()
	for _, tc := range []struct {
		name string
		c    *http.Client
	}{{"bare_transport", bare}, {"guarded", guarded}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := rig.ProcessCPU()
			for b.Loop() {
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/message", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := tc.c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			b.ReportMetric(float64(rig.ProcessCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
