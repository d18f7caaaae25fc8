package rest

import (
	"net/http"
	"time"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/warnings"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// connectionJSON is a connection as the API answers it: never its secret,
// only whether it has one (D18).
type connectionJSON struct {
	ID               int64                 `json:"id"`
	Owner            notifytype.OwnerScope `json:"owner"`
	Kind             string                `json:"kind"`
	Name             string                `json:"name"`
	AccountKey       string                `json:"account_key"`
	HasSecret        bool                  `json:"has_secret"`
	CreatedAt        time.Time             `json:"created_at"`
	CreatedByHumanID int64                 `json:"created_by_human_id"`
	// Warning, on create only, says in words that the base URL resolves to
	// a private, loopback or special-purpose address the operator has not
	// allowed (SWITCHBOARD_PRIVATE_HOSTS), so deliveries will be refused as
	// blocked: the web UI's warning after a save. The connection is saved
	// either way; absent when there is nothing to warn about.
	Warning string `json:"warning,omitempty"`
}

func connectionOut(c engine.Connection) connectionJSON {
	return connectionJSON{
		ID: c.ID, Owner: c.Owner, Kind: c.Kind, Name: c.Name, AccountKey: c.BaseURL,
		HasSecret: c.HasSecret, CreatedAt: c.CreatedAt, CreatedByHumanID: hostid.Number(c.CreatedByHumanID),
	}
}

// connectionCreate is POST /connections's body. The secret fields are
// write-only: token (gotify, cairn), urls and authorization (apprise).
type connectionCreate struct {
	Owner      string `json:"owner"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	AccountKey string `json:"account_key"`
	// BaseURL is another name for AccountKey (the server's base URL).
	BaseURL       string   `json:"base_url"`
	Token         string   `json:"token"`
	URLs          []string `json:"urls"`
	Authorization string   `json:"authorization"`
}

// secret builds the connection's secret for its kind from the write-only
// fields, refusing a field the kind does not take.
func (in connectionCreate) secret() (notifytype.Secret, error) {
	switch in.Kind {
	case engine.KindApprise:
		if in.Token != "" {
			return notifytype.Secret{}, notifytype.InvalidArgument("token", "an apprise connection takes urls and/or authorization, not token")
		}
		return engine.AppriseSecret(in.URLs, in.Authorization), nil
	default: // gotify and cairn take a token; the engine refuses any other kind
		switch {
		case in.URLs != nil:
			return notifytype.Secret{}, notifytype.InvalidArgument("urls", "only an apprise connection takes urls")
		case in.Authorization != "":
			return notifytype.Secret{}, notifytype.InvalidArgument("authorization", "only an apprise connection takes authorization")
		}
		return notifytype.NewSecret(in.Token), nil
	}
}

// secretFields renames the service's secret fields to this API's, per
// kind.
var secretFields = map[string]map[string]string{
	engine.KindGotify:  {"secret": "token"},
	engine.KindCairn:   {"secret": "token"},
	engine.KindApprise: {"secret": "urls", "secret.urls": "urls", "secret.authorization": "authorization"},
}

func (s *server) listConnections(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	owner, err := ownerParam(r, p)
	if err != nil {
		return err
	}
	conns, err := s.d.Engine.ListConnections(r.Context(), p, owner)
	if err != nil {
		return err
	}
	out := make([]connectionJSON, len(conns))
	for i, c := range conns {
		out[i] = connectionOut(c)
	}
	return list(w, "connections", out)
}

func (s *server) createConnection(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	var in connectionCreate
	if err := decode(r, &in); err != nil {
		return err
	}
	owner, err := ownerOr(in.Owner, p)
	if err != nil {
		return err
	}
	base := in.AccountKey
	switch {
	case base == "":
		base = in.BaseURL
	case in.BaseURL != "" && in.BaseURL != base:
		return notifytype.InvalidArgument("base_url", "give account_key or base_url, not two different values")
	}
	secret, err := in.secret()
	if err != nil {
		return err
	}
	c, err := s.d.Engine.CreateConnection(r.Context(), p, engine.ConnectionInput{
		Owner: owner, Kind: in.Kind, Name: in.Name, BaseURL: base, Secret: secret,
	})
	if err != nil {
		return remapField(err, secretFields[in.Kind])
	}
	out := connectionOut(c)
	out.Warning = warnings.Connection(r.Context(), s.d.Engine, c)
	httpx.WriteJSON(w, http.StatusCreated, out)
	return nil
}

func (s *server) deleteConnection(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "connection")
	if err != nil {
		return err
	}
	if err := s.d.Engine.DeleteConnection(r.Context(), p, id); err != nil {
		return err
	}
	return noContent(w)
}
