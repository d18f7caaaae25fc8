package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/warnings"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// The notifications family (REQ-5): thin over the engine's management
// service with the endpoint's principal, so the engine decides the grant,
// the owner scope (the endpoint's only), the accountable human's role, the
// connection (existing, same scope and kind), options, schemes, the ceiling
// and the budget bounds, and records the endpoint and its human on every
// write. No verb here creates a connection or reads a secret.

// SinkOut is a sink as the notifications verbs answer it (the REST API's
// shape).
type SinkOut struct {
	ID                  int64          `json:"id"`
	Owner               string         `json:"owner" jsonschema:"the sink's owner scope, human:<id> or team:<id>"`
	Name                string         `json:"name"`
	Kind                string         `json:"kind" jsonschema:"gotify or apprise"`
	ConnectionID        int64          `json:"connection_id"`
	Enabled             bool           `json:"enabled"`
	Options             map[string]any `json:"options"`
	BudgetPerHour       int            `json:"budget_per_hour"`
	BudgetBurst         int            `json:"budget_burst"`
	CreatedAt           time.Time      `json:"created_at"`
	UpdatedAt           time.Time      `json:"updated_at"`
	UpdatedByHumanID    int64          `json:"updated_by_human_id"`
	UpdatedByEndpointID int64          `json:"updated_by_endpoint_id,omitempty"`
	Warning             string         `json:"warning,omitempty" jsonschema:"set_sink only: the sink's connection resolves to a private or loopback address the operator has not allowed, so its deliveries will be refused as blocked; the sink is saved either way"`
}

func sinkOut(s engine.Sink) (SinkOut, error) {
	opts, err := jsonObject(s.Options)
	if err != nil {
		return SinkOut{}, err
	}
	return SinkOut{
		ID: s.ID, Owner: s.Owner.String(), Name: s.Name, Kind: s.Kind, ConnectionID: s.ConnectionID,
		Enabled: s.Enabled, Options: opts, BudgetPerHour: s.BudgetPerHour, BudgetBurst: s.BudgetBurst,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		UpdatedByHumanID: hostid.Number(s.UpdatedByHumanID), UpdatedByEndpointID: s.UpdatedByEndpointID,
	}, nil
}

// ListSinksIn is list_sinks's input: none.
type ListSinksIn struct{}

// ListSinksOut is list_sinks's output.
type ListSinksOut struct {
	Sinks []SinkOut `json:"sinks"`
}

// SetSinkIn is set_sink's input: without id it creates a sink in the
// endpoint's owner scope; with id it changes that sink, an absent field
// keeping its value.
type SetSinkIn struct {
	ID            int64          `json:"id,omitempty" jsonschema:"the sink to change; omit to create a sink"`
	Name          *string        `json:"name,omitempty" jsonschema:"unique in the owner scope, 1 to 64 characters; required to create"`
	Kind          string         `json:"kind,omitempty" jsonschema:"gotify or apprise; required to create, and fixed after (omit it when changing a sink)"`
	ConnectionID  *int64         `json:"connection_id,omitempty" jsonschema:"an existing connection of the endpoint's owner scope and of the sink's kind (list_connections lists them); required to create"`
	Enabled       *bool          `json:"enabled,omitempty" jsonschema:"defaults to true on create"`
	Options       map[string]any `json:"options,omitempty" jsonschema:"per kind: gotify {priorities: {low, normal, high}}; apprise {config_key?, tag?, types: {low, normal, high}}; replaces the stored options"`
	BudgetPerHour *int           `json:"budget_per_hour,omitempty" jsonschema:"messages an hour; defaults to 30 on create"`
	BudgetBurst   *int           `json:"budget_burst,omitempty" jsonschema:"messages at once; defaults to 10 on create"`
}

// SinkIDIn names a sink.
type SinkIDIn struct {
	ID int64 `json:"id" jsonschema:"a sink of the endpoint's owner scope"`
}

// DeleteSinkOut is delete_sink's output.
type DeleteSinkOut struct {
	Deleted bool  `json:"deleted"`
	ID      int64 `json:"id"`
}

// TestSinkOut is test_sink's output: success, or the error class.
type TestSinkOut struct {
	Delivered  bool   `json:"delivered"`
	ErrorClass string `json:"error_class,omitempty" jsonschema:"why it failed: network, timeout, tls, auth, rejected, server, redirect, partial, config or blocked"`
	HTTPStatus int    `json:"http_status,omitempty"`
}

// SubscriptionIn is one subscription as set_sink_subscriptions takes it.
type SubscriptionIn struct {
	EventTypes     []string `json:"event_types" jsonschema:"one or more of the event types this server declares (the enum lists them)"`
	Queues         []int64  `json:"queues,omitempty" jsonschema:"only events of these queues of the owner scope; empty means any"`
	Endpoints      []int64  `json:"endpoints,omitempty" jsonschema:"only events of these endpoints of the owner scope; empty means any"`
	Webhooks       []int64  `json:"webhooks,omitempty" jsonschema:"only events of these webhooks of the owner scope; empty means any"`
	MinSeverity    string   `json:"min_severity,omitempty" jsonschema:"low, normal or high; defaults to low"`
	IncludeExcerpt bool     `json:"include_excerpt,omitempty" jsonschema:"let messages carry up to 280 characters of the subject's body; defaults to false"`
}

// SetSinkSubscriptionsIn is set_sink_subscriptions's input.
type SetSinkSubscriptionsIn struct {
	SinkID        int64            `json:"sink_id" jsonschema:"a sink of the endpoint's owner scope"`
	Subscriptions []SubscriptionIn `json:"subscriptions" jsonschema:"the sink's subscriptions in full: they replace the stored ones (an empty list clears them)"`
}

// SubscriptionOut is a subscription as the verbs answer it.
type SubscriptionOut struct {
	ID                  int64     `json:"id"`
	SinkID              int64     `json:"sink_id"`
	Owner               string    `json:"owner"`
	EventTypes          []string  `json:"event_types"`
	Queues              []int64   `json:"queues"`
	Endpoints           []int64   `json:"endpoints"`
	Webhooks            []int64   `json:"webhooks"`
	MinSeverity         string    `json:"min_severity"`
	IncludeExcerpt      bool      `json:"include_excerpt"`
	CreatedAt           time.Time `json:"created_at"`
	CreatedByHumanID    int64     `json:"created_by_human_id"`
	CreatedByEndpointID int64     `json:"created_by_endpoint_id,omitempty"`
}

// SetSinkSubscriptionsOut is set_sink_subscriptions's output.
type SetSinkSubscriptionsOut struct {
	Subscriptions []SubscriptionOut `json:"subscriptions"`
}

func subscriptionOut(s engine.Subscription) SubscriptionOut {
	types := make([]string, len(s.EventTypes))
	for i, t := range s.EventTypes {
		types[i] = string(t)
	}
	return SubscriptionOut{
		ID: s.ID, SinkID: s.SinkID, Owner: s.Owner.String(), EventTypes: types,
		Queues: nonNil(s.Queues), Endpoints: nonNil(s.Endpoints), Webhooks: nonNil(s.Webhooks),
		MinSeverity: string(s.MinSeverity), IncludeExcerpt: s.IncludeExcerpt, CreatedAt: s.CreatedAt,
		CreatedByHumanID: hostid.Number(s.CreatedByHumanID), CreatedByEndpointID: s.CreatedByEndpointID,
	}
}

func nonNil(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

func addListSinks(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:        ToolListSinks,
		Title:       "List sinks",
		Description: "List the sinks (Gotify and Apprise servers the owner is notified through) of this endpoint's owner scope.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, c *caller, _ ListSinksIn) (ListSinksOut, error) {
		sinks, err := s.d.Engine.ListSinks(ctx, c.p, c.p.EndpointScope)
		if err != nil {
			return ListSinksOut{}, err
		}
		out := ListSinksOut{Sinks: make([]SinkOut, len(sinks))}
		for i, sk := range sinks {
			if out.Sinks[i], err = sinkOut(sk); err != nil {
				return ListSinksOut{}, err
			}
		}
		return out, nil
	})
}

func addSetSink(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:  ToolSetSink,
		Title: "Create or change a sink",
		Description: "Create a sink in this endpoint's owner scope (omit id) or change one (give id): its name, " +
			"connection, enabled, options and budget. The connection must already exist in the owner scope " +
			"and be of the sink's kind; this verb never creates a connection or reads a secret." + bodyLimitNote,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)},
	}, func(ctx context.Context, c *caller, in SetSinkIn) (SinkOut, error) {
		var opts json.RawMessage
		if in.Options != nil {
			b, err := json.Marshal(in.Options)
			if err != nil {
				return SinkOut{}, fmt.Errorf("error encoding options: %w", err)
			}
			opts = b
		}
		var sk engine.Sink
		var err error
		if in.ID == 0 {
			sk, err = s.d.Engine.CreateSink(ctx, c.p, engine.SinkInput{
				Owner: c.p.EndpointScope, Name: deref(in.Name), Kind: in.Kind, ConnectionID: deref(in.ConnectionID),
				Enabled: in.Enabled, Options: opts, BudgetPerHour: deref(in.BudgetPerHour), BudgetBurst: deref(in.BudgetBurst),
			})
		} else {
			if in.Kind != "" {
				return SinkOut{}, notifytype.InvalidArgument("kind", "a sink's kind is fixed; omit kind when changing a sink")
			}
			patch := engine.SinkPatch{
				Name: in.Name, ConnectionID: in.ConnectionID, Enabled: in.Enabled,
				BudgetPerHour: in.BudgetPerHour, BudgetBurst: in.BudgetBurst,
			}
			if opts != nil {
				patch.Options = &opts
			}
			sk, err = s.d.Engine.UpdateSink(ctx, c.p, in.ID, patch)
		}
		if engine.IsConnectionRefusal(err) {
			return SinkOut{}, connectionArgument("connection_id", "connection of the sink's kind")
		}
		if err != nil {
			return SinkOut{}, err
		}
		out, err := sinkOut(sk)
		if err != nil {
			return SinkOut{}, err
		}
		out.Warning = warnings.Sink(ctx, s.d.Engine, sk)
		return out, nil
	})
}

func addDeleteSink(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:        ToolDeleteSink,
		Title:       "Delete a sink",
		Description: "Delete a sink of this endpoint's owner scope, with its subscriptions. Its delivery records stay.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
	}, func(ctx context.Context, c *caller, in SinkIDIn) (DeleteSinkOut, error) {
		if err := s.d.Engine.DeleteSink(ctx, c.p, in.ID); err != nil {
			return DeleteSinkOut{}, err
		}
		return DeleteSinkOut{Deleted: true, ID: in.ID}, nil
	})
}

func addTestSink(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:  ToolTestSink,
		Title: "Send a test message",
		Description: "Send one message titled as a test through a sink of this endpoint's owner scope, now, " +
			"and report success or the error class. At most 6 a minute per sink.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(true)},
	}, func(ctx context.Context, c *caller, in SinkIDIn) (TestSinkOut, error) {
		res, err := s.d.Engine.SendTestMessage(ctx, c.p, in.ID)
		if err != nil {
			return TestSinkOut{}, err
		}
		return TestSinkOut{Delivered: res.Delivered, ErrorClass: string(res.Class), HTTPStatus: res.Status}, nil
	})
}

func addSetSinkSubscriptions(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:  ToolSetSinkSubscriptions,
		Title: "Set a sink's subscriptions",
		Description: "Replace all subscriptions of a sink of this endpoint's owner scope: which events it hears of, " +
			"filtered to queues, endpoints or webhooks of the owner scope and a minimum severity. All or nothing." + bodyLimitNote,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
	}, func(ctx context.Context, c *caller, in SetSinkSubscriptionsIn) (SetSinkSubscriptionsOut, error) {
		ins := make([]engine.SubscriptionInput, len(in.Subscriptions))
		for i, sub := range in.Subscriptions {
			types := make([]notifytype.EventType, len(sub.EventTypes))
			for j, t := range sub.EventTypes {
				types[j] = notifytype.EventType(t)
			}
			ins[i] = engine.SubscriptionInput{
				EventTypes: types, Queues: sub.Queues, Endpoints: sub.Endpoints, Webhooks: sub.Webhooks,
				MinSeverity: notifytype.Severity(sub.MinSeverity), IncludeExcerpt: sub.IncludeExcerpt,
			}
		}
		subs, err := s.d.Engine.SetSubscriptions(ctx, c.p, in.SinkID, ins)
		if err != nil {
			return SetSinkSubscriptionsOut{}, itemPath(err, "subscriptions")
		}
		out := SetSinkSubscriptionsOut{Subscriptions: make([]SubscriptionOut, len(subs))}
		for i, sub := range subs {
			out.Subscriptions[i] = subscriptionOut(sub)
		}
		return out, nil
	})
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
