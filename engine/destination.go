package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/apprise"
	"github.com/switchboard/notify/store"
)

// destinationCheckTimeout bounds the DNS lookup of a save-time check.
const destinationCheckTimeout = 3 * time.Second

// DestinationWarning says, in words for the human saving a connection,
// why its base URL will be refused at send time: it resolves to a private,
// loopback or otherwise special-purpose address the operator has not
// allowed. "" when the guard would let it through, or when the name does
// not resolve now (the send will say so). It never dials the server and
// never refuses a save: DNS can change before the send, and the guard
// decides then.
func (e *Engine) DestinationWarning(ctx context.Context, base string) string {
	ctx, cancel := context.WithTimeout(ctx, destinationCheckTimeout)
	defer cancel()
	blocked, err := sinks.BlockedAddresses(ctx, nil, base, e.cfg.PrivateHosts)
	if err != nil || len(blocked) == 0 {
		return ""
	}
	return "This server's address (" + blocked[0].String() + ") is private or loopback, so deliveries to it will be refused as blocked. " +
		"The operator can allow it with SWITCHBOARD_PRIVATE_HOSTS; the connection is saved either way."
}

// SinkDestinationWarning is DestinationWarning for the connection sink s
// delivers through, for a surface that has just saved s with the caller's
// permission (the REST API's sink create and update, MCP set_sink): a
// caller that picks an existing connection learns, as the human saving it
// did, that deliveries to it will be refused. "" when the connection is
// not the sink's to use any more, as when DestinationWarning says nothing.
func (e *Engine) SinkDestinationWarning(ctx context.Context, s Sink) string {
	c, err := connectionFor(ctx, e.cfg.Pool, s.ConnectionID, s.Owner, s.Kind)
	if err != nil {
		return ""
	}
	return e.connectionWarning(ctx, c)
}

// ConnectionWarning is DestinationWarning for a connection the caller has
// just saved (the REST API's connection create, the web UI's connection
// page), and for an Apprise connection also for the hosts inside the
// Apprise URLs of its secret, which the Apprise server connects to and
// which are refused at send time by the same rule (apprise.Hosts). The
// warning about those never names the host or its address: the URLs are
// secret. "" when nothing will be refused or the connection is not there.
func (e *Engine) ConnectionWarning(ctx context.Context, c Connection) string {
	row, err := connectionFor(ctx, e.cfg.Pool, c.ID, c.Owner, c.Kind)
	if err != nil {
		return ""
	}
	return e.connectionWarning(ctx, row)
}

func (e *Engine) connectionWarning(ctx context.Context, c store.Connection) string {
	if w := e.DestinationWarning(ctx, c.AccountKey); w != "" || c.Kind != KindApprise || c.Secret == nil {
		return w
	}
	secret, err := e.vault().Open(c.ID, c.Owner, c.Secret)
	if err != nil {
		return ""
	}
	as, err := apprise.ParseSecret(secret.Reveal())
	if err != nil {
		return ""
	}
	return e.appriseHostsWarning(ctx, as.URLs)
}

// appriseHostsWarning says when a host inside one of urls is, or resolves
// to, an address the guard will refuse at send time; a name that does not
// resolve now says nothing, as for a base URL.
func (e *Engine) appriseHostsWarning(ctx context.Context, urls []string) string {
	ctx, cancel := context.WithTimeout(ctx, destinationCheckTimeout)
	defer cancel()
	for i, u := range urls {
		for _, host := range apprise.Hosts(u) {
			blocked, err := sinks.BlockedHostAddresses(ctx, nil, host, e.cfg.PrivateHosts)
			if errors.Is(err, sinks.ErrInvalidURL) || err == nil && len(blocked) > 0 {
				return fmt.Sprintf("Apprise URL %d of this connection names a private or loopback host (or writes an address with a trailing dot), "+
					"so deliveries through it will be refused as blocked. "+
					"The operator can allow private addresses with SWITCHBOARD_PRIVATE_HOSTS; the connection is saved either way.", i+1)
			}
		}
	}
	return ""
}
