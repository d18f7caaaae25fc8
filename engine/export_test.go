package engine

import (
	"context"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// OpenConnectionForTest exposes openConnection, the check delivery runs on
// every use of a connection, to the external tests.
func (e *Engine) OpenConnectionForTest(ctx context.Context, id int64, scope notifytype.OwnerScope, kind string) (notifytype.Secret, error) {
	_, s, err := e.openConnection(ctx, e.cfg.Pool, id, scope, kind)
	return s, err
}

// WrapAdaptersForTest makes every adapter the engine builds pass through
// wrap, so a test can make one panic or stall. Set it before Serve.
func (e *Engine) WrapAdaptersForTest(wrap func(sinkID int64, a sinks.Adapter) sinks.Adapter) {
	e.wrapAdapter = wrap
}
