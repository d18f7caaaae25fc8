package bench_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/gotify"
)

// answerOK answers every request 200 in the process, without a network:
// what is left to time is the client's side.
type answerOK struct{}

func (answerOK) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(`{"id":1}`)),
		Header: http.Header{}, Request: r}, nil
}

// BenchmarkGotifyAdapter times the Gotify adapter's own work on one
// delivery (sinks/gotify: the endpoint, the message encoded, the request
// built, the answer read) against a bare POST of a body of the same size
// through the same answering transport, in the same op: the network and
// the server are left out of both, so the ratio is the adapter's cost
// over the least a POST of the message costs.
func BenchmarkGotifyAdapter(b *testing.B) {
	client := &http.Client{Transport: answerOK{}}
	g := gotify.New(gotify.Config{BaseURL: "https://push.example.net/gotify", Token: notifytype.NewSecret("t")}, client)
	msg := sinks.RenderTest()
	body, err := json.Marshal(map[string]any{"title": msg.Title, "message": msg.Body, "priority": 5})
	if err != nil {
		b.Fatal(err)
	}
	var adapter, bare time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		if r := g.Deliver(b.Context(), msg); !r.OK() {
			b.Fatal(r.Err)
		}
		t1 := time.Now()
		req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, "https://push.example.net/gotify/message", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		adapter, bare = adapter+t1.Sub(t0), bare+time.Since(t1)
	}
	b.ReportMetric(float64(adapter.Nanoseconds())/1000/float64(b.N), "adapter-µs/op")
	b.ReportMetric(float64(bare.Nanoseconds())/1000/float64(b.N), "bare-µs/op")
	b.ReportMetric(float64(adapter)/float64(bare), "adapter/bare")
}
