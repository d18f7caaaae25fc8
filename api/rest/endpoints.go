package rest

import (
	"net/http"
	"slices"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// endpointVend is POST /endpoints's body. Grants adds verb families to the
// basics (todos, rules), which every vend carries.
type endpointVend struct {
	Owner  string             `json:"owner"`
	Name   string             `json:"name"`
	Grants []notifytype.Grant `json:"grants"`
}

// vended is POST /endpoints's answer: the endpoint, and its credential,
// shown this once.
type vended struct {
	Endpoint   host.Endpoint `json:"endpoint"`
	Credential string        `json:"credential"`
}

func (s *server) listEndpoints(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	owner, err := ownerParam(r, p)
	if err != nil {
		return err
	}
	eps, err := s.d.Endpoints.List(r.Context(), hostid.Number(p.HumanID), owner)
	if err != nil {
		return err
	}
	return list(w, "endpoints", eps)
}

func (s *server) vendEndpoint(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	var in endpointVend
	if err := decode(r, &in); err != nil {
		return err
	}
	owner, err := ownerOr(in.Owner, p)
	if err != nil {
		return err
	}
	// The basics vend (D5): todos and rules, never notifications or
	// notify_owner unless the caller names them.
	grants := slices.Clone(notifytype.DefaultGrants)
	for _, g := range in.Grants {
		if !slices.Contains(grants, g) {
			grants = append(grants, g)
		}
	}
	ep, credential, err := s.d.Endpoints.Vend(r.Context(), hostid.Number(p.HumanID), owner, in.Name, grants)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, vended{Endpoint: ep, Credential: credential.Reveal()})
	return nil
}

func (s *server) revokeEndpoint(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "endpoint")
	if err != nil {
		return err
	}
	if err := s.d.Endpoints.Revoke(r.Context(), hostid.Number(p.HumanID), id); err != nil {
		return err
	}
	return noContent(w)
}
