package web

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/clocks"
	"github.com/switchboard/notify/engine/history"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/style.css static/copy.js static/sinkform.js static/tables.js static/favicon.ico
var staticFS embed.FS

// favicon serves the site's icon at /favicon.ico, where browsers ask for
// it (a 32 px PNG in an ICO container).
func favicon(w http.ResponseWriter, r *http.Request) {
	b, _ := staticFS.ReadFile("static/favicon.ico") // embedded: always there
	w.Header().Set("Content-Type", "image/x-icon")
	w.Header().Set("Cache-Control", "public, max-age=86400")
	http.ServeContent(w, r, "favicon.ico", time.Time{}, bytes.NewReader(b))
}

// server holds what every handler needs.
type server struct {
	d      httpx.Deps
	log    *slog.Logger
	clock  clocks.Clock
	secure bool // the session cookie's Secure flag: the base URL is https
	pages  map[string]*template.Template
	// dir answers the pages' questions about teams and names.
	dir *host.Directory
	// signIn is "send me a sign-in link"'s limits.
	signIn *signIn
}

// New returns the web UI: every page and form, behind the standard headers,
// the 16 KiB body limit and cross-origin protection. d.Engine, d.Accounts,
// d.Endpoints, d.Pool and d.Limiter are required; d.Auth defaults to one
// over d.Accounts and d.Endpoints.
func New(d httpx.Deps) http.Handler {
	if d.Engine == nil || d.Accounts == nil || d.Endpoints == nil || d.Pool == nil || d.Limiter == nil {
		panic("web: New needs Deps.Engine, Deps.Accounts, Deps.Endpoints, Deps.Pool and Deps.Limiter")
	}
	s := &server{d: d, log: d.Logger, clock: d.Clock, pages: parsePages(), dir: host.NewDirectory(d.Pool), signIn: newSignIn()}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.clock == nil {
		s.clock = clocks.System{}
	}
	if s.d.Auth == nil {
		s.d.Auth = &httpx.Auth{Accounts: d.Accounts, Endpoints: d.Endpoints, Clock: s.clock}
	}
	if u, err := url.Parse(d.BaseURL); err == nil && strings.EqualFold(u.Scheme, "https") {
		s.secure = true
	}

	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/sinks", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /favicon.ico", favicon)
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.requestSignInLink)
	mux.HandleFunc("GET /login/sent", s.signInSentPage)
	mux.HandleFunc("GET /login/{token}", s.confirmLogin)
	mux.HandleFunc("POST /login/{token}", s.login)
	mux.HandleFunc("POST /logout", s.logout)

	mux.Handle("GET /sinks", s.authed(s.sinksPage))
	mux.Handle("POST /sinks", s.authed(s.createSink))
	mux.Handle("POST /sinks/test", s.authed(s.testSinkSettings))
	mux.Handle("GET /sinks/{id}", s.authed(s.sinkPage))
	mux.Handle("POST /sinks/{id}", s.authed(s.editSink))
	mux.Handle("POST /sinks/{id}/enable", s.authed(s.enableSink(true)))
	mux.Handle("POST /sinks/{id}/disable", s.authed(s.enableSink(false)))
	mux.Handle("POST /sinks/{id}/delete", s.authed(s.deleteSink))
	mux.Handle("POST /sinks/{id}/test", s.authed(s.testSink))
	mux.Handle("POST /sinks/{id}/subscriptions", s.authed(s.addSubscription))
	mux.Handle("POST /sinks/{id}/subscriptions/{sub}/delete", s.authed(s.deleteSubscription))

	mux.Handle("GET /connections", s.authed(s.connectionsPage))
	mux.Handle("POST /connections", s.authed(s.createConnection))
	mux.Handle("GET /connections/{id}", s.authed(s.connectionPage))
	mux.Handle("POST /connections/{id}", s.authed(s.editConnection))
	mux.Handle("POST /connections/{id}/delete", s.authed(s.deleteConnection))

	mux.Handle("GET /endpoints", s.authed(s.endpointsPage))
	mux.Handle("GET /endpoints/{id}/credential", s.authed(s.credentialPage))
	mux.Handle("POST /endpoints/vend", s.authed(s.vend))
	mux.Handle("POST /endpoints/quick", s.authed(s.quickVend))
	mux.Handle("POST /endpoints/{id}/revoke", s.authed(s.revoke))

	mux.Handle("GET /ops", s.authed(s.opsPage))
	s.webhookRoutes(mux)
	s.mountDigests(mux)

	s.routeConfirmations(mux)
	s.routeQueues(mux)
	s.routeBoard(mux)

	// Anything else is a styled 404.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.render(w, r, http.StatusNotFound, "error", s.optionalActor(r), view{
			Title: "Page not found", Err: notifytype.NotFound("page"),
		})
	})

	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(CrossOriginDenied())
	return httpx.Headers(httpx.LimitBody(cop.Handler(requireOwnOrigin(d.BaseURL, CrossOriginDenied(), mux))))
}

// CrossOriginDenied is the styled page http.CrossOriginProtection answers a
// cross-origin form with: every surface that serves forms (the web UI,
// /demo) sets it as its deny handler.
func CrossOriginDenied() http.Handler {
	s := shellServer()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.render(w, r, http.StatusForbidden, "error", nil, view{
			Title: "Request refused",
			Err:   notifytype.Forbidden("this form was posted from another site; nothing was changed"),
		})
	})
}

// optionalActor is the signed-in human of a request that does not need
// one (the 404 page shows the menu to them), nil for none.
func (s *server) optionalActor(r *http.Request) *actor {
	p, err := s.d.Auth.Session(r.Context(), r)
	if err != nil {
		return nil
	}
	hum, err := s.d.Accounts.HumanByID(r.Context(), hostid.Number(p.HumanID))
	if err != nil {
		return nil
	}
	return &actor{P: p, Human: hum}
}

// actor is the signed-in human a handler acts for.
type actor struct {
	P     engine.Principal
	Human host.Human
}

// handler is a page or form handler for a signed-in human.
type handler func(w http.ResponseWriter, r *http.Request, a *actor)

// authed resolves the session cookie: without a valid session the browser
// goes to /login; with one, the human's request spends one token of the
// per-human limiter every management route shares.
func (s *server) authed(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.d.Auth.Session(r.Context(), r)
		if httpx.IsUnauthenticated(err) {
			s.rememberDestination(w, r)
			next := ""
			if r.Method == http.MethodGet && r.URL.RequestURI() != "/sinks" {
				next = r.URL.RequestURI() // where a sign-in returns to
			}
			http.Redirect(w, r, loginPath(next), http.StatusSeeOther)
			return
		}
		if err != nil {
			s.fail(w, r, nil, err)
			return
		}
		hum, err := s.d.Accounts.HumanByID(r.Context(), hostid.Number(p.HumanID))
		if err != nil {
			s.fail(w, r, nil, err)
			return
		}
		a := &actor{P: p, Human: hum}
		if !s.d.Limiter.Allow(hostid.Number(p.HumanID)) {
			s.fail(w, r, a, notifytype.RateLimited("too many requests; wait a moment and try again"))
			return
		}
		// Read the form once, here: a body over the limit (or one that
		// does not parse) is refused before any handler acts on it.
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil {
				var tooLarge *http.MaxBytesError
				if !errors.As(err, &tooLarge) {
					err = notifytype.InvalidArgument("body", "is not a form")
				}
				s.fail(w, r, a, err)
				return
			}
		}
		h(w, r, a)
	})
}

// destinationCookie holds the page a signed-out human asked for (a board
// link from a message), so signing in in this browser lands there rather
// than on /sinks even with a link minted elsewhere (the login-link command).
const destinationCookie = "sb_next"

// rememberDestination keeps a GET's path and query for after the sign-in,
// when safeNext accepts them.
func (s *server) rememberDestination(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.RequestURI())
	if r.Method != http.MethodGet || next == "" {
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: destinationCookie, Value: url.QueryEscape(next), Path: "/login", MaxAge: int(host.LoginLinkTTL / time.Second),
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode,
	})
}

// takeDestination returns where a sign-in goes: the form's next (the
// login link carried it), else the remembered destination, else /sinks;
// each only when safeNext accepts it. The cookie is cleared.
func (s *server) takeDestination(w http.ResponseWriter, r *http.Request) string {
	dest := safeNext(r.PostFormValue("next"))
	if c, err := r.Cookie(destinationCookie); err == nil {
		http.SetCookie(w, &http.Cookie{Name: destinationCookie, Value: "", Path: "/login", MaxAge: -1,
			HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
		if v, err := url.QueryUnescape(c.Value); err == nil && dest == "" {
			dest = safeNext(v)
		}
	}
	if dest == "" {
		return "/sinks"
	}
	return dest
}

// loginPage offers "send me a sign-in link" and says how else to get a
// login link; a signed-in human goes on to the page they asked for, or
// their sinks.
func (s *server) loginPage(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if _, err := s.d.Auth.Session(r.Context(), r); err == nil {
		http.Redirect(w, r, cmp.Or(next, "/sinks"), http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, "login", nil, view{Title: "Sign in", Data: loginData{Next: next}})
}

// loginLimited answers a login refused by the failed-auth limit: 429 with
// Retry-After.
func (s *server) loginLimited(w http.ResponseWriter, r *http.Request, err error) {
	httpx.SetRetryAfter(w, err)
	s.render(w, r, http.StatusTooManyRequests, "login", nil, view{Title: "Sign in", Err: s.public(r, err), Data: loginData{}})
}

// confirmLogin answers a login link's GET with a page whose button spends
// it (a POST): link previewers and scanners that fetch every URL of a
// message must not use up a one-time link. The page to return to (the
// link's next) rides along in the form.
func (s *server) confirmLogin(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login_confirm", nil, view{
		Title: "Sign in", LoginAction: "/login/" + url.PathEscape(r.PathValue("token")),
		Data: loginData{Next: safeNext(r.URL.Query().Get("next"))},
	})
}

// login spends a one-time login link, sets the session cookie and goes to
// the page asked for (see takeDestination), else /sinks. An unknown,
// expired or used link shows an error page: it never redirects anywhere
// but a path of this site.
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	// An unknown, expired or used link spends one of the client's failed
	// authentications and one of the link's; while either is spent, that
	// refusal is a 429. A good link is never refused by them.
	cred := httpx.CredentialKey("link", r.PathValue("token"))
	if err := s.d.AuthFailures.Spent(cred); err != nil {
		s.loginLimited(w, r, err)
		return
	}
	_, session, expires, err := s.d.Accounts.StartSession(r.Context(), r.PathValue("token"), s.clock.Now())
	if errors.Is(err, notifytype.ErrNotFound) {
		if err := s.d.AuthFailures.Fail(r, cred); err != nil {
			s.loginLimited(w, r, err)
			return
		}
		s.render(w, r, http.StatusNotFound, "login", nil, view{
			Title: "Sign in",
			Err:   notifytype.NotFound("login link (it is unknown, expired or already used)"),
			Data:  loginData{Next: safeNext(r.PostFormValue("next"))},
		})
		return
	}
	if err != nil {
		s.fail(w, r, nil, err)
		return
	}
	httpx.Authenticated(r.Context())
	http.SetCookie(w, &http.Cookie{
		Name: httpx.SessionCookie, Value: session.Reveal(), Path: "/", Expires: expires,
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, s.takeDestination(w, r), http.StatusSeeOther)
}

// logout ends the session and clears its cookie.
func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(httpx.SessionCookie); err == nil && c.Value != "" {
		if err := s.d.Accounts.EndSession(r.Context(), c.Value); err != nil {
			s.fail(w, r, nil, err)
			return
		}
	}
	http.SetCookie(w, &http.Cookie{
		Name: httpx.SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// view is what every page template gets.
type view struct {
	Title string
	Nav   string // the menu entry to mark
	Human *host.Human
	// Scope is the owner scope the page shows; ScopeText its form value.
	Scope    notifytype.OwnerScope
	CanWrite bool
	// ReadOnly explains why a team member's page has no forms.
	ReadOnly string
	// Notice is a success message; Err a refusal, shown with its code and
	// field.
	Notice string
	Err    *notifytype.Error
	// Note is a message under one input that is not a refusal (a failed
	// Send test names the input to fix).
	Note *fieldNote
	// Testing says the page answers a Send test: a refusal reads "Not
	// sent", not "Not saved".
	Testing bool
	// LoginAction is where the sign-in button of a login link posts.
	LoginAction string
	// Scopes are the owner scopes the human may pick (their own and their
	// teams'), filled in by render.
	Scopes []scopeOption
	// Warning is a caution that did not stop the action (a connection on
	// a private address).
	Warning string
	// Body is a page's content rendered elsewhere (the demo's).
	Body template.HTML
	Data any
}

// render writes page with status. The page is rendered to a buffer first,
// so a template error is a clean 500.
func (s *server) render(w http.ResponseWriter, r *http.Request, status int, page string, a *actor, v view) {
	if a != nil {
		v.Human = &a.Human
		if v.Scopes == nil && s.dir != nil {
			opts, err := s.scopeOptions(r.Context(), a)
			if err != nil {
				s.log.ErrorContext(r.Context(), "web: error listing the human's scopes", "error", err)
			}
			v.Scopes = opts
		}
	}
	var buf bytes.Buffer
	if err := s.pages[page].ExecuteTemplate(&buf, "layout", v); err != nil {
		s.log.ErrorContext(r.Context(), "web: error rendering page", "page", page, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// fail shows err on an error page with its status. Uncoded errors are
// logged and shown as "internal".
func (s *server) fail(w http.ResponseWriter, r *http.Request, a *actor, err error) {
	status := httpx.StatusOf(err)
	if status == http.StatusInternalServerError {
		s.log.ErrorContext(r.Context(), "web: request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	s.render(w, r, status, "error", a, view{Title: http.StatusText(status), Err: httpx.Public(err)})
}

// seeOther redirects after a successful POST to a fixed internal path.
// Callers build path from ids and scopes they parsed, never from text a
// request carried.
func seeOther(w http.ResponseWriter, r *http.Request, path string) {
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// scopePath is path with the owner scope as its query, for redirects and
// links; the scope was parsed, so the path is built from ids.
func scopePath(path string, scope notifytype.OwnerScope) string {
	return path + "?owner=" + url.QueryEscape(scope.String())
}

// scope reads the owner scope a page or form names in "owner", defaulting to
// the human's own.
func (a *actor) scope(r *http.Request) (notifytype.OwnerScope, error) {
	v := strings.TrimSpace(r.FormValue("owner"))
	if v == "" {
		return notifytype.Human(a.P.HumanID), nil
	}
	sc, err := notifytype.ParseOwnerScope(v)
	if err != nil {
		return notifytype.OwnerScope{}, notifytype.InvalidArgumentf("owner", "%q is not human:<id> or team:<id>", clip(v, 40))
	}
	return sc, nil
}

// access says whether the human may change scope's sinks, connections and
// endpoints, for showing forms; the engine decides every write itself. A
// scope the human has no part in is not_found.
func (s *server) access(ctx context.Context, a *actor, scope notifytype.OwnerScope) (canWrite bool, readOnly string, err error) {
	switch scope.Kind {
	case notifytype.ScopeHuman:
		if scope.ID != a.P.HumanID {
			return false, "", notifytype.NotFound("owner scope")
		}
		return true, "", nil
	case notifytype.ScopeTeam:
		role, err := s.d.Engine.Config().Directory.TeamRole(ctx, a.P.HumanID, scope.ID)
		if err != nil {
			return false, "", err
		}
		switch {
		case role == engine.RoleNone:
			return false, "", notifytype.NotFound("owner scope")
		case !role.CanConfigure():
			return false, "You are a member of this team: you can see its settings; only its owners and admins change them.", nil
		}
		return true, "", nil
	}
	return false, "", notifytype.NotFound("owner scope")
}

// pathID reads a positive id from the path; anything else is not_found.
func pathID(r *http.Request, name, what string) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, notifytype.NotFound(what)
	}
	return id, nil
}

// clip cuts text a request carried before it is quoted in a message.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

var funcs = template.FuncMap{
	"when":       when,
	"noteLabel":  noteLabel,
	"eventWords": eventWords,
	"eventLabel": eventLabel,
	"stateWords": stateWords,
	"ids": func(ids []int64) string {
		if len(ids) == 0 {
			return "any"
		}
		parts := make([]string, len(ids))
		for i, id := range ids {
			parts[i] = strconv.FormatInt(id, 10)
		}
		return strings.Join(parts, ", ")
	},
	"scopeLabel":   scopeLabel,
	"classHelp":    classHelp,
	"kindHelp":     kindClassHelp,
	"itoa":         itoa,
	"scopeOfHuman": hostid.Human,
	// dict builds a map for a partial: dict "Key" value "Key2" value2.
	"dict": func(kv ...any) map[string]any {
		m := make(map[string]any, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = kv[i+1]
		}
		return m
	},
}

// noteLabel names a notification's item for people: its title while the
// row keeps one; a finished row keeps only its place and link (the sender's
// text is not retained), so then the item its link names ("todo 12",
// "delivery 9"), else what happened in words. Never empty, so a link
// always has text to click.
func noteLabel(n history.Notification) string {
	if t := strings.TrimSpace(n.Title); t != "" {
		return t
	}
	parts := strings.Split(strings.Trim(n.LinkPath, "/"), "/")
	if k := len(parts); k >= 3 && parts[0] == "board" {
		if _, err := strconv.ParseInt(parts[k-1], 10, 64); err == nil {
			switch parts[k-2] {
			case "todos":
				return "todo " + parts[k-1]
			case "deliveries":
				return "delivery " + parts[k-1]
			case "digests":
				return "digest " + parts[k-1]
			case "queues":
				return "queue " + parts[k-1]
			}
		}
	}
	return eventWords(n.EventType)
}

// eventWords says what an event of type t reports, for people: its
// declaration's words (host.KindOf), else its name.
func eventWords(t notifytype.EventType) string {
	if k, ok := host.KindOf(t); ok {
		return k.Words
	}
	return string(t)
}

// scopeLabel names an owner scope for people.
func scopeLabel(s notifytype.OwnerScope) string {
	if s.Kind == notifytype.ScopeTeam {
		return "team " + s.ID
	}
	return "human " + s.ID
}

// pageNames are the page templates; each defines "content" inside the
// layout.
var pageNames = []string{"login", "login_confirm", "error", "sinks", "sink", "connections", "connection", "endpoints", "consent", "credential", "ops",
	"confirm", "queues", "queue", "board_todo", "board_queue", "board_notifications", "shell"}

func parsePages() map[string]*template.Template {
	base := template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/digest_fields.html"))
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		pages[name] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html"))
	}
	return pages
}

// public is a refusal as a page shows it next to its form, nil for none;
// an uncoded error is logged and shown as "internal".
func (s *server) public(r *http.Request, err error) *notifytype.Error {
	if err == nil {
		return nil
	}
	if httpx.StatusOf(err) == http.StatusInternalServerError {
		s.log.ErrorContext(r.Context(), "web: request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	return httpx.Public(err)
}

// when shows a time (or a *time.Time) in UTC, "—" for none.
func when(v any) string {
	var t time.Time
	switch v := v.(type) {
	case time.Time:
		t = v
	case *time.Time:
		if v != nil {
			t = *v
		}
	}
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// Shell is a page whose content another package rendered (the demo's),
// shown inside the web UI's layout.
type Shell struct {
	Title string
	// Nav is the menu entry to mark ("demo").
	Nav string
	// Human is the signed-in human; the navigation bar shows for them.
	Human *host.Human
	Body  template.HTML
}

// shellServer renders Shell pages; its templates are parsed once.
var shellServer = sync.OnceValue(func() *server {
	return &server{log: slog.Default(), pages: parsePages()}
})

// RenderShell writes page with status inside the web UI's layout.
func RenderShell(w http.ResponseWriter, r *http.Request, status int, page Shell) {
	shellServer().render(w, r, status, "shell", nil, view{Title: page.Title, Nav: page.Nav, Human: page.Human, Body: page.Body})
}
