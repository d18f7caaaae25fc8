package web

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digest"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/notifytype"
)

// The digest pages (REQ-12 to REQ-14): /digests lists an owner scope's
// digests with a create form; /board/digests/<id> (board_digests.go) is one
// digest: its settings, a preview built now, send now, and what became of
// its latest runs. Every write goes through the engine's digest service.

func init() { pageNames = append(pageNames, "digests", "digest") }

// mountDigests adds the digest routes.
func (s *server) mountDigests(mux *http.ServeMux) {
	mux.Handle("GET /digests", s.authed(s.digestsPage))
	mux.Handle("POST /digests", s.authed(s.createDigest))
	mux.Handle("GET /board/digests/{id}", s.authed(s.digestPage))
	mux.Handle("POST /board/digests/{id}", s.authed(s.editDigest))
	mux.Handle("POST /board/digests/{id}/delete", s.authed(s.deleteDigest))
	mux.Handle("POST /board/digests/{id}/send", s.authed(s.sendDigestNow))
}

// digestForm is the digest form as typed.
type digestForm struct {
	Name, Schedule string
	QueueIDs       []int64
	SinkIDs        []int64
	CairnID        string
	SkipWhenQuiet  bool
	ThresholdMins  string
}

func readDigestForm(r *http.Request) digestForm {
	return digestForm{
		Name: r.PostFormValue("name"), Schedule: r.PostFormValue("schedule"),
		QueueIDs: formIDs(r, "queue_ids"), SinkIDs: formIDs(r, "sink_ids"),
		CairnID: r.PostFormValue("cairn_connection_id"), SkipWhenQuiet: r.PostFormValue("skip_when_quiet") != "",
		ThresholdMins: strings.TrimSpace(r.PostFormValue("quiet_threshold_minutes")),
	}
}

// formIDs reads every value of a checkbox list; a value that is not an id
// is dropped (it names nothing the form offered).
func formIDs(r *http.Request, name string) []int64 {
	var out []int64
	for _, v := range r.PostForm[name] {
		if id, err := strconv.ParseInt(v, 10, 64); err == nil && id > 0 {
			out = append(out, id)
		}
	}
	return out
}

func (f digestForm) cairn() (int64, error) {
	if f.CairnID == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(f.CairnID, 10, 64)
	if err != nil || id < 0 {
		return 0, notifytype.InvalidArgument("cairn_connection_id", "choose a Cairn connection, or none")
	}
	return id, nil
}

func (f digestForm) threshold() (time.Duration, error) {
	if f.ThresholdMins == "" {
		return digests.QuietThresholdDefault, nil
	}
	n, err := strconv.Atoi(f.ThresholdMins)
	if err != nil || n <= 0 {
		return 0, notifytype.InvalidArgument("quiet_threshold", "must be a whole number of minutes, 1 to 10080")
	}
	return time.Duration(n) * time.Minute, nil
}

func digestFormOf(d digests.Digest) digestForm {
	f := digestForm{
		Name: d.Name, Schedule: d.Schedule, QueueIDs: d.QueueIDs, SinkIDs: d.SinkIDs, SkipWhenQuiet: d.SkipWhenQuiet,
		ThresholdMins: strconv.Itoa(int(d.QuietThreshold / time.Minute)),
	}
	if d.CairnConnectionID > 0 {
		f.CairnID = strconv.FormatInt(d.CairnConnectionID, 10)
	}
	return f
}

// digestChoices are what a digest form offers: the scope's queues, sinks
// and Cairn connections.
type digestChoices struct {
	Queues      []digest.Queue
	QueuesWhy   string // why the queues could not be listed
	Sinks       []engine.Sink
	Connections []engine.Connection
}

func (s *server) choices(r *http.Request, a *actor, scope notifytype.OwnerScope) (digestChoices, error) {
	ctx := r.Context()
	var c digestChoices
	var err error
	if c.Sinks, err = s.d.Engine.ListSinks(ctx, a.P, scope); err != nil {
		return c, err
	}
	conns, err := s.d.Engine.ListConnections(ctx, a.P, scope)
	if err != nil {
		return c, err
	}
	for _, cn := range conns {
		if cn.Kind == engine.KindCairn {
			c.Connections = append(c.Connections, cn)
		}
	}
	if src := s.d.Digests.Config().Sources; src != nil {
		if c.Queues, err = src.Queues(ctx, scope); err != nil {
			s.log.WarnContext(ctx, "web: error listing queues for the digest form", "error", err)
			c.QueuesWhy = "the queues could not be listed just now"
		}
	} else {
		c.QueuesWhy = "this instance has no queue source; the digest covers every queue of the scope"
	}
	return c, nil
}

// digestsData is the digests page.
type digestsData struct {
	Digests []digestRow
	Choices digestChoices
	Form    digestForm
	Max     int
}

func (s *server) digestsPage(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.renderDigests(w, r, a, scope, http.StatusOK, digestForm{SkipWhenQuiet: true, ThresholdMins: "60"}, nil)
}

func (s *server) renderDigests(w http.ResponseWriter, r *http.Request, a *actor, scope notifytype.OwnerScope, status int, form digestForm, refusal error) {
	ctx := r.Context()
	canWrite, readOnly, err := s.access(ctx, a, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	ds, err := s.d.Digests.List(ctx, a.P, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	ch, err := s.choices(r, a, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	rows := make([]digestRow, len(ds))
	for i, d := range ds {
		runs, err := s.d.Digests.Runs(ctx, a.P, d.ID, 10)
		if err != nil {
			s.fail(w, r, a, err)
			return
		}
		rows[i] = digestRow{Digest: d, digestFacts: factsOf(d, runs, ch)}
	}
	s.render(w, r, status, "digests", a, view{
		Title: "Digests", Nav: "digests", Scope: scope, CanWrite: canWrite, ReadOnly: readOnly,
		Notice: noticeOf(r), Err: s.public(r, refusal), Data: digestsData{Digests: rows, Choices: ch, Form: form, Max: digests.MaxPerScope},
	})
}

func (s *server) createDigest(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form := readDigestForm(r)
	var d digests.Digest
	cairn, err := form.cairn()
	var threshold time.Duration
	if err == nil {
		threshold, err = form.threshold()
	}
	if err == nil {
		d, err = s.d.Digests.Create(r.Context(), a.P, digests.Input{
			Owner: scope, Name: form.Name, Schedule: form.Schedule, QueueIDs: form.QueueIDs, SinkIDs: form.SinkIDs,
			CairnConnectionID: cairn, SkipWhenQuiet: &form.SkipWhenQuiet, QuietThreshold: threshold,
		})
	}
	if err != nil {
		s.renderDigests(w, r, a, scope, httpx.StatusOf(err), form, err)
		return
	}
	seeOther(w, r, "/board/digests/"+strconv.FormatInt(d.ID, 10))
}

// digestRow is one digest of the list, with the facts its page shows.
type digestRow struct {
	digests.Digest
	digestFacts
}

// has reports whether ids holds id, for checkboxes.
func has(ids []int64, id int64) bool { return slices.Contains(ids, id) }

func init() {
	funcs["has"] = has
	funcs["inZone"] = inZone
}
