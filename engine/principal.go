package engine

import (
	"slices"

	"github.com/switchboard/notify/notifytype"
)

// Principal is who acts on the management service: a human (web UI,
// operator API), or an endpoint with its accountable human (MCP). Every
// write records both where an endpoint acted (REQ-5).
type Principal struct {
	// HumanID is the acting human, or the endpoint's accountable human:
	// the host's id for them, the ID of their scope notifytype.Human(HumanID)
	// (an opaque string, notifytype.ValidOwnerID).
	HumanID string

	// EndpointID is set when an endpoint acts; zero for a human.
	EndpointID int64

	// EndpointScope is the endpoint's owner scope. An endpoint acts only
	// there, with the permissions its accountable human has in it.
	EndpointScope notifytype.OwnerScope

	// Grants are the endpoint's verb families; the management service
	// needs notifications, pages.NotifyOwner needs notify_owner (D5).
	Grants []notifytype.Grant
}

// Has reports whether an endpoint principal holds grant g. A human holds
// every family on their own scopes.
func (p Principal) Has(g notifytype.Grant) bool {
	return p.EndpointID == 0 || slices.Contains(p.Grants, g)
}

// HumanPrincipal is a human acting for themself.
func HumanPrincipal(humanID string) Principal { return Principal{HumanID: humanID} }

// EndpointPrincipal is an endpoint acting in its owner scope for its
// accountable human.
func EndpointPrincipal(endpointID int64, accountableHumanID string, scope notifytype.OwnerScope, grants ...notifytype.Grant) Principal {
	return Principal{HumanID: accountableHumanID, EndpointID: endpointID, EndpointScope: scope, Grants: grants}
}
