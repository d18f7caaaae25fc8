package engine

import (
	"context"

	"github.com/thejerf/suture/v4"

	"github.com/switchboard/notify/internal/enginecore"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// The engine's inside, for its feature packages (engine/digests, ...):
// out of the exported API, reached through internal/enginecore.
func init() {
	enginecore.Of = func(e any) *enginecore.Core { return e.(*Engine).core }
}

// newCore is e's inside for its feature packages.
func (e *Engine) newCore() *enginecore.Core {
	return &enginecore.Core{
		Pool: e.cfg.Pool, Logger: e.log, BaseURL: e.cfg.BaseURL, Client: e.client,
		Authorize: func(ctx context.Context, p enginecore.Principal, scope notifytype.OwnerScope, write bool) error {
			return e.authorize(ctx, Principal(p), scope, write)
		},
		AuthorizeTarget: func(ctx context.Context, p enginecore.Principal, scope notifytype.OwnerScope) error {
			return e.authorizeTarget(ctx, Principal(p), scope)
		},
		AuthorizeResource: func(ctx context.Context, p enginecore.Principal, scope notifytype.OwnerScope, write bool, what string) error {
			return e.authorizeResource(ctx, Principal(p), scope, write, what)
		},
		CheckEndpointMember: func(ctx context.Context, p enginecore.Principal) error {
			return e.checkEndpointMember(ctx, Principal(p))
		},
		Owned: func(ctx context.Context, scope notifytype.OwnerScope, kind string, ids []int64) ([]int64, error) {
			return e.cfg.Directory.Owned(ctx, scope, Resource(kind), ids)
		},
		PrivateHosts: e.cfg.PrivateHosts,
		Now:          e.now,
		NowOrLocal:   e.nowOrLocal,
		AdapterFor: func(s store.SinkForDelivery) (sinks.Adapter, string) {
			a, _, refusal := e.adapterFor(s)
			return a, refusal
		},
		Send:           e.send,
		ConnectionFor:  connectionFor,
		OpenConnection: e.openConnection,
		StatementNow:   e.statementNow,
		DigestLink: func(owner notifytype.OwnerScope, id int64) string {
			if e.cfg.Links.Digest == nil {
				return ""
			}
			return e.cfg.Links.Digest(owner, id)
		},
		ItemLink: func(owner notifytype.OwnerScope, kind string, id int64) string {
			if e.cfg.Links.Item == nil {
				return ""
			}
			return e.cfg.Links.Item(owner, Resource(kind), id)
		},
		LinkText:   e.cfg.Links.Text,
		AddService: e.addService,
	}
}

// addService runs svc under the supervision tree: from Start, or at once
// when the engine runs.
func (e *Engine) addService(svc enginecore.Service) {
	e.svcMu.Lock()
	defer e.svcMu.Unlock()
	e.services = append(e.services, svc)
	if e.root != nil {
		e.root.Add(svc)
	}
}

// addServicesTo adds the feature packages' services to root, and has later
// ones join it until the engine stops.
func (e *Engine) addServicesTo(root *suture.Supervisor) {
	e.svcMu.Lock()
	defer e.svcMu.Unlock()
	for _, svc := range e.services {
		root.Add(svc)
	}
	e.root = root
}

// servicesStopped has later services wait for the next Start (an engine
// starts once: none).
func (e *Engine) servicesStopped() {
	e.svcMu.Lock()
	defer e.svcMu.Unlock()
	e.root = nil
}
