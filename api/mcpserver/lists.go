package mcpserver

import (
	"context"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard/notify/host"
)

// The list verbs, one per family, so that an agent can discover the ids
// the other verbs take: list_queues (todos) the queues claim takes,
// list_webhooks (rules) the webhooks and rules the rule verbs take, and
// list_connections (notifications) the connections set_sink and
// set_digest take. Each is scoped exactly as the REST API's list and the
// verbs it serves: by the host or the engine, with the endpoint's
// principal. None lists a secret.

// List tool names.
const (
	ToolListQueues      = "list_queues"
	ToolListWebhooks    = "list_webhooks"
	ToolListConnections = "list_connections"
)

// ListIn is a list verb's input: none.
type ListIn struct{}

// QueueOut is a queue as list_queues answers it.
type QueueOut struct {
	ID      int64  `json:"id"`
	Owner   string `json:"owner" jsonschema:"the queue's owner scope, human:<id> or team:<id>"`
	Name    string `json:"name"`
	Pending int    `json:"pending" jsonschema:"todos waiting to be claimed"`
	Claimed int    `json:"claimed"`
	Done    int    `json:"done"`
	Dead    int    `json:"dead"`
}

// ListQueuesOut is list_queues' output.
type ListQueuesOut struct {
	Queues []QueueOut `json:"queues"`
}

// WebhookOut is a webhook as list_webhooks answers it, with its rules in
// order; never its signing secret.
type WebhookOut struct {
	ID             int64       `json:"id"`
	Owner          string      `json:"owner" jsonschema:"the webhook's owner scope, human:<id> or team:<id>"`
	Name           string      `json:"name"`
	TrustedSenders []string    `json:"trusted_senders" jsonschema:"the senders whose deliveries are routed; others are quarantined"`
	SenderExpr     string      `json:"sender_expr" jsonschema:"the jq expression that finds a delivery's sender"`
	SubjectExpr    string      `json:"subject_expr" jsonschema:"the jq expression that finds a delivery's subject"`
	Path           string      `json:"path" jsonschema:"where deliveries are posted"`
	CreatedAt      time.Time   `json:"created_at"`
	UpdatedAt      time.Time   `json:"updated_at"`
	Rules          []host.Rule `json:"rules" jsonschema:"the routing rules, in the order they run"`
}

// ListWebhooksOut is list_webhooks' output.
type ListWebhooksOut struct {
	Webhooks []WebhookOut `json:"webhooks"`
}

// ConnectionOut is a connection as list_connections answers it: never its
// secret, only whether it has one.
type ConnectionOut struct {
	ID         int64     `json:"id"`
	Owner      string    `json:"owner" jsonschema:"the connection's owner scope, human:<id> or team:<id>"`
	Kind       string    `json:"kind" jsonschema:"a sink takes a connection of its kind; a digest takes a cairn connection"`
	Name       string    `json:"name"`
	AccountKey string    `json:"account_key" jsonschema:"the server's base URL"`
	HasSecret  bool      `json:"has_secret" jsonschema:"whether a secret is stored; no verb reads it"`
	CreatedAt  time.Time `json:"created_at"`
}

// ListConnectionsOut is list_connections' output.
type ListConnectionsOut struct {
	Connections []ConnectionOut `json:"connections"`
}

func (ConnectionOut) refineSchema(s *jsonschema.Schema, _ limits) {
	prop(s, "kind").Enum = connKindEnum
}

func (WebhookOut) refineSchema(s *jsonschema.Schema, _ limits) {
	prop(s, "rules.action.notify_severity").Enum = severityEnum
}

func addListQueues(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:  ToolListQueues,
		Title: "List queues",
		Description: "List the queues this endpoint may claim from, with their todos counted by state: its owner scope's, " +
			"and for a personal endpoint those of the teams its human belongs to.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, c *caller, _ ListIn) (ListQueuesOut, error) {
		qs, err := s.d.Todos.ClaimableQueues(ctx, c.p.EndpointID)
		if err != nil {
			return ListQueuesOut{}, err
		}
		out := ListQueuesOut{Queues: make([]QueueOut, len(qs))}
		for i, q := range qs {
			out.Queues[i] = QueueOut{ID: q.ID, Owner: q.Owner.String(), Name: q.Name,
				Pending: q.Pending, Claimed: q.Claimed, Done: q.Done, Dead: q.Dead}
		}
		return out, nil
	})
}

func addListWebhooks(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:        ToolListWebhooks,
		Title:       "List webhooks and their rules",
		Description: "List the webhooks of this endpoint's owner scope, each with its routing rules in order. Signing secrets are never listed.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, c *caller, _ ListIn) (ListWebhooksOut, error) {
		hooks, err := s.d.Webhooks.List(ctx, c.p, c.p.EndpointScope)
		if err != nil {
			return ListWebhooksOut{}, err
		}
		out := ListWebhooksOut{Webhooks: make([]WebhookOut, len(hooks))}
		for i, h := range hooks {
			rules, err := s.d.Webhooks.Rules(ctx, c.p, h.ID)
			if err != nil {
				return ListWebhooksOut{}, err
			}
			out.Webhooks[i] = WebhookOut{
				ID: h.ID, Owner: h.Owner.String(), Name: h.Name, TrustedSenders: h.TrustedSenders,
				SenderExpr: h.SenderExpr, SubjectExpr: h.SubjectExpr, Path: h.Path,
				CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt, Rules: rules,
			}
		}
		return out, nil
	})
}

func addListConnections(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:  ToolListConnections,
		Title: "List connections",
		Description: "List the connections (Gotify, Apprise and Cairn servers) of this endpoint's owner scope, the ids set_sink and " +
			"set_digest take. Secrets are never listed, and no verb here creates a connection: the owner does.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, c *caller, _ ListIn) (ListConnectionsOut, error) {
		conns, err := s.d.Engine.ListConnections(ctx, c.p, c.p.EndpointScope)
		if err != nil {
			return ListConnectionsOut{}, err
		}
		out := ListConnectionsOut{Connections: make([]ConnectionOut, len(conns))}
		for i, cn := range conns {
			out.Connections[i] = ConnectionOut{
				ID: cn.ID, Owner: cn.Owner.String(), Kind: cn.Kind, Name: cn.Name,
				AccountKey: cn.BaseURL, HasSecret: cn.HasSecret, CreatedAt: cn.CreatedAt,
			}
		}
		return out, nil
	})
}
