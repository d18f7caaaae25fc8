package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
)

// stuckServer is an HTTP server whose graceful shutdown never finishes
// (a handler that does not return): Shutdown hits its limit.
type stuckServer struct {
	closed   chan struct{}
	serveErr chan error
}

func (s *stuckServer) Shutdown(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func (s *stuckServer) Close() error {
	close(s.closed)
	s.serveErr <- http.ErrServerClosed
	return nil
}

// serve always stops the engine and waits for it, even when HTTP's
// shutdown hits its limit (issue 23, defect 5): on e6a7fa7 it returned
// the shutdown error at once, with the engine still stopping (and the
// pool closed under it by the deferred close). Its error names both what
// HTTP and what the engine's stop left.
func TestServeWaitsForTheEngineWhenHTTPShutdownHitsItsLimit(t *testing.T) {
	t.Parallel()
	srv := &stuckServer{closed: make(chan struct{}), serveErr: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // SIGTERM

	stopped, engineDone := make(chan struct{}), make(chan struct{})
	waited := false
	stopErr := &engine.StopError{Unfinished: []string{"recorder: 1 delivery outcomes not written within RecordGrace (8s)"}}
	err := stopServing(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), srv, srv.serveErr, 10*time.Millisecond,
		func() { close(stopped) },
		func() error {
			select {
			case <-stopped:
			default:
				t.Error("the engine was waited for before it was told to stop")
			}
			close(engineDone)
			waited = true
			return stopErr
		})
	require.True(t, waited, "serve returned without waiting for the engine")
	select {
	case <-srv.closed:
	default:
		t.Fatal("the connections still open at the shutdown's limit were not closed")
	}
	require.ErrorIs(t, err, context.DeadlineExceeded, "the HTTP shutdown's limit is reported")
	var se *engine.StopError
	require.True(t, errors.As(err, &se), "the engine's stop report is returned: %v", err)
	require.Contains(t, err.Error(), "recorder")
}

// A clean stop of HTTP and the engine returns nil.
func TestServeStopsCleanly(t *testing.T) {
	t.Parallel()
	serveErr := make(chan error, 1)
	srv := &cleanServer{serveErr: serveErr}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stopped := false
	err := stopServing(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), srv, serveErr, time.Minute,
		func() { stopped = true }, func() error { return nil })
	require.NoError(t, err)
	require.True(t, stopped)
}

type cleanServer struct{ serveErr chan error }

func (s *cleanServer) Shutdown(context.Context) error { s.serveErr <- http.ErrServerClosed; return nil }
func (s *cleanServer) Close() error                   { return nil }

// The serve command's documented bound nests the engine's.
func TestServeStopBoundCoversTheEngines(t *testing.T) {
	t.Parallel()
	require.Equal(t, shutdownTimeout+engine.StopTimeoutDefault+serveStopMargin, stopBound(engine.StopTimeoutDefault))
}
