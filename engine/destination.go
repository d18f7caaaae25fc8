package engine

import (
	"context"
	"time"

	"github.com/switchboard/notify/sinks"
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
	return e.DestinationWarning(ctx, c.AccountKey)
}
