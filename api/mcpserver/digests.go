package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/host/hostid"
)

// Digest verbs, in the notifications family (off by default, D5): thin over
// the engine's digest service with the endpoint's principal, so a granted
// endpoint acts only in its own owner scope with its accountable human's
// permissions there, names only that scope's queues, sinks and Cairn
// connections, and every write records the endpoint and its human.
const (
	ToolListDigests  = "list_digests"
	ToolSetDigest    = "set_digest"
	ToolDeleteDigest = "delete_digest"
)

// DigestOut is a digest as the verbs answer it (the REST API's shape).
type DigestOut struct {
	ID                    int64      `json:"id"`
	Owner                 string     `json:"owner"`
	Name                  string     `json:"name"`
	Schedule              string     `json:"schedule"`
	QueueIDs              []int64    `json:"queue_ids" jsonschema:"the queues covered; empty means every queue of the owner scope"`
	SinkIDs               []int64    `json:"sink_ids"`
	CairnConnectionID     int64      `json:"cairn_connection_id,omitempty"`
	SkipWhenQuiet         bool       `json:"skip_when_quiet"`
	QuietThresholdSeconds int64      `json:"quiet_threshold_seconds"`
	LastSentAt            *time.Time `json:"last_sent_at,omitempty"`
	NextSendAt            *time.Time `json:"next_send_at,omitempty"`
	UpdatedByHumanID      int64      `json:"updated_by_human_id"`
	UpdatedByEndpointID   int64      `json:"updated_by_endpoint_id,omitempty"`
}

func digestOut(d digests.Digest) DigestOut {
	return DigestOut{
		ID: d.ID, Owner: d.Owner.String(), Name: d.Name, Schedule: d.Schedule,
		QueueIDs: nonNil(d.QueueIDs), SinkIDs: nonNil(d.SinkIDs), CairnConnectionID: d.CairnConnectionID,
		SkipWhenQuiet: d.SkipWhenQuiet, QuietThresholdSeconds: int64(d.QuietThreshold / time.Second),
		LastSentAt: d.LastSentAt, NextSendAt: timePtr(d.NextSendAt),
		UpdatedByHumanID: hostid.Number(d.UpdatedByHumanID), UpdatedByEndpointID: d.UpdatedByEndpointID,
	}
}

// ListDigestsIn is list_digests's input: none.
type ListDigestsIn struct{}

// ListDigestsOut is list_digests's output.
type ListDigestsOut struct {
	Digests []DigestOut `json:"digests"`
}

// SetDigestIn is set_digest's input: without id it creates a digest in the
// endpoint's owner scope; with id it changes that digest, an absent field
// keeping its value.
type SetDigestIn struct {
	ID                    int64    `json:"id,omitempty" jsonschema:"the digest to change; omit to create one"`
	Name                  *string  `json:"name,omitempty" jsonschema:"unique in the owner scope, 1 to 64 characters; required to create"`
	Schedule              *string  `json:"schedule,omitempty" jsonschema:"the schedule: optional zone prefix TZ=<IANA zone>, then days and HH:MM send times (comma-separated); days *, daily, Mon..Sun, Mon-Fri or a comma list, e.g. TZ=Europe/Berlin Mon-Fri 09:00; required to create"`
	QueueIDs              *[]int64 `json:"queue_ids,omitempty" jsonschema:"queues of the owner scope to cover; empty means all"`
	SinkIDs               *[]int64 `json:"sink_ids,omitempty" jsonschema:"sinks of the owner scope the digest goes to"`
	CairnConnectionID     *int64   `json:"cairn_connection_id,omitempty" jsonschema:"an existing cairn connection of the owner scope to publish the digest to (list_connections lists them); 0 for none"`
	SkipWhenQuiet         *bool    `json:"skip_when_quiet,omitempty" jsonschema:"do not send a quiet digest; defaults to true"`
	QuietThresholdSeconds *int64   `json:"quiet_threshold_seconds,omitempty" jsonschema:"oldest-pending age above which a digest is not quiet; defaults to 3600"`
}

// DigestIDIn names a digest.
type DigestIDIn struct {
	ID int64 `json:"id" jsonschema:"a digest of the endpoint's owner scope"`
}

// DeleteDigestOut is delete_digest's output.
type DeleteDigestOut struct {
	Deleted bool  `json:"deleted"`
	ID      int64 `json:"id"`
}

func addListDigests(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:        ToolListDigests,
		Title:       "List digests",
		Description: "List the queue digests (scheduled reports to the owner's sinks or Cairn) of this endpoint's owner scope.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, c *caller, _ ListDigestsIn) (ListDigestsOut, error) {
		ds, err := s.d.Digests.List(ctx, c.p, c.p.EndpointScope)
		if err != nil {
			return ListDigestsOut{}, err
		}
		out := ListDigestsOut{Digests: make([]DigestOut, len(ds))}
		for i, d := range ds {
			out.Digests[i] = digestOut(d)
		}
		return out, nil
	})
}

func addSetDigest(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:  ToolSetDigest,
		Title: "Create or change a digest",
		Description: "Create a queue digest in this endpoint's owner scope (omit id) or change one (give id): its name, " +
			"schedule, queues, sinks, Cairn connection and quiet rule. At most 5 digests per owner scope." + bodyLimitNote,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)},
	}, func(ctx context.Context, c *caller, in SetDigestIn) (DigestOut, error) {
		var threshold *time.Duration
		if in.QuietThresholdSeconds != nil {
			threshold = ptr(time.Duration(*in.QuietThresholdSeconds) * time.Second)
		}
		var d digests.Digest
		var err error
		if in.ID == 0 {
			d, err = s.d.Digests.Create(ctx, c.p, digests.Input{
				Owner: c.p.EndpointScope, Name: deref(in.Name), Schedule: deref(in.Schedule),
				QueueIDs: deref(in.QueueIDs), SinkIDs: deref(in.SinkIDs), CairnConnectionID: deref(in.CairnConnectionID),
				SkipWhenQuiet: in.SkipWhenQuiet, QuietThreshold: deref(threshold),
			})
		} else {
			d, err = s.d.Digests.Update(ctx, c.p, in.ID, digests.Patch{
				Name: in.Name, Schedule: in.Schedule, QueueIDs: in.QueueIDs, SinkIDs: in.SinkIDs,
				CairnConnectionID: in.CairnConnectionID, SkipWhenQuiet: in.SkipWhenQuiet, QuietThreshold: threshold,
			})
		}
		if engine.IsConnectionRefusal(err) {
			return DigestOut{}, connectionArgument("cairn_connection_id", "cairn connection")
		}
		if err != nil {
			return DigestOut{}, err
		}
		return digestOut(d), nil
	})
}

func addDeleteDigest(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:        ToolDeleteDigest,
		Title:       "Delete a digest",
		Description: "Delete a queue digest of this endpoint's owner scope.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
	}, func(ctx context.Context, c *caller, in DigestIDIn) (DeleteDigestOut, error) {
		if err := s.d.Digests.Delete(ctx, c.p, in.ID); err != nil {
			return DeleteDigestOut{}, err
		}
		return DeleteDigestOut{Deleted: true, ID: in.ID}, nil
	})
}
