package faults

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"testing"
)

// RowMarker is the title prefix InsertRows gives each row, followed by its
// outbox id, so a receiver can tell which row a message was for.
const RowMarker = "faultsrow-"

var rowMarkerRE = regexp.MustCompile(RowMarker + `(\d+)`)

// Receiver is a loopback Gotify-shaped server (POST /message with
// X-Gotify-Key, answering 200 with the stored message as JSON) that counts
// the messages it got for each outbox row.
type Receiver struct {
	URL string

	token string
	mu    sync.Mutex
	seen  map[int64]int
	total int
	other map[string]int // messages for no row, by title
	// Distinct is signalled (without blocking) whenever a row arrives for
	// the first time.
	Distinct chan struct{}
}

// NewReceiver starts a receiver that accepts token, closed at cleanup.
func NewReceiver(t testing.TB, token string) *Receiver {
	t.Helper()
	r := &Receiver{token: token, seen: map[int64]int{}, other: map[string]int{}, Distinct: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/message" {
		http.NotFound(w, req)
		return
	}
	if req.Header.Get("X-Gotify-Key") != r.token {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"Unauthorized","errorCode":401,"errorDescription":"you need to provide a valid access token"}`)
		return
	}
	var msg struct {
		Title    string `json:"title"`
		Message  string `json:"message"`
		Priority int    `json:"priority"`
	}
	if err := json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&msg); err != nil || msg.Message == "" {
		http.Error(w, `{"error":"Bad Request","errorCode":400}`, http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.total++
	first := false
	if m := rowMarkerRE.FindStringSubmatch(msg.Title); m != nil {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		r.seen[id]++
		first = r.seen[id] == 1
	} else {
		r.other[msg.Title]++
	}
	n := r.total
	r.mu.Unlock()
	if first {
		select {
		case r.Distinct <- struct{}{}:
		default:
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": n, "appid": 1, "title": msg.Title, "message": msg.Message, "priority": msg.Priority})
}

// Counts returns how many messages each row got, the rows seen at least
// once, and the duplicates (messages beyond the first of a row).
func (r *Receiver) Counts() (seen map[int64]int, distinct, duplicates int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen = make(map[int64]int, len(r.seen))
	for id, n := range r.seen {
		seen[id] = n
		duplicates += n - 1
	}
	return seen, len(r.seen), duplicates
}

// OtherTitles returns how many messages the receiver got for each title
// that names no row (digests, rule notifies).
func (r *Receiver) OtherTitles() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.other))
	for t, n := range r.other {
		out[t] = n
	}
	return out
}

// DistinctRows is how many rows arrived at least once.
func (r *Receiver) DistinctRows() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}
