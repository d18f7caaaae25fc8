package engine_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host/hosttest"
)

// stopAtClaim is a batch tracer that ends the engine's Serve (stop) the
// moment the answer of a claim arrives, before the claimer has read the
// rest of its round trip: a deploy landing between a claim's commit and
// its rows reaching the actors.
//
// Whether that rest is still to be read when the stop lands is made
// certain, not left to the network: the connection hands pgx one byte per
// read (tricklingConn), so nothing past the claim's answer is buffered;
// the stop cancels the running engine's context at once (not when Serve
// gets round to it), so whether it reached the claim's own context is
// known in the tracer; where it did, the tracer waits until pgx has acted
// on it (set the connection's deadline), so the next read is the one a
// cancelled claim fails.
type stopAtClaim struct {
	once sync.Once
	stop context.CancelFunc
}

// tricklingConn reads one byte at a time and tells when a deadline is
// set on it (pgx's answer to a cancelled context).
type tricklingConn struct {
	net.Conn
	once     sync.Once
	deadline chan struct{}
}

func trickle(_ context.Context, _ *pgconn.Config, c net.Conn) (net.Conn, error) {
	return &tricklingConn{Conn: c, deadline: make(chan struct{})}, nil
}

func (c *tricklingConn) Read(p []byte) (int, error) { return c.Conn.Read(p[:min(len(p), 1)]) }

func (c *tricklingConn) SetDeadline(t time.Time) error {
	err := c.Conn.SetDeadline(t)
	if !t.IsZero() {
		c.once.Do(func() { close(c.deadline) })
	}
	return err
}

func (s *stopAtClaim) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (s *stopAtClaim) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	if d.Err == nil && strings.Contains(d.SQL, "WITH dead AS MATERIALIZED") && d.CommandTag.RowsAffected() > 0 {
		s.once.Do(func() {
			s.stop()
			if ctx.Err() != nil {
				// The stop reached the claim itself: let pgx act on it
				// before the rest of the answer is read.
				<-c.PgConn().Conn().(*tricklingConn).deadline
			}
		})
	}
}

func (s *stopAtClaim) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (s *stopAtClaim) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (s *stopAtClaim) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A stop that lands while a claim's answer is on its way does not strand
// the claim's rows: the claim is read to its end, and its rows go to the
// actors or, the actors stopping, back to pending; none stays claimed
// until its claim expires (on 9dd5114 both fresh-clone CI runs left two
// rows claimed in TestDeliveryGracefulStopReleasesQueuedRows this way).
func TestAStopDuringAClaimLeavesNoRowClaimed(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	w.Sink(w.Engine(), p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.stopclaim"})
	// Each round strands rows on the mutant claim-survives-stop (the
	// tracer makes the cut certain); a second round checks that a stop's
	// cut leaves nothing behind for the next engine either.
	for round := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		pc, err := pgxpool.ParseConfig(w.URL)
		require.NoError(t, err)
		tracer := &stopAtClaim{}
		pc.ConnConfig.Tracer = tracer
		pc.ConnConfig.AfterNetConnect = trickle
		pool, err := pgxpool.NewWithConfig(context.Background(), pc)
		require.NoError(t, err)
		t.Cleanup(pool.Close) // closing twice is a no-op
		eng, err := engine.New(w.Config(pool))
		require.NoError(t, err)
		tracer.stop = func() { eng.CancelRunForTest(); cancel() }
		for i := range 5 {
			w.Emit(eng, deadLetterOf(scope, int64(round*5+i+1)))
		}

		stopErr := eng.Serve(ctx)
		cancel() // the tracer stopped it; a Serve that ended otherwise must not leak its context
		pool.Close()
		require.True(t, errors.Is(stopErr, context.Canceled), "%v", stopErr)
		states := w.RowStates()
		require.Zero(t, states["claimed"], "round %d: rows left claimed by a stop during their claim: %v; the engine logged:\n%s",
			round, states, w.Logs)
	}
}
