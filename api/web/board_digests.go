package web

import (
	"net/http"
	"time"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine/digest"
	"github.com/switchboard/notify/engine/digests"
)

// The board page of one digest, /board/digests/<id> (D13): the link every
// digest carries. It is behind the web session and scope-checked: a digest
// of a scope the human has no part in is 404, like every other board item
// (D3).

// digestPageData is one digest's page.
type digestPageData struct {
	Digest  digests.Digest
	Form    digestForm
	Choices digestChoices
	Preview *digests.Preview
	// PreviewWhy is why no preview could be built.
	PreviewWhy string
	Runs       []digests.Run
	// Report is the preview as a readable report.
	Report *reportView
	// Facts are next and last send in the schedule's zone, and the
	// targets by name, as the digests list says them.
	digestFacts
}

type digestPageState struct {
	form    *digestForm
	notice  string
	refusal error
}

func (s *server) digestPage(w http.ResponseWriter, r *http.Request, a *actor) {
	s.renderDigest(w, r, a, http.StatusOK, digestPageState{notice: noticeOf(r)})
}

func (s *server) renderDigest(w http.ResponseWriter, r *http.Request, a *actor, status int, st digestPageState) {
	ctx := r.Context()
	id, err := pathID(r, "id", "digest")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	d, err := s.d.Digests.Get(ctx, a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	canWrite, readOnly, err := s.access(ctx, a, d.Owner)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	data := digestPageData{Digest: d, Form: digestFormOf(d)}
	if st.form != nil {
		data.Form = *st.form
	}
	if data.Choices, err = s.choices(r, a, d.Owner); err != nil {
		s.fail(w, r, a, err)
		return
	}
	if pv, err := s.d.Digests.Preview(ctx, a.P, id); err != nil {
		s.log.WarnContext(ctx, "web: error building a digest preview", "digest_id", id, "error", err)
		data.PreviewWhy = "the preview could not be built just now"
	} else {
		data.Preview = &pv
	}
	if data.Runs, err = s.d.Digests.Runs(ctx, a.P, id, 10); err != nil {
		s.fail(w, r, a, err)
		return
	}
	data.digestFacts = factsOf(d, data.Runs, data.Choices)
	loc := data.Loc
	if data.Preview != nil {
		rv := reportOf(data.Preview.Report, loc)
		data.Report = &rv
	}
	if r.Method == http.MethodGet && r.URL.Query().Get("notice") == "digest_sent" {
		st.notice = sentNotice(data.Runs)
	}
	s.render(w, r, status, "digest", a, view{
		Title: "Digest " + d.Name, Nav: "digests", Scope: d.Owner, CanWrite: canWrite, ReadOnly: readOnly,
		Notice: st.notice, Err: s.public(r, st.refusal), Data: data,
	})
}

func (s *server) editDigest(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "digest")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form := readDigestForm(r)
	cairn, err := form.cairn()
	var threshold time.Duration
	if err == nil {
		threshold, err = form.threshold()
	}
	if err == nil {
		queues, sinks := form.QueueIDs, form.SinkIDs
		if queues == nil {
			queues = []int64{}
		}
		if sinks == nil {
			sinks = []int64{}
		}
		_, err = s.d.Digests.Update(r.Context(), a.P, id, digests.Patch{
			Name: &form.Name, Schedule: &form.Schedule, QueueIDs: &queues, SinkIDs: &sinks,
			CairnConnectionID: &cairn, SkipWhenQuiet: &form.SkipWhenQuiet, QuietThreshold: &threshold,
		})
	}
	if err != nil {
		s.renderDigest(w, r, a, httpx.StatusOf(err), digestPageState{form: &form, refusal: err})
		return
	}
	seeOther(w, r, "/board/digests/"+itoa(id)+"?notice=digest_saved")
}

func (s *server) deleteDigest(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "digest")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	d, err := s.d.Digests.Get(r.Context(), a.P, id)
	if err == nil {
		err = s.d.Digests.Delete(r.Context(), a.P, id)
	}
	if err != nil {
		s.renderDigest(w, r, a, httpx.StatusOf(err), digestPageState{refusal: err})
		return
	}
	seeOther(w, r, withNotice("/digests", "digest_deleted", &d.Owner))
}

// sendDigestNow sends the digest now without spending its scheduled time.
func (s *server) sendDigestNow(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "digest")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	if _, err := s.d.Digests.SendNow(r.Context(), a.P, id); err != nil {
		s.renderDigest(w, r, a, httpx.StatusOf(err), digestPageState{refusal: err})
		return
	}
	// Post-redirect-get: reloading the page that follows must not send the
	// digest again. The notice is built there from the run just recorded.
	seeOther(w, r, "/board/digests/"+itoa(id)+"?notice=digest_sent")
}

// sentNotice says what the newest manual run of runs (newest first) did,
// for the page a "Send now" redirects to.
func sentNotice(runs []digests.Run) string {
	for _, run := range runs {
		if run.Kind != "manual" {
			continue
		}
		notice := "Sent now to " + digest.Count(run.SinksQueued, "sink", "sinks") + "; the scheduled send is unchanged."
		if run.ArtifactURL != "" {
			notice += " Published to Cairn."
		}
		if run.CairnError != "" {
			notice += " Publishing to Cairn failed (" + run.CairnError + "): the sinks got the full digest."
		}
		return notice
	}
	return ""
}
