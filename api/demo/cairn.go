package demo

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// cairnMaxTTL is the stand-in's longest artifact life: 3 days, less than
// the digest's default 7, so the demo shows the cap at work (D20).
const cairnMaxTTL = 3 * 24 * time.Hour

// cairnToken is the bearer the demo's Cairn connection holds.
const cairnToken = "cairn-demo-bearer-token"

// StartCairn serves a local Cairn stand-in (D20) on loopback until Close:
// GET /v1/limits, POST /v1/artifacts (201 {id, url, expires_at}) and, to
// open an artifact's link, GET /a/{id} answering its Markdown as plain
// text. Each artifact published also lands in the inbox. It returns the
// stand-in's base URL.
func (r *Receivers) StartCairn() (string, error) {
	var (
		mu        sync.Mutex
		artifacts = map[string]string{}
		base      string
	)
	authed := func(w http.ResponseWriter, req *http.Request) bool {
		if req.Header.Get("Authorization") != "Bearer "+cairnToken {
			w.WriteHeader(http.StatusUnauthorized)
			return false
		}
		return true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/limits", func(w http.ResponseWriter, req *http.Request) {
		if !authed(w, req) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int64{"max_ttl_seconds": int64(cairnMaxTTL / time.Second)})
	})
	mux.HandleFunc("POST /v1/artifacts", func(w http.ResponseWriter, req *http.Request) {
		if !authed(w, req) {
			return
		}
		var a struct {
			Name       string   `json:"name"`
			Content    string   `json:"content"`
			TTLSeconds int64    `json:"ttl_seconds"`
			Tags       []string `json:"tags"`
		}
		if err := json.NewDecoder(io.LimitReader(req.Body, 2<<20)).Decode(&a); err != nil || a.TTLSeconds <= 0 {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		id := strings.ToLower(rand.Text()[:10])
		mu.Lock()
		artifacts[id] = a.Content
		mu.Unlock()
		url := base + "/a/" + id
		r.add("cairn", a.Name, "Artifact "+url+" tagged "+strings.Join(a.Tags, ", ")+", kept "+(time.Duration(a.TTLSeconds)*time.Second).String())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": id, "url": url, "expires_at": time.Now().Add(time.Duration(a.TTLSeconds) * time.Second).UTC(),
		})
	})
	mux.HandleFunc("GET /a/{id}", func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		content, ok := artifacts[req.PathValue("id")]
		mu.Unlock()
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = io.WriteString(w, content)
	})
	var err error
	base, err = r.serve(mux)
	return base, err
}
