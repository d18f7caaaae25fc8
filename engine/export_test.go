package engine

import (
	"context"
	"time"

	"github.com/switchboard/notify/notifytype"
)

// OpenConnectionForTest exposes openConnection, the check delivery runs on
// every use of a connection, to the external tests.
func (e *Engine) OpenConnectionForTest(ctx context.Context, id int64, scope notifytype.OwnerScope, kind string) (notifytype.Secret, error) {
	_, s, err := e.openConnection(ctx, e.cfg.Pool, id, scope, kind)
	return s, err
}

// JanitorLockKeyForTest is the advisory lock the janitor holds while it
// cleans up, so a test can hold it as another instance would.
const JanitorLockKeyForTest = janitorLockKey

// SetRecordTryTimeoutForTest shortens one try of the recorder's write, so
// a test can make writes fail quickly. Set it before Serve.
func (e *Engine) SetRecordTryTimeoutForTest(d time.Duration) { e.recorder.tryTimeout = d }
