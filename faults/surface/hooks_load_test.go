package surface_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/host"
)

// hookMarker titles each delivery the hook senders post, followed by its
// number, so the receiver can tell which delivery a rule notify was for.
const hookMarker = "faultshook-"

var hookMarkerRE = regexp.MustCompile(hookMarker + `(\d+)`)

// hookLoad is the /hooks/{id} half of the load run: senders post signed
// deliveries at a bounded rate, one in ten badly signed, one in ten from
// an untrusted sender (a quarantine storm) and one in fifty over the 256
// KiB bound, while the REST flood goes on.
type hookLoad struct {
	s       *server
	hookID  int64
	secret  string
	sinks   int // the webhook's rules spread notifies over this many sinks
	client  *http.Client
	next    atomic.Int64
	mu      sync.Mutex
	lat     []time.Duration
	valid   []int64 // numbers of the trusted, well-signed deliveries answered 202
	counts  map[string]int
	answers []string // unexpected answers
}

// newHookLoad makes, through the operator API as the sinks' owner, a
// webhook trusting "loadbot" whose rules notify sink drain-(n mod sinks)
// of every delivery numbered n, and subscribes drain-0 to quarantines.
func newHookLoad(t *testing.T, s *server, owner person, sinkIDs []int64) *hookLoad {
	t.Helper()
	var hook struct {
		ID     int64  `json:"id"`
		Secret string `json:"secret"`
	}
	s.api(t, owner, http.MethodPost, "/api/v1/webhooks", map[string]any{
		"owner": owner.scope.String(), "name": "load", "trusted_senders": []string{"loadbot"}}, &hook, http.StatusCreated)
	for i := range sinkIDs {
		s.api(t, owner, http.MethodPost, fmt.Sprintf("/api/v1/webhooks/%d/rules", hook.ID), map[string]any{
			"name": fmt.Sprintf("spread %d", i), "expr": fmt.Sprintf(`.action == "opened" and .issue.number %% %d == %d`, len(sinkIDs), i),
			"action": map[string]any{"notify": fmt.Sprintf("drain-%d", i)},
		}, nil, http.StatusCreated)
	}
	s.api(t, owner, http.MethodPost, fmt.Sprintf("/api/v1/sinks/%d/subscriptions", sinkIDs[0]),
		map[string]any{"event_types": []string{"delivery.quarantined"}}, nil, http.StatusCreated)
	return &hookLoad{
		s: s, hookID: hook.ID, secret: hook.Secret, sinks: len(sinkIDs), counts: map[string]int{},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 30 * time.Second},
	}
}

// run posts from senders workers, each at perSecond, until deadline.
func (h *hookLoad) run(wg *sync.WaitGroup, senders, perSecond int, deadline time.Time) {
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second / time.Duration(perSecond))
			defer tick.Stop()
			for time.Now().Before(deadline) {
				h.post(h.next.Add(1))
				<-tick.C
			}
		}()
	}
}

// post sends delivery n, of the kind its number makes it, and records the
// answer.
func (h *hookLoad) post(n int64) {
	kind, sender, want := "valid", "loadbot", http.StatusAccepted
	switch {
	case n%50 == 0:
		kind, want = "oversize", http.StatusRequestEntityTooLarge
	case n%10 == 3:
		kind, want = "forged", http.StatusForbidden
	case n%10 == 7:
		kind, sender = "untrusted", "mallory"
	}
	payload := map[string]any{
		"action": "opened", "sender": map[string]any{"login": sender},
		"repository": map[string]any{"full_name": "acme/load"},
		"issue":      map[string]any{"number": n, "title": hookMarker + strconv.FormatInt(n, 10)},
	}
	if kind == "oversize" {
		payload["padding"] = strings.Repeat("x", host.DeliveryMaxBytes)
	}
	body, _ := json.Marshal(payload)
	// Signed as the README's curl signs (Standard Webhooks), not through
	// host.Sign: "v1," and the base64 HMAC of "<id>.<timestamp>.<body>".
	id, ts := "msg_load_"+strconv.FormatInt(n, 10), strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(h.secret))
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	sig := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if kind == "forged" {
		sig = "v1," + base64.StdEncoding.EncodeToString(make([]byte, 32))
	}
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/hooks/%d", h.s.url, h.hookID), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", sig)
	start := time.Now()
	resp, err := h.client.Do(req)
	took := time.Since(start)
	var answer []byte
	status := 0
	if err == nil {
		answer, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		status = resp.StatusCode
	}
	h.s.mu.Lock()
	h.s.bodies = append(h.s.bodies, string(answer))
	h.s.mu.Unlock()

	h.mu.Lock()
	defer h.mu.Unlock()
	h.lat = append(h.lat, took)
	if status != want {
		h.answers = append(h.answers, fmt.Sprintf("%s delivery %d: %d %v %.200s", kind, n, status, err, answer))
		return
	}
	var got host.Received
	if want == http.StatusAccepted {
		_ = json.Unmarshal(answer, &got)
		wantOutcome := host.OutcomeUnrouted // the rules notify; none routes
		if kind == "untrusted" {
			wantOutcome = host.OutcomeQuarantined
		}
		if got.Outcome != wantOutcome || got.DeliveryID <= 0 {
			h.answers = append(h.answers, fmt.Sprintf("%s delivery %d: %s", kind, n, answer))
			return
		}
	}
	h.counts[kind]++
	if kind == "valid" {
		h.valid = append(h.valid, n)
	}
}

// hookResult is what the hook load came to once the outbox drained.
type hookResult struct {
	posted, lost, dups int
	bad                int // forged signatures and oversize bodies
	p50, p99           time.Duration
	figures            []string
}

// check verifies, after the drain, that the limits held and nothing was
// lost: each refused delivery stored nothing, each accepted one is
// stored with its outcome, each trusted one's rule notify reached its
// sink exactly once, and the quarantine storm is one message that counts
// every quarantined delivery (D7).
func (h *hookLoad) check(t *testing.T, recv *faults.Receiver) hookResult {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	ctx := context.Background()
	lat := slices.Clone(h.lat)
	slices.Sort(lat)
	r := hookResult{posted: len(lat), p50: percentile(lat, 0.50), p99: percentile(lat, 0.99), bad: h.counts["forged"] + h.counts["oversize"]}
	require.Empty(t, h.answers, "/hooks answers other than the limits say")
	require.Positive(t, h.counts["valid"])
	require.Positive(t, h.counts["forged"])
	require.Positive(t, h.counts["untrusted"])

	var stored, unrouted, quarantined int
	require.NoError(t, h.s.w.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE outcome = 'unrouted'),
		count(*) FILTER (WHERE outcome = 'quarantined') FROM webhook_deliveries WHERE webhook_id = $1`, h.hookID).
		Scan(&stored, &unrouted, &quarantined))
	require.Equal(t, h.counts["valid"]+h.counts["untrusted"], stored, "only accepted deliveries are stored (forged and oversize ones change nothing)")
	require.Equal(t, h.counts["valid"], unrouted)
	require.Equal(t, h.counts["untrusted"], quarantined)

	// Each trusted delivery's rule notify: one row, delivered, seen once.
	var rows, delivered int
	require.NoError(t, h.s.w.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'delivered')
		FROM switchboard.outbox WHERE event_type = 'rule.notify'`).Scan(&rows, &delivered))
	seen := map[int64]int{}
	for title, n := range recv.OtherTitles() {
		if m := hookMarkerRE.FindStringSubmatch(title); m != nil {
			id, _ := strconv.ParseInt(m[1], 10, 64)
			seen[id] += n
		}
	}
	for _, n := range h.valid {
		switch c := seen[n]; {
		case c == 0:
			r.lost++
		case c > 1:
			r.dups += c - 1
		}
	}
	require.Equal(t, len(h.valid), rows, "one rule notify per trusted delivery")
	require.Equal(t, rows, delivered, "every rule notify delivered")

	// The quarantine storm is one row, waiting out its 10-minute window,
	// that stands for every quarantined delivery.
	var stormRows, stormCount int
	var dueIn float64
	require.NoError(t, h.s.w.Pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(count), 0),
		coalesce(extract(epoch FROM max(due_at) - now()), 0)::float8 FROM switchboard.outbox WHERE event_type = 'delivery.quarantined'`).
		Scan(&stormRows, &stormCount, &dueIn))
	require.Equal(t, 1, stormRows, "a quarantine storm is one message")
	require.Equal(t, quarantined, stormCount, "the storm's message counts every quarantined delivery")
	require.Positive(t, dueIn, "the storm's message waits for its window to close")

	r.figures = append(r.figures,
		fmt.Sprintf("/hooks/{id}: %d signed deliveries posted meanwhile: p50 %.1f ms, p99 %.1f ms", r.posted, ms(r.p50), ms(r.p99)),
		fmt.Sprintf("/hooks/{id}: %d trusted accepted, each stored and its rule notify delivered once (%d lost, %d twice); "+
			"%d forged signatures answered 403 and %d bodies over 256 KiB answered 413, none stored",
			h.counts["valid"], r.lost, r.dups, h.counts["forged"], h.counts["oversize"]),
		fmt.Sprintf("/hooks/{id}: %d deliveries from an untrusted sender quarantined, announced by 1 message counting %d, due when its window closes (in %.0f s)",
			quarantined, stormCount, dueIn))
	return r
}
