package web

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/warnings"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// deliveriesShown is how many delivery records a sink's page lists.
const deliveriesShown = 20

// newConnection is the connection_id value that asks to create the
// connection with the sink (the guided start).
const newConnection = "new"

// sinkForm is the sink create and edit form as the human typed it.
// ConnName and ConnURL are a connection created with the sink (when
// ConnectionID is newConnection); its secret is read from the request and
// never kept here, so it is never shown again.
type sinkForm struct {
	Name, Kind, ConnectionID                  string
	ConnName, ConnURL                         string
	Enabled                                   bool
	PriorityLow, PriorityNormal, PriorityHigh string
	ConfigKey, Tag                            string
	BudgetPerHour, BudgetBurst                string
}

func readSinkForm(r *http.Request) sinkForm {
	return sinkForm{
		Name: r.PostFormValue("name"), Kind: r.PostFormValue("kind"), ConnectionID: r.PostFormValue("connection_id"),
		ConnName: r.PostFormValue("conn_name"), ConnURL: strings.TrimSpace(r.PostFormValue("account_key")),
		Enabled:     r.PostFormValue("enabled") != "",
		PriorityLow: r.PostFormValue("priority_low"), PriorityNormal: r.PostFormValue("priority_normal"),
		PriorityHigh: r.PostFormValue("priority_high"),
		ConfigKey:    r.PostFormValue("config_key"), Tag: r.PostFormValue("tag"),
		BudgetPerHour: r.PostFormValue("budget_per_hour"), BudgetBurst: r.PostFormValue("budget_burst"),
	}
}

// formOf is the edit form of a stored sink.
func formOf(s engine.Sink) sinkForm {
	var o struct {
		Priorities map[notifytype.Severity]int `json:"priorities"`
		ConfigKey  string                      `json:"config_key"`
		Tag        string                      `json:"tag"`
	}
	_ = json.Unmarshal(s.Options, &o)
	pri := func(sev notifytype.Severity) string {
		if p, ok := o.Priorities[sev]; ok {
			return strconv.Itoa(p)
		}
		return ""
	}
	return sinkForm{
		Name: s.Name, Kind: s.Kind, ConnectionID: strconv.FormatInt(s.ConnectionID, 10), Enabled: s.Enabled,
		PriorityLow: pri(notifytype.SeverityLow), PriorityNormal: pri(notifytype.SeverityNormal),
		PriorityHigh: pri(notifytype.SeverityHigh), ConfigKey: o.ConfigKey, Tag: o.Tag,
		BudgetPerHour: strconv.Itoa(s.BudgetPerHour), BudgetBurst: strconv.Itoa(s.BudgetBurst),
	}
}

// connectionID reads the connection select; a missing or malformed value
// is 0, which the engine refuses as it refuses the API's.
func (f sinkForm) connectionID() int64 {
	id, _ := strconv.ParseInt(strings.TrimSpace(f.ConnectionID), 10, 64)
	return id
}

// options are the kind's options as the engine reads them. A priority that
// is not an integer is passed on as text, so the engine refuses it exactly
// as it refuses the API's.
func (f sinkForm) options(kind string) json.RawMessage {
	o := map[string]any{}
	switch kind {
	case engine.KindGotify:
		pri := map[string]any{}
		for sev, v := range map[notifytype.Severity]string{
			notifytype.SeverityLow: f.PriorityLow, notifytype.SeverityNormal: f.PriorityNormal, notifytype.SeverityHigh: f.PriorityHigh,
		} {
			if v = strings.TrimSpace(v); v == "" {
				continue
			}
			if n, err := strconv.Atoi(v); err == nil {
				pri[string(sev)] = n
			} else {
				pri[string(sev)] = v
			}
		}
		if len(pri) > 0 {
			o["priorities"] = pri
		}
	case engine.KindApprise:
		if v := strings.TrimSpace(f.ConfigKey); v != "" {
			o["config_key"] = v
		}
		if v := strings.TrimSpace(f.Tag); v != "" {
			o["tag"] = v
		}
	}
	b, _ := json.Marshal(o) // a map of strings and ints always marshals
	return b
}

// budget reads a budget field; blank is 0, the engine's default.
func budget(field, v string) (int, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, notifytype.InvalidArgument(field, "must be a whole number")
	}
	return n, nil
}

func (f sinkForm) input(owner notifytype.OwnerScope) (engine.SinkInput, error) {
	perHour, err := budget("budget_per_hour", f.BudgetPerHour)
	if err != nil {
		return engine.SinkInput{}, err
	}
	burst, err := budget("budget_burst", f.BudgetBurst)
	if err != nil {
		return engine.SinkInput{}, err
	}
	enabled := f.Enabled
	return engine.SinkInput{
		Owner: owner, Name: f.Name, Kind: f.Kind, ConnectionID: f.connectionID(), Enabled: &enabled,
		Options: f.options(f.Kind), BudgetPerHour: perHour, BudgetBurst: burst,
	}, nil
}

func (f sinkForm) patch(kind string) (engine.SinkPatch, error) {
	perHour, err := budget("budget_per_hour", f.BudgetPerHour)
	if err != nil {
		return engine.SinkPatch{}, err
	}
	burst, err := budget("budget_burst", f.BudgetBurst)
	if err != nil {
		return engine.SinkPatch{}, err
	}
	name, conn, opts := f.Name, f.connectionID(), f.options(kind)
	p := engine.SinkPatch{Name: &name, ConnectionID: &conn, Options: &opts}
	if strings.TrimSpace(f.BudgetPerHour) != "" {
		p.BudgetPerHour = &perHour
	}
	if strings.TrimSpace(f.BudgetBurst) != "" {
		p.BudgetBurst = &burst
	}
	return p, nil
}

// subForm is the add-subscription form as the human filled it in. The
// filters are ids picked from lists of the scope's queues, endpoints and
// webhooks (one value per ticked box; ids separated by commas are read
// too).
type subForm struct {
	EventTypes                  []string
	Queues, Endpoints, Webhooks string
	MinSeverity                 string
	IncludeExcerpt              bool
}

func readSubForm(r *http.Request) subForm {
	return subForm{
		EventTypes: r.PostForm["event_types"],
		Queues:     strings.Join(r.PostForm["queues"], ","), Endpoints: strings.Join(r.PostForm["endpoints"], ","),
		Webhooks:       strings.Join(r.PostForm["webhooks"], ","),
		MinSeverity:    r.PostFormValue("min_severity"),
		IncludeExcerpt: r.PostFormValue("include_excerpt") != "",
	}
}

// Picked reports whether the filter field (queues, endpoints, webhooks)
// holds id, for ticking boxes again after a refusal.
func (f subForm) Picked(field string, id int64) bool {
	v := map[string]string{"queues": f.Queues, "endpoints": f.Endpoints, "webhooks": f.Webhooks}[field]
	ids, _ := parseIDs(field, v)
	return slices.Contains(ids, id)
}

func (f subForm) input() (engine.SubscriptionInput, error) {
	in := engine.SubscriptionInput{MinSeverity: notifytype.Severity(f.MinSeverity), IncludeExcerpt: f.IncludeExcerpt}
	for _, t := range f.EventTypes {
		in.EventTypes = append(in.EventTypes, notifytype.EventType(t))
	}
	var err error
	if in.Queues, err = parseIDs("queues", f.Queues); err != nil {
		return in, err
	}
	if in.Endpoints, err = parseIDs("endpoints", f.Endpoints); err != nil {
		return in, err
	}
	if in.Webhooks, err = parseIDs("webhooks", f.Webhooks); err != nil {
		return in, err
	}
	return in, nil
}

// parseIDs reads ids separated by commas or spaces.
func parseIDs(field, v string) ([]int64, error) {
	var ids []int64
	for _, part := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		id, err := strconv.ParseInt(part, 10, 64)
		if err != nil {
			return nil, notifytype.InvalidArgument(field, "must be ids separated by commas")
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// sinksData is the sinks page.
type sinksData struct {
	Sinks       []sinkRow
	Connections []engine.Connection // of the sink kinds
	Form        sinkForm
	Kinds       []string
	// Tested is the result of Send test on the form's settings, when the
	// page answers one.
	Tested *testedData
}

// testedData is a send test's result in words.
type testedData struct {
	OK   bool
	Text string
	res  engine.TestMessageResult
	// refused says the test was refused before sending (a field's value).
	refused bool
}

// renderSinksTested shows the sinks page answering a send test of the
// form's unsaved settings.
func (s *server) renderSinksTested(w http.ResponseWriter, r *http.Request, a *actor, scope notifytype.OwnerScope, form sinkForm, res engine.TestMessageResult) {
	text := testText(res, form.Kind)
	if f := testField(res, form); f != "" {
		text += " See " + fieldLabels[f] + " below."
	}
	s.renderSinksPage(w, r, a, scope, http.StatusOK, form, nil, &testedData{OK: res.Delivered, Text: text, res: res})
}

type sinkRow struct {
	engine.Sink
	Connection string
}

// sinkData is one sink's page.
type sinkData struct {
	Sink        engine.Sink
	Connection  string
	Connections []engine.Connection // of the sink's kind
	Form        sinkForm
	Subs        []subRow
	SubForm     subForm
	Deliveries  []engine.DeliveryRecord
	Test        *engine.TestMessageResult
	EventTypes  []engine.EventKind
	Severities  []notifytype.Severity
	// Queues, Endpoints and Webhooks of the sink's scope, for the filters.
	Queues, Endpoints, Webhooks []host.Named
}

// subscribable are the event types a subscription offers: every one the
// engine declares (Engine.EventKinds, with their words and help) but
// rule.notify, which goes only to the sink a routing rule names (REQ-8),
// so subscribing to it would change nothing.
func subscribable(e *engine.Engine) []engine.EventKind {
	return slices.DeleteFunc(e.EventKinds(), func(k engine.EventKind) bool {
		return k.Type == host.EventRuleNotify
	})
}

// subRow is a subscription with its filters named.
type subRow struct {
	engine.Subscription
	QueueNames, EndpointNames, WebhookNames string
}

// names lists the names of ids among items ("any" for none); an id no
// longer there shows as #id.
func names(ids []int64, items []host.Named) string {
	if len(ids) == 0 {
		return "any"
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = "#" + strconv.FormatInt(id, 10)
		if j := slices.IndexFunc(items, func(n host.Named) bool { return n.ID == id }); j >= 0 {
			parts[i] = items[j].Name
		}
	}
	return strings.Join(parts, ", ")
}

func (s *server) sinksPage(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.renderSinks(w, r, a, scope, http.StatusOK, sinkForm{Kind: engine.KindGotify, Enabled: true}, nil)
}

// renderSinks shows scope's sinks and the create form holding form, with
// err when a save was refused.
func (s *server) renderSinks(w http.ResponseWriter, r *http.Request, a *actor, scope notifytype.OwnerScope, status int, form sinkForm, refusal error) {
	s.renderSinksPage(w, r, a, scope, status, form, refusal, nil)
}

func (s *server) renderSinksPage(w http.ResponseWriter, r *http.Request, a *actor, scope notifytype.OwnerScope, status int, form sinkForm, refusal error, tested *testedData) {
	ctx := r.Context()
	canWrite, readOnly, err := s.access(ctx, a, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	sinks, err := s.d.Engine.ListSinks(ctx, a.P, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	conns, err := s.d.Engine.ListConnections(ctx, a.P, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	data := sinksData{Form: form, Kinds: []string{engine.KindGotify, engine.KindApprise}, Tested: tested}
	if tested != nil && tested.refused {
		data.Tested = nil // the refusal says it, under its field
	}
	for _, c := range conns {
		if c.Kind == engine.KindGotify || c.Kind == engine.KindApprise {
			data.Connections = append(data.Connections, c)
		}
	}
	for _, sk := range sinks {
		data.Sinks = append(data.Sinks, sinkRow{Sink: sk, Connection: connectionName(conns, sk.ConnectionID)})
	}
	v := view{
		Title: "Sinks", Nav: "sinks", Scope: scope, CanWrite: canWrite, ReadOnly: readOnly,
		Notice: noticeOf(r), Err: s.public(r, refusal), Data: data,
	}
	if tested != nil {
		v.Testing = true
		if f := testField(tested.res, form); f != "" && !tested.OK {
			v.Note = &fieldNote{Field: f, Message: kindClassHelp(form.Kind, tested.res.Class)}
		}
	}
	s.render(w, r, status, "sinks", a, v)
}

func connectionName(conns []engine.Connection, id int64) string {
	i := slices.IndexFunc(conns, func(c engine.Connection) bool { return c.ID == id })
	if i < 0 {
		return "#" + strconv.FormatInt(id, 10)
	}
	return conns[i].Name
}

func (s *server) createSink(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form := readSinkForm(r)
	in, err := form.input(scope)
	var created *engine.Connection
	if err == nil && form.ConnectionID == newConnection && strings.TrimSpace(form.Name) == "" {
		err = notifytype.InvalidArgument("name", "is required")
	}
	if err == nil && form.ConnectionID == newConnection {
		// The guided start: the connection is created with the sink, and
		// deleted again if the sink is refused, so a refusal stores nothing.
		var c engine.Connection
		c, err = s.d.Engine.CreateConnection(r.Context(), a.P, engine.ConnectionInput{
			Owner: scope, Kind: form.Kind, Name: cmp.Or(strings.TrimSpace(form.ConnName), strings.TrimSpace(form.Name)),
			BaseURL: form.ConnURL, Secret: connSecret(r, form.Kind),
		})
		err = connRefusal(err)
		if err == nil {
			created, in.ConnectionID = &c, c.ID
		}
	}
	if err == nil {
		var sk engine.Sink
		if sk, err = s.d.Engine.CreateSink(r.Context(), a.P, in); err == nil {
			seeOther(w, r, withNotice("/sinks/"+strconv.FormatInt(sk.ID, 10), "sink_created", nil))
			return
		}
		if created != nil {
			if derr := s.d.Engine.DeleteConnection(r.Context(), a.P, created.ID); derr != nil {
				s.log.Error("could not delete the connection made for a refused sink", "connection_id", created.ID, "error", derr)
			}
		}
	}
	form.ConnURL = withoutUserInfo(form.ConnURL)
	s.renderSinks(w, r, a, scope, httpx.StatusOf(err), form, err)
}

// connRefusal names a refusal of the connection made with a sink by the
// sink form's inputs: its name is conn_name (name is the sink's).
func connRefusal(err error) error {
	var e *notifytype.Error
	if !errors.As(err, &e) || e.Field != "name" {
		return err
	}
	out := *e
	out.Field = "conn_name"
	return &out
}

// testSinkSettings sends the test message through the sink form's
// settings without saving anything (the guided start): on the chosen
// connection, or on the new connection typed in the form. A script's
// request (Accept: application/json) gets {ok, text}, so the form keeps
// what was typed, the token included; a plain form post gets the page
// again with the result, the form refilled but for its secrets.
func (s *server) testSinkSettings(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form := readSinkForm(r)
	in := engine.UnsavedSinkSettings{Owner: scope, Kind: form.Kind, Options: form.options(form.Kind)}
	if form.ConnectionID == newConnection {
		in.BaseURL, in.Secret = form.ConnURL, connSecret(r, form.Kind)
	} else if in.ConnectionID = form.connectionID(); in.ConnectionID <= 0 {
		err = notifytype.InvalidArgument("connection_id", "pick a connection, or New connection")
	}
	var res engine.TestMessageResult
	if err == nil {
		res, err = s.d.Engine.TrySinkSettings(r.Context(), a.P, in)
		err = connRefusal(err)
	}
	form.ConnURL = withoutUserInfo(form.ConnURL)
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		out := struct {
			OK    bool   `json:"ok"`
			Text  string `json:"text"`
			Field string `json:"field,omitempty"`
			// Message is what to show under Field.
			Message string `json:"message,omitempty"`
		}{OK: err == nil && res.Delivered, Text: testText(res, form.Kind)}
		status := http.StatusOK
		if err != nil {
			e := s.public(r, err)
			v := view{Err: e, Testing: true}
			out.Text, out.Field, status = v.Headline(), v.errField(), httpx.StatusOf(err)
			if out.Field != "" {
				out.Message = sentence(e.Message)
			}
		} else if f := testField(res, form); f != "" {
			out.Field, out.Message = f, kindClassHelp(form.Kind, res.Class)
			out.Text += " See " + fieldLabels[f] + " below."
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(out)
		return
	}
	if err != nil {
		s.renderSinksPage(w, r, a, scope, httpx.StatusOf(err), form, err, &testedData{refused: true})
		return
	}
	s.renderSinksTested(w, r, a, scope, form, res)
}

func (s *server) sinkPage(w http.ResponseWriter, r *http.Request, a *actor) {
	s.renderSink(w, r, a, http.StatusOK, sinkPageState{notice: noticeOf(r), test: testResultOf(r)})
}

// testResultOf reads the result of a send test from the query its
// redirect carried (?test=delivered, or ?test=failed&class=…&http=…), so a
// reload shows it again without sending again. Only known classes and
// HTTP statuses are read back.
func testResultOf(r *http.Request) *engine.TestMessageResult {
	q := r.URL.Query()
	switch q.Get("test") {
	case "delivered":
		return &engine.TestMessageResult{Delivered: true}
	case "failed":
		res := &engine.TestMessageResult{Class: notifytype.ErrorClass(q.Get("class"))}
		if !slices.Contains(notifytype.ErrorClasses, res.Class) && res.Class != "abandoned" {
			res.Class = ""
		}
		if n, err := strconv.Atoi(q.Get("http")); err == nil && n >= 100 && n <= 599 {
			res.Status = n
		}
		return res
	}
	return nil
}

// testResultQuery is the query testResultOf reads.
func testResultQuery(res engine.TestMessageResult) string {
	if res.Delivered {
		return "?test=delivered"
	}
	q := url.Values{"test": {"failed"}, "class": {string(res.Class)}}
	if res.Status != 0 {
		q.Set("http", strconv.Itoa(res.Status))
	}
	return "?" + q.Encode()
}

// sinkPageState is what a sink page shows beyond the stored sink: a form
// as typed, a test's result, a refusal.
type sinkPageState struct {
	form    *sinkForm
	subForm *subForm
	test    *engine.TestMessageResult
	notice  string
	refusal error
}

// renderSink shows the sink of the path. A sink the human cannot see is
// not_found, whatever the action was.
func (s *server) renderSink(w http.ResponseWriter, r *http.Request, a *actor, status int, st sinkPageState) {
	ctx := r.Context()
	id, err := pathID(r, "id", "sink")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	sk, err := s.d.Engine.GetSink(ctx, a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	canWrite, readOnly, err := s.access(ctx, a, sk.Owner)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	conns, err := s.d.Engine.ListConnections(ctx, a.P, sk.Owner)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	subs, err := s.d.Engine.ListSubscriptions(ctx, a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	deliveries, err := s.d.Engine.ListDeliveries(ctx, a.P, id, deliveriesShown)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	data := sinkData{
		Sink: sk, Connection: connectionName(conns, sk.ConnectionID), Form: formOf(sk),
		SubForm: subForm{MinSeverity: string(notifytype.SeverityLow)}, Deliveries: deliveries, Test: st.test,
		EventTypes: subscribable(s.d.Engine), Severities: notifytype.Severities,
	}
	for kind, dst := range map[engine.Resource]*[]host.Named{
		engine.ResourceQueue: &data.Queues, engine.ResourceEndpoint: &data.Endpoints, engine.ResourceWebhook: &data.Webhooks,
	} {
		if *dst, err = s.dir.Names(ctx, hostid.Number(a.P.HumanID), sk.Owner, kind); err != nil {
			s.fail(w, r, a, err)
			return
		}
	}
	for _, sub := range subs {
		data.Subs = append(data.Subs, subRow{Subscription: sub,
			QueueNames: names(sub.Queues, data.Queues), EndpointNames: names(sub.Endpoints, data.Endpoints),
			WebhookNames: names(sub.Webhooks, data.Webhooks)})
	}
	for _, c := range conns {
		if c.Kind == sk.Kind {
			data.Connections = append(data.Connections, c)
		}
	}
	if st.form != nil {
		data.Form = *st.form
	}
	if st.subForm != nil {
		data.SubForm = *st.subForm
	}
	v := view{
		Title: "Sink " + sk.Name, Nav: "sinks", Scope: sk.Owner, CanWrite: canWrite, ReadOnly: readOnly,
		Notice: st.notice, Err: s.public(r, st.refusal), Data: data,
	}
	// Just saved: warn, as the connection's own save did, when the
	// connection it delivers through is on an address the guard will
	// refuse (the REST API and MCP answer the same words).
	if key := r.URL.Query().Get("notice"); (key == "sink_created" || key == "sink_saved") && st.refusal == nil {
		v.Warning = warnings.Sink(ctx, s.d.Engine, sk)
	}
	s.render(w, r, status, "sink", a, v)
}

// afterSinkWrite redirects to the sink's page after a save, with the
// notice named, or shows the page again with the refusal.
func (s *server) afterSinkWrite(w http.ResponseWriter, r *http.Request, a *actor, id int64, err error, notice string, st sinkPageState) {
	if err == nil {
		seeOther(w, r, withNotice("/sinks/"+strconv.FormatInt(id, 10), notice, nil))
		return
	}
	st.refusal = err
	s.renderSink(w, r, a, httpx.StatusOf(err), st)
}

func (s *server) editSink(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form := readSinkForm(r)
	sk, err := s.d.Engine.GetSink(r.Context(), a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form.Kind, form.Enabled = sk.Kind, sk.Enabled
	patch, err := form.patch(sk.Kind)
	if err == nil {
		_, err = s.d.Engine.UpdateSink(r.Context(), a.P, id, patch)
	}
	s.afterSinkWrite(w, r, a, id, err, "sink_saved", sinkPageState{form: &form})
}

func (s *server) enableSink(on bool) handler {
	return func(w http.ResponseWriter, r *http.Request, a *actor) {
		id, err := pathID(r, "id", "sink")
		if err != nil {
			s.fail(w, r, a, err)
			return
		}
		_, err = s.d.Engine.SetSinkEnabled(r.Context(), a.P, id, on)
		notice := "sink_disabled"
		if on {
			notice = "sink_enabled"
		}
		s.afterSinkWrite(w, r, a, id, err, notice, sinkPageState{})
	}
}

func (s *server) deleteSink(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	sk, err := s.d.Engine.GetSink(r.Context(), a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	if err := s.d.Engine.DeleteSink(r.Context(), a.P, id); err != nil {
		s.afterSinkWrite(w, r, a, id, err, "", sinkPageState{})
		return
	}
	seeOther(w, r, withNotice("/sinks", "sink_deleted", &sk.Owner))
}

// testSink sends a test message and redirects to the sink's page, which
// shows the result (delivered, or the error class in words): a reload
// shows it again and sends nothing.
func (s *server) testSink(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	res, err := s.d.Engine.SendTestMessage(r.Context(), a.P, id)
	if err != nil {
		s.afterSinkWrite(w, r, a, id, err, "", sinkPageState{})
		return
	}
	seeOther(w, r, "/sinks/"+strconv.FormatInt(id, 10)+testResultQuery(res))
}

func (s *server) addSubscription(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form := readSubForm(r)
	in, err := form.input()
	if err == nil {
		_, err = s.d.Engine.AddSubscription(r.Context(), a.P, id, in)
	}
	s.afterSinkWrite(w, r, a, id, err, "subscription_added", sinkPageState{subForm: &form})
}

func (s *server) deleteSubscription(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	sub, err := pathID(r, "sub", "subscription")
	if err == nil {
		err = s.d.Engine.DeleteSubscription(r.Context(), a.P, id, sub)
	}
	s.afterSinkWrite(w, r, a, id, err, "subscription_deleted", sinkPageState{})
}

// AnyKind is the form with no kind chosen, so the create form shows every
// kind's options (a page without JavaScript cannot switch them).
func (f sinkForm) AnyKind() sinkForm {
	f.Kind = ""
	return f
}

// HasType reports whether the form checks event type t.
func (f subForm) HasType(t notifytype.EventType) bool {
	return slices.Contains(f.EventTypes, string(t))
}
