package web

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/pages"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// "Send me a sign-in link": a signed-out person types their email; when it
// is a human's with an enabled sink of their own, a one-time login link
// (the same kind the login-link command prints: single use, 15 minutes) is
// delivered through that sink, so a phone that opened a board link gets in
// without an operator. The answer is the same whether or not the email is
// known, and it comes before anything is looked up (the lookup, minting
// and sending run after the answer), so neither its words nor its timing
// say whether the email exists.
//
// Limits: per client address (a visible 429, the same for any email),
// per typed email (silent: the answer stays the same) in this instance,
// and per human in the database: at most signInLinksPerHuman links minted
// within 15 minutes, across instances (host.Accounts.MintLoginLinkCapped).
const (
	// signInPerAddressBurst requests from one address, one more every
	// signInPerAddressEvery.
	signInPerAddressBurst = 5
	signInPerAddressEvery = 3 * time.Minute
	// signInPerEmailBurst requests for one email, one more every
	// signInPerEmailEvery.
	signInPerEmailBurst = 3
	signInPerEmailEvery = 5 * time.Minute
	// signInLinksPerHuman is the most links minted for one human within
	// host.LoginLinkTTL by this route (the login-link command's count too).
	signInLinksPerHuman = 3
	// signInInFlight is how many sends may run at once; a request beyond
	// them is answered the same and sends nothing.
	signInInFlight = 8
	// signInTimeout bounds one send (lookup, minting, the sinks).
	signInTimeout = time.Minute
	// emailMaxLen is the longest email read.
	emailMaxLen = 254
)

// signInSends counts the sends running, so tests can wait for them.
var signInSends = newRunning()

// running counts goroutines running and waits until none is. Unlike a
// sync.WaitGroup it may be waited on while another goroutine adds to it
// from zero: the package's tests run in parallel, and one test's wait met
// another test's send (a WaitGroup panics then: "reused before previous
// Wait has returned").
type running struct {
	mu   sync.Mutex
	idle *sync.Cond
	n    int
}

func newRunning() *running {
	r := &running{}
	r.idle = sync.NewCond(&r.mu)
	return r
}

func (r *running) add() {
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
}

func (r *running) done() {
	r.mu.Lock()
	if r.n--; r.n == 0 {
		r.idle.Broadcast()
	}
	r.mu.Unlock()
}

// wait returns once no goroutine counted is running.
func (r *running) wait() {
	r.mu.Lock()
	for r.n > 0 {
		r.idle.Wait()
	}
	r.mu.Unlock()
}

// signIn is the state of "send me a sign-in link" in one web UI.
type signIn struct {
	perAddress, perEmail *keyedLimiter
	slots                chan struct{}
}

func newSignIn() *signIn {
	return &signIn{
		perAddress: newKeyedLimiter(rate.Every(signInPerAddressEvery), signInPerAddressBurst),
		perEmail:   newKeyedLimiter(rate.Every(signInPerEmailEvery), signInPerEmailBurst),
		slots:      make(chan struct{}, signInInFlight),
	}
}

// keyedLimiter is a token bucket (golang.org/x/time/rate) per key, made
// full on first use; once it keeps more than keyedLimiterSweepAt keys, the
// full ones are forgotten, so memory stays bounded by the keys that are
// actually being limited.
type keyedLimiter struct {
	mu    sync.Mutex
	limit rate.Limit
	burst int
	m     map[string]*rate.Limiter
}

const keyedLimiterSweepAt = 10_000

func newKeyedLimiter(limit rate.Limit, burst int) *keyedLimiter {
	return &keyedLimiter{limit: limit, burst: burst, m: map[string]*rate.Limiter{}}
}

// allow spends one token of key's bucket at now, reporting whether there
// was one.
func (k *keyedLimiter) allow(key string, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	lim, ok := k.m[key]
	if !ok {
		if len(k.m) >= keyedLimiterSweepAt {
			for key, l := range k.m {
				if l.TokensAt(now) >= float64(k.burst) {
					delete(k.m, key)
				}
			}
		}
		lim = rate.NewLimiter(k.limit, k.burst)
		k.m[key] = lim
	}
	return lim.AllowN(now, 1)
}

// safeNext is v when it is a path of this site to return to after signing
// in, "" otherwise: it starts with one slash and no second slash or
// backslash (a browser reads "//host" and "/\host" as another host), it
// has no scheme, host, control character or white space (a browser drops
// a tab or a newline, making "/\t/host" "//host"), it is at most 512 bytes
// of UTF-8, and it is not a sign-in or sign-out page.
func safeNext(v string) string {
	if len(v) < 1 || len(v) > 512 || v[0] != '/' || !utf8.ValidString(v) {
		return ""
	}
	if len(v) > 1 && (v[1] == '/' || v[1] == '\\') {
		return ""
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f || r == '\\' || (r >= 0x80 && r <= 0x9f) || r == '\u2028' || r == '\u2029' {
			return ""
		}
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") {
		return ""
	}
	if p := u.Path; p == "/login" || strings.HasPrefix(p, "/login/") || p == "/logout" {
		return ""
	}
	return v
}

// loginPath is /login, with next when there is a page to return to.
func loginPath(next string) string {
	if next = safeNext(next); next == "" {
		return "/login"
	}
	return "/login?next=" + url.QueryEscape(next)
}

// loginData is the sign-in page.
type loginData struct {
	// Next is the page to return to after signing in ("" for none).
	Next string
	// Email is what was typed, shown again after a refusal.
	Email string
	// Sent says a request was answered: the page says a link may be on
	// its way.
	Sent bool
	// Until is when a link sent now stops working, in words.
	Until string
}

// linkUntil is when a login link minted at now stops working, in words,
// with its zone (UTC: a signed-out person's zone is not known); the minute
// is rounded down, so the words never promise more than the link keeps.
func linkUntil(now time.Time) string {
	return now.Add(host.LoginLinkTTL).UTC().Format("15:04 MST")
}

// requestSignInLink answers "send me a sign-in link". A refusal about the
// email's form or the client's rate shows the page again; anything else
// is answered the same (a redirect to the "sent" page), and the send runs
// after the answer.
func (s *server) requestSignInLink(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.render(w, r, http.StatusBadRequest, "login", nil, view{Title: "Sign in",
			Err: notifytype.InvalidArgument("email", "the form could not be read"), Data: loginData{}})
		return
	}
	next := safeNext(r.PostFormValue("next"))
	email := strings.TrimSpace(r.PostFormValue("email"))
	data := loginData{Next: next, Email: clip(email, emailMaxLen)}
	if at := strings.IndexByte(email, '@'); at <= 0 || at == len(email)-1 || len(email) > emailMaxLen || !utf8.ValidString(email) {
		s.render(w, r, http.StatusBadRequest, "login", nil, view{Title: "Sign in",
			Err: notifytype.InvalidArgument("email", "type the email address you are known by here, like ada@example.net"), Data: data})
		return
	}
	now := s.clock.Now()
	if !s.signIn.perAddress.allow(httpx.ClientAddr(r), now) {
		w.Header().Set("Retry-After", "180")
		s.render(w, r, http.StatusTooManyRequests, "login", nil, view{Title: "Sign in",
			Err: notifytype.RateLimited("too many sign-in links asked from this address; wait a few minutes"), Data: data})
		return
	}
	if s.signIn.perEmail.allow(strings.ToLower(email), now) {
		select {
		case s.signIn.slots <- struct{}{}:
			signInSends.add()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), signInTimeout)
			go func() {
				defer signInSends.done()
				defer func() { <-s.signIn.slots }()
				defer cancel()
				s.sendSignInLink(ctx, email, next)
			}()
		default:
			s.log.WarnContext(r.Context(), "web: sign-in link not sent: too many sends at once")
		}
	}
	seeOther(w, r, "/login/sent"+strings.TrimPrefix(loginPath(next), "/login"))
}

// sendSignInLink mints a login link for the human with email and delivers
// it through their own sinks; an unknown email, a human without an enabled
// sink or over the cap sends nothing. Nothing of the link is logged.
func (s *server) sendSignInLink(ctx context.Context, email, next string) {
	h, err := s.d.Accounts.HumanByEmailFold(ctx, email)
	if err != nil {
		if !errors.Is(err, notifytype.ErrNotFound) {
			s.log.ErrorContext(ctx, "web: sign-in link: error finding the human", "error", err)
		}
		return
	}
	sinks, err := s.d.Engine.ListSinks(ctx, engine.HumanPrincipal(hostid.String(h.ID)), hostid.Human(h.ID))
	if err != nil {
		s.log.ErrorContext(ctx, "web: sign-in link: error listing sinks", "human_id", h.ID, "error", err)
		return
	}
	enabled := false
	for _, sk := range sinks {
		enabled = enabled || sk.Enabled
	}
	if !enabled {
		s.log.InfoContext(ctx, "web: sign-in link asked for a human with no enabled sink", "human_id", h.ID)
		return
	}
	tok, expires, ok, err := s.d.Accounts.MintLoginLinkCapped(ctx, h.ID, signInLinksPerHuman)
	if err != nil {
		s.log.ErrorContext(ctx, "web: sign-in link: error minting", "human_id", h.ID, "error", err)
		return
	}
	if !ok {
		s.log.InfoContext(ctx, "web: sign-in link not sent: the human has enough live links", "human_id", h.ID)
		return
	}
	link := strings.TrimRight(s.baseURL(), "/") + "/login/" + tok.Reveal()
	if next != "" {
		link += "?next=" + url.QueryEscape(next)
	}
	n, err := pages.SendSignInLink(ctx, s.d.Engine, hostid.String(h.ID), link, expires.UTC().Format("15:04 MST"))
	if err != nil {
		s.log.ErrorContext(ctx, "web: sign-in link: error sending", "human_id", h.ID, "error", err)
		return
	}
	s.log.InfoContext(ctx, "web: sign-in link sent", "human_id", h.ID, "sinks", n)
}

// baseURL is where links to this UI point: SWITCHBOARD_BASE_URL.
func (s *server) baseURL() string {
	if s.d.BaseURL != "" {
		return s.d.BaseURL
	}
	return s.d.Engine.Config().BaseURL
}

// signInSentPage says a link may be on its way, the same words whatever
// the email was.
func (s *server) signInSentPage(w http.ResponseWriter, r *http.Request) {
	if _, err := s.d.Auth.Session(r.Context(), r); err == nil {
		http.Redirect(w, r, cmp.Or(safeNext(r.URL.Query().Get("next")), "/sinks"), http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, "login", nil, view{Title: "Check your phone", Data: loginData{
		Next: safeNext(r.URL.Query().Get("next")), Sent: true, Until: linkUntil(s.clock.Now()),
	}})
}
