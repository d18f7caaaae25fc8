package rest

import (
	"net/http"
	"time"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// digestRoutes are the digest routes (REQ-12, REQ-14).
var digestRoutes = []route{
	{"GET " + Prefix + "/digests", (*server).listDigests},
	{"POST " + Prefix + "/digests", (*server).createDigest},
	{"GET " + Prefix + "/digests/{id}", (*server).getDigest},
	{"PATCH " + Prefix + "/digests/{id}", (*server).updateDigest},
	{"DELETE " + Prefix + "/digests/{id}", (*server).deleteDigest},
	{"POST " + Prefix + "/digests/{id}/preview", (*server).previewDigest},
	{"POST " + Prefix + "/digests/{id}/send", (*server).sendDigest},
}

func init() { routes = append(routes, digestRoutes...) }

// digestJSON is a digest as the API answers it.
type digestJSON struct {
	ID                    int64                 `json:"id"`
	Owner                 notifytype.OwnerScope `json:"owner"`
	Name                  string                `json:"name"`
	Schedule              string                `json:"schedule"`
	QueueIDs              []int64               `json:"queue_ids"`
	SinkIDs               []int64               `json:"sink_ids"`
	CairnConnectionID     int64                 `json:"cairn_connection_id,omitempty"`
	SkipWhenQuiet         bool                  `json:"skip_when_quiet"`
	QuietThresholdSeconds int64                 `json:"quiet_threshold_seconds"`
	LastSentAt            *time.Time            `json:"last_sent_at"`
	NextSendAt            *time.Time            `json:"next_send_at"`
	CreatedAt             time.Time             `json:"created_at"`
	UpdatedAt             time.Time             `json:"updated_at"`
	UpdatedByHumanID      int64                 `json:"updated_by_human_id"`
	UpdatedByEndpointID   int64                 `json:"updated_by_endpoint_id,omitempty"`
}

func digestOut(d digests.Digest) digestJSON {
	out := digestJSON{
		ID: d.ID, Owner: d.Owner, Name: d.Name, Schedule: d.Schedule, QueueIDs: d.QueueIDs, SinkIDs: d.SinkIDs,
		CairnConnectionID: d.CairnConnectionID, SkipWhenQuiet: d.SkipWhenQuiet,
		QuietThresholdSeconds: int64(d.QuietThreshold / time.Second), LastSentAt: d.LastSentAt,
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
		UpdatedByHumanID: hostid.Number(d.UpdatedByHumanID), UpdatedByEndpointID: d.UpdatedByEndpointID,
	}
	if !d.NextSendAt.IsZero() {
		out.NextSendAt = &d.NextSendAt
	}
	if out.QueueIDs == nil {
		out.QueueIDs = []int64{}
	}
	if out.SinkIDs == nil {
		out.SinkIDs = []int64{}
	}
	return out
}

// digestCreate is POST /digests's body.
type digestCreate struct {
	Owner                 string  `json:"owner"`
	Name                  string  `json:"name"`
	Schedule              string  `json:"schedule"`
	QueueIDs              []int64 `json:"queue_ids"`
	SinkIDs               []int64 `json:"sink_ids"`
	CairnConnectionID     int64   `json:"cairn_connection_id"`
	SkipWhenQuiet         *bool   `json:"skip_when_quiet"`
	QuietThresholdSeconds int64   `json:"quiet_threshold_seconds"`
}

// digestPatch is PATCH /digests/{id}'s body: an absent field keeps its
// value; cairn_connection_id 0 removes the Cairn target.
type digestPatch struct {
	Name                  *string  `json:"name"`
	Schedule              *string  `json:"schedule"`
	QueueIDs              *[]int64 `json:"queue_ids"`
	SinkIDs               *[]int64 `json:"sink_ids"`
	CairnConnectionID     *int64   `json:"cairn_connection_id"`
	SkipWhenQuiet         *bool    `json:"skip_when_quiet"`
	QuietThresholdSeconds *int64   `json:"quiet_threshold_seconds"`
}

var digestFields = map[string]string{"quiet_threshold": "quiet_threshold_seconds"}

func (s *server) listDigests(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	owner, err := ownerParam(r, p)
	if err != nil {
		return err
	}
	ds, err := s.d.Digests.List(r.Context(), p, owner)
	if err != nil {
		return err
	}
	out := make([]digestJSON, len(ds))
	for i, d := range ds {
		out[i] = digestOut(d)
	}
	return list(w, "digests", out)
}

func (s *server) createDigest(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	var in digestCreate
	if err := decode(r, &in); err != nil {
		return err
	}
	owner, err := ownerOr(in.Owner, p)
	if err != nil {
		return err
	}
	d, err := s.d.Digests.Create(r.Context(), p, digests.Input{
		Owner: owner, Name: in.Name, Schedule: in.Schedule, QueueIDs: in.QueueIDs, SinkIDs: in.SinkIDs,
		CairnConnectionID: in.CairnConnectionID, SkipWhenQuiet: in.SkipWhenQuiet,
		QuietThreshold: time.Duration(in.QuietThresholdSeconds) * time.Second,
	})
	if err != nil {
		return remapField(err, digestFields)
	}
	httpx.WriteJSON(w, http.StatusCreated, digestOut(d))
	return nil
}

func (s *server) getDigest(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "digest")
	if err != nil {
		return err
	}
	d, err := s.d.Digests.Get(r.Context(), p, id)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, digestOut(d))
	return nil
}

func (s *server) updateDigest(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "digest")
	if err != nil {
		return err
	}
	var in digestPatch
	if err := decode(r, &in); err != nil {
		return err
	}
	patch := digests.Patch{
		Name: in.Name, Schedule: in.Schedule, QueueIDs: in.QueueIDs, SinkIDs: in.SinkIDs,
		CairnConnectionID: in.CairnConnectionID, SkipWhenQuiet: in.SkipWhenQuiet,
	}
	if in.QuietThresholdSeconds != nil {
		t := time.Duration(*in.QuietThresholdSeconds) * time.Second
		patch.QuietThreshold = &t
	}
	d, err := s.d.Digests.Update(r.Context(), p, id, patch)
	if err != nil {
		return remapField(err, digestFields)
	}
	httpx.WriteJSON(w, http.StatusOK, digestOut(d))
	return nil
}

func (s *server) deleteDigest(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "digest")
	if err != nil {
		return err
	}
	if err := s.d.Digests.Delete(r.Context(), p, id); err != nil {
		return err
	}
	return noContent(w)
}

// digestPreviewJSON is a digest built now, not sent.
type digestPreviewJSON struct {
	Quiet       bool     `json:"quiet"`
	Headline    string   `json:"headline"`
	Unavailable []string `json:"unavailable"`
	Markdown    string   `json:"markdown"`
	Text        string   `json:"text"`
}

func (s *server) previewDigest(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "digest")
	if err != nil {
		return err
	}
	pv, err := s.d.Digests.Preview(r.Context(), p, id)
	if err != nil {
		return err
	}
	un := pv.Report.Unavailable()
	if un == nil {
		un = []string{}
	}
	httpx.WriteJSON(w, http.StatusOK, digestPreviewJSON{
		Quiet: pv.Quiet, Headline: pv.Report.HeadlineText(), Unavailable: un, Markdown: pv.Markdown, Text: pv.Text,
	})
	return nil
}

// digestRunJSON is what became of a digest sent now.
type digestRunJSON struct {
	Outcome     string `json:"outcome"`
	Headline    string `json:"headline"`
	SinksQueued int    `json:"sinks_queued"`
	ArtifactURL string `json:"artifact_url,omitempty"`
	CairnError  string `json:"cairn_error,omitempty"`
}

func (s *server) sendDigest(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "digest")
	if err != nil {
		return err
	}
	run, err := s.d.Digests.SendNow(r.Context(), p, id)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, digestRunJSON{
		Outcome: run.Outcome, Headline: run.Headline, SinksQueued: run.SinksQueued,
		ArtifactURL: run.ArtifactURL, CairnError: run.CairnError,
	})
	return nil
}
