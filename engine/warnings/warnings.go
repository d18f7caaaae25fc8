// Package warnings says, in words for the person saving a connection or a
// sink, what the engine's SSRF guard will refuse at send time: a base URL
// (or a host inside an Apprise URL) that resolves to a private, loopback
// or otherwise special-purpose address the operator has not allowed. It
// never refuses a save: DNS can change before the send, and the guard
// decides then.
package warnings

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/internal/enginecore"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/apprise"
)

// destinationCheckTimeout bounds the DNS lookup of a save-time check.
const destinationCheckTimeout = 3 * time.Second

// Destination says, in words for the human saving a connection,
// why its base URL will be refused at send time: it resolves to a private,
// loopback or otherwise special-purpose address the operator has not
// allowed. "" when the guard would let it through, or when the name does
// not resolve now (the send will say so). It never dials the server and
// never refuses a save: DNS can change before the send, and the guard
// decides then.
func Destination(ctx context.Context, e *engine.Engine, base string) string {
	return destination(ctx, enginecore.Of(e), base)
}

func destination(ctx context.Context, core *enginecore.Core, base string) string {
	ctx, cancel := context.WithTimeout(ctx, destinationCheckTimeout)
	defer cancel()
	blocked, err := sinks.BlockedAddresses(ctx, nil, base, core.PrivateHosts)
	if err != nil || len(blocked) == 0 {
		return ""
	}
	return "This server's address (" + blocked[0].String() + ") is private or loopback, so deliveries to it will be refused as blocked. " +
		"The operator can allow it with SWITCHBOARD_PRIVATE_HOSTS; the connection is saved either way."
}

// Sink is Destination for the connection sink s
// delivers through, for a surface that has just saved s with the caller's
// permission (the REST API's sink create and update, MCP set_sink): a
// caller that picks an existing connection learns, as the human saving it
// did, that deliveries to it will be refused. "" when the connection is
// not the sink's to use any more, as when Destination says nothing.
func Sink(ctx context.Context, e *engine.Engine, s engine.Sink) string {
	core := enginecore.Of(e)
	return connectionWarning(ctx, core, s.ConnectionID, s.Owner, s.Kind)
}

// Connection is Destination for a connection the caller has
// just saved (the REST API's connection create, the web UI's connection
// page), and for an Apprise connection also for the hosts inside the
// Apprise URLs of its secret, which the Apprise server connects to and
// which are refused at send time by the same rule (apprise.Hosts). The
// warning about those never names the host or its address: the URLs are
// secret. "" when nothing will be refused or the connection is not there.
func Connection(ctx context.Context, e *engine.Engine, c engine.Connection) string {
	return connectionWarning(ctx, enginecore.Of(e), c.ID, c.Owner, c.Kind)
}

// connectionWarning is the warning for connection id of scope and kind, ""
// when it is not there (or not of that scope and kind).
func connectionWarning(ctx context.Context, core *enginecore.Core, id int64, scope notifytype.OwnerScope, kind string) string {
	c, err := core.ConnectionFor(ctx, core.Pool, id, scope, kind)
	if err != nil {
		return ""
	}
	if w := destination(ctx, core, c.AccountKey); w != "" || c.Kind != engine.KindApprise || c.Secret == nil {
		return w
	}
	_, secret, err := core.OpenConnection(ctx, core.Pool, id, scope, kind)
	if err != nil {
		return ""
	}
	as, err := apprise.ParseSecret(secret.Reveal())
	if err != nil {
		return ""
	}
	return appriseHostsWarning(ctx, core, as.URLs)
}

// appriseHostsWarning says when a host inside one of urls is, or resolves
// to, an address the guard will refuse at send time; a name that does not
// resolve now says nothing, as for a base URL.
func appriseHostsWarning(ctx context.Context, core *enginecore.Core, urls []string) string {
	ctx, cancel := context.WithTimeout(ctx, destinationCheckTimeout)
	defer cancel()
	for i, u := range urls {
		for _, host := range apprise.Hosts(u) {
			blocked, err := sinks.BlockedHostAddresses(ctx, nil, host, core.PrivateHosts)
			if errors.Is(err, sinks.ErrInvalidURL) || err == nil && len(blocked) > 0 {
				return fmt.Sprintf("Apprise URL %d of this connection names a private or loopback host (or writes an address with a trailing dot), "+
					"so deliveries through it will be refused as blocked. "+
					"The operator can allow private addresses with SWITCHBOARD_PRIVATE_HOSTS; the connection is saved either way.", i+1)
			}
		}
	}
	return ""
}
