package notifytest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/switchboard/notify/engine"
)

// GotifyMessage is one message the stand-in received.
type GotifyMessage struct {
	Title    string
	Message  string
	Priority int
}

// Gotify is a stand-in Gotify server on loopback: POST /message with the
// application token in X-Gotify-Key, as the engine sends; another token
// is answered 401, as Gotify does. It closes when the test ends.
type Gotify struct {
	// URL is the server's base URL: a connection's BaseURL.
	URL string
	// Token is the application token it accepts: a connection's Secret.
	Token string

	mu       sync.Mutex
	messages []GotifyMessage
}

// NewGotify starts a stand-in Gotify server for tb.
func NewGotify(tb testing.TB) *Gotify {
	tb.Helper()
	g := &Gotify{Token: "notifytest-app-token"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/message" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("X-Gotify-Key") != g.Token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var m GotifyMessage
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, "bad JSON", http.StatusBadRequest)
			return
		}
		g.mu.Lock()
		g.messages = append(g.messages, m)
		id := len(g.messages)
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "title": m.Title, "message": m.Message, "priority": m.Priority})
	}))
	tb.Cleanup(srv.Close)
	g.URL = srv.URL
	return g
}

// Messages returns what the stand-in received so far, oldest first.
func (g *Gotify) Messages() []GotifyMessage {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.messages)
}

// Allow lets cfg's engine reach the stand-in: plain HTTP, and loopback as
// a private host the operator allows. A real Gotify server is reached
// over HTTPS and needs neither.
func (g *Gotify) Allow(cfg *engine.Config) {
	cfg.PushAllowHTTP = true
	cfg.PrivateHosts = append(cfg.PrivateHosts, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"))
}
