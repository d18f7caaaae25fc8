package demo

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Received is one message a local receiver got.
type Received struct {
	At       time.Time `json:"at"`
	Receiver string    `json:"receiver"`
	Title    string    `json:"title"`
	Body     string    `json:"body"`
}

// Receivers are the local Gotify and Apprise stand-ins.
type Receivers struct {
	GotifyURL  string
	AppriseURL string

	mu    sync.Mutex
	inbox []Received
	srvs  []*http.Server
}

// inboxSize bounds what the receivers remember.
const inboxSize = 50

// StartReceivers listens on two loopback ports and serves the stand-ins
// until Close.
func StartReceivers() (*Receivers, error) {
	r := &Receivers{}
	gotify := http.NewServeMux()
	gotify.HandleFunc("POST /message", func(w http.ResponseWriter, req *http.Request) {
		var m struct{ Title, Message string }
		if err := json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&m); err != nil || req.Header.Get("X-Gotify-Key") == "" {
			http.Error(w, `{"error":"Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		r.add("gotify", m.Title, m.Message)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":1}`)
	})
	apprise := http.NewServeMux()
	apprise.HandleFunc("POST /notify/{key}", func(w http.ResponseWriter, req *http.Request) {
		var m struct{ Title, Body string }
		if err := json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&m); err != nil {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		r.add("apprise", m.Title, m.Body)
		_, _ = io.WriteString(w, `{"success":true}`)
	})
	var err error
	if r.GotifyURL, err = r.serve(gotify); err != nil {
		return nil, err
	}
	if r.AppriseURL, err = r.serve(apprise); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Receivers) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	r.srvs = append(r.srvs, srv)
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

func (r *Receivers) add(receiver, title, body string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inbox = append(r.inbox, Received{At: time.Now(), Receiver: receiver, Title: title, Body: body})
	if len(r.inbox) > inboxSize {
		r.inbox = r.inbox[len(r.inbox)-inboxSize:]
	}
}

// Inbox returns what the receivers got, newest first.
func (r *Receivers) Inbox() []Received {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Received, len(r.inbox))
	for i, m := range r.inbox {
		out[len(r.inbox)-1-i] = m
	}
	return out
}

// Close stops the receivers.
func (r *Receivers) Close() {
	for _, s := range r.srvs {
		_ = s.Close()
	}
}
