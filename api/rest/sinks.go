package rest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/warnings"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// sinkJSON is a sink as the API answers it.
type sinkJSON struct {
	ID                  int64                 `json:"id"`
	Owner               notifytype.OwnerScope `json:"owner"`
	Name                string                `json:"name"`
	Kind                string                `json:"kind"`
	ConnectionID        int64                 `json:"connection_id"`
	Enabled             bool                  `json:"enabled"`
	Options             json.RawMessage       `json:"options"`
	BudgetPerHour       int                   `json:"budget_per_hour"`
	BudgetBurst         int                   `json:"budget_burst"`
	CreatedAt           time.Time             `json:"created_at"`
	UpdatedAt           time.Time             `json:"updated_at"`
	UpdatedByHumanID    int64                 `json:"updated_by_human_id"`
	UpdatedByEndpointID int64                 `json:"updated_by_endpoint_id,omitempty"`
	// Warning, on create and update only: the sink's connection points at
	// an address deliveries will be refused at (as on POST /connections).
	Warning string `json:"warning,omitempty"`
}

func sinkOut(s engine.Sink) sinkJSON {
	opts := s.Options
	if len(opts) == 0 {
		opts = json.RawMessage("{}")
	}
	return sinkJSON{
		ID: s.ID, Owner: s.Owner, Name: s.Name, Kind: s.Kind, ConnectionID: s.ConnectionID, Enabled: s.Enabled,
		Options: opts, BudgetPerHour: s.BudgetPerHour, BudgetBurst: s.BudgetBurst,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		UpdatedByHumanID: hostid.Number(s.UpdatedByHumanID), UpdatedByEndpointID: s.UpdatedByEndpointID,
	}
}

// sinkCreate is POST /sinks's body.
type sinkCreate struct {
	Owner         string          `json:"owner"`
	Name          string          `json:"name"`
	Kind          string          `json:"kind"`
	ConnectionID  int64           `json:"connection_id"`
	Enabled       *bool           `json:"enabled"`
	Options       json.RawMessage `json:"options"`
	BudgetPerHour int             `json:"budget_per_hour"`
	BudgetBurst   int             `json:"budget_burst"`
}

// sinkPatch is PATCH /sinks/{id}'s body: an absent field keeps its value;
// options null resets them to the kind's defaults.
type sinkPatch struct {
	Name          *string         `json:"name"`
	ConnectionID  *int64          `json:"connection_id"`
	Enabled       *bool           `json:"enabled"`
	Options       json.RawMessage `json:"options"`
	BudgetPerHour *int            `json:"budget_per_hour"`
	BudgetBurst   *int            `json:"budget_burst"`
}

func (s *server) listSinks(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	owner, err := ownerParam(r, p)
	if err != nil {
		return err
	}
	sinks, err := s.d.Engine.ListSinks(r.Context(), p, owner)
	if err != nil {
		return err
	}
	out := make([]sinkJSON, len(sinks))
	for i, sk := range sinks {
		out[i] = sinkOut(sk)
	}
	return list(w, "sinks", out)
}

func (s *server) createSink(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	var in sinkCreate
	if err := decode(r, &in); err != nil {
		return err
	}
	owner, err := ownerOr(in.Owner, p)
	if err != nil {
		return err
	}
	sk, err := s.d.Engine.CreateSink(r.Context(), p, engine.SinkInput{
		Owner: owner, Name: in.Name, Kind: in.Kind, ConnectionID: in.ConnectionID, Enabled: in.Enabled,
		Options: in.Options, BudgetPerHour: in.BudgetPerHour, BudgetBurst: in.BudgetBurst,
	})
	if err != nil {
		return err
	}
	out := sinkOut(sk)
	out.Warning = warnings.Sink(r.Context(), s.d.Engine, sk)
	httpx.WriteJSON(w, http.StatusCreated, out)
	return nil
}

func (s *server) getSink(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		return err
	}
	sk, err := s.d.Engine.GetSink(r.Context(), p, id)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, sinkOut(sk))
	return nil
}

func (s *server) updateSink(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		return err
	}
	var in sinkPatch
	if err := decode(r, &in); err != nil {
		return err
	}
	patch := engine.SinkPatch{
		Name: in.Name, ConnectionID: in.ConnectionID, Enabled: in.Enabled,
		BudgetPerHour: in.BudgetPerHour, BudgetBurst: in.BudgetBurst,
	}
	if in.Options != nil {
		patch.Options = &in.Options
	}
	sk, err := s.d.Engine.UpdateSink(r.Context(), p, id, patch)
	if err != nil {
		return err
	}
	out := sinkOut(sk)
	out.Warning = warnings.Sink(r.Context(), s.d.Engine, sk)
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) deleteSink(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		return err
	}
	if err := s.d.Engine.DeleteSink(r.Context(), p, id); err != nil {
		return err
	}
	return noContent(w)
}

func (s *server) sendTest(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		return err
	}
	res, err := s.d.Engine.SendTestMessage(r.Context(), p, id)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, res)
	return nil
}

func (s *server) listDeliveries(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		return err
	}
	limit := 0 // the engine's default
	if v := r.URL.Query().Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 200 {
			return notifytype.InvalidArgument("limit", "must be an integer from 1 to 200")
		}
	}
	records, err := s.d.Engine.ListDeliveries(r.Context(), p, id, limit)
	if err != nil {
		return err
	}
	return list(w, "deliveries", records)
}

// subscriptionJSON is a subscription as the API answers it.
type subscriptionJSON struct {
	ID                  int64                  `json:"id"`
	SinkID              int64                  `json:"sink_id"`
	Owner               notifytype.OwnerScope  `json:"owner"`
	EventTypes          []notifytype.EventType `json:"event_types"`
	Queues              []int64                `json:"queues"`
	Endpoints           []int64                `json:"endpoints"`
	Webhooks            []int64                `json:"webhooks"`
	MinSeverity         notifytype.Severity    `json:"min_severity"`
	IncludeExcerpt      bool                   `json:"include_excerpt"`
	CreatedAt           time.Time              `json:"created_at"`
	CreatedByHumanID    int64                  `json:"created_by_human_id"`
	CreatedByEndpointID int64                  `json:"created_by_endpoint_id,omitempty"`
}

func subscriptionOut(s engine.Subscription) subscriptionJSON {
	return subscriptionJSON{
		ID: s.ID, SinkID: s.SinkID, Owner: s.Owner, EventTypes: s.EventTypes,
		Queues: nonNil(s.Queues), Endpoints: nonNil(s.Endpoints), Webhooks: nonNil(s.Webhooks),
		MinSeverity: s.MinSeverity, IncludeExcerpt: s.IncludeExcerpt, CreatedAt: s.CreatedAt,
		CreatedByHumanID: hostid.Number(s.CreatedByHumanID), CreatedByEndpointID: s.CreatedByEndpointID,
	}
}

func subscriptionsOut(subs []engine.Subscription) []subscriptionJSON {
	out := make([]subscriptionJSON, len(subs))
	for i, sub := range subs {
		out[i] = subscriptionOut(sub)
	}
	return out
}

func nonNil(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

// subscriptionInput is one subscription as a caller gives it.
type subscriptionInput struct {
	EventTypes     []notifytype.EventType `json:"event_types"`
	Queues         []int64                `json:"queues"`
	Endpoints      []int64                `json:"endpoints"`
	Webhooks       []int64                `json:"webhooks"`
	MinSeverity    notifytype.Severity    `json:"min_severity"`
	IncludeExcerpt bool                   `json:"include_excerpt"`
}

func (in subscriptionInput) input() engine.SubscriptionInput {
	return engine.SubscriptionInput{
		EventTypes: in.EventTypes, Queues: in.Queues, Endpoints: in.Endpoints, Webhooks: in.Webhooks,
		MinSeverity: in.MinSeverity, IncludeExcerpt: in.IncludeExcerpt,
	}
}

// subscriptionSet is PUT /sinks/{id}/subscriptions's body: the sink's
// subscriptions in full (an empty list clears them).
type subscriptionSet struct {
	Subscriptions []subscriptionInput `json:"subscriptions"`
}

func (s *server) listSubscriptions(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		return err
	}
	subs, err := s.d.Engine.ListSubscriptions(r.Context(), p, id)
	if err != nil {
		return err
	}
	return list(w, "subscriptions", subscriptionsOut(subs))
}

func (s *server) addSubscription(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		return err
	}
	var in subscriptionInput
	if err := decode(r, &in); err != nil {
		return err
	}
	sub, err := s.d.Engine.AddSubscription(r.Context(), p, id, in.input())
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, subscriptionOut(sub))
	return nil
}

func (s *server) setSubscriptions(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		return err
	}
	var in subscriptionSet
	if err := decode(r, &in); err != nil {
		return err
	}
	ins := make([]engine.SubscriptionInput, len(in.Subscriptions))
	for i, sub := range in.Subscriptions {
		ins[i] = sub.input()
	}
	subs, err := s.d.Engine.SetSubscriptions(r.Context(), p, id, ins)
	if err != nil {
		return err
	}
	return list(w, "subscriptions", subscriptionsOut(subs))
}

func (s *server) deleteSubscription(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		return err
	}
	sub, err := pathID(r, "sub", "subscription")
	if err != nil {
		return err
	}
	if err := s.d.Engine.DeleteSubscription(r.Context(), p, id, sub); err != nil {
		return err
	}
	return noContent(w)
}
