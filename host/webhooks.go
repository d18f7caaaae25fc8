package host

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/clocks"
	"github.com/switchboard/notify/engine/history"
	"github.com/switchboard/notify/engine/vault"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/host/rulesandbox"
	"github.com/switchboard/notify/notifytype"
)

// Bounds and defaults of webhooks (D17).
const (
	// DeliveryMaxBytes bounds a delivery's body: 256 KiB.
	DeliveryMaxBytes = 256 << 10
	// MessageIDHeader, TimestampHeader and SignatureHeader are a delivery's
	// Standard Webhooks headers (https://www.standardwebhooks.com): the
	// sender's message id (its idempotency key), the Unix time in seconds
	// it was signed at, and "v1,<base64 HMAC-SHA256>" of
	// "<id>.<timestamp>.<body>" under the webhook's secret, possibly several
	// space-separated (Envelope). The old X-Switchboard-Signature header
	// ("sha256=" and the body's hex HMAC) is no longer accepted: it signed
	// the body alone, so a captured delivery could be replayed for ever.
	MessageIDHeader = "webhook-id"
	TimestampHeader = "webhook-timestamp"
	SignatureHeader = "webhook-signature"
	// SignatureTolerance is how far a delivery's webhook-timestamp may be
	// from the server's clock, either way (Standard Webhooks' 5 minutes).
	SignatureTolerance = 5 * time.Minute
	// MessageIDMaxLen bounds a webhook-id; its characters are ASCII
	// letters, digits, '_' and '-' (no '.', which separates the signed
	// parts).
	MessageIDMaxLen = 128
	// SignaturesMax bounds the space-separated signatures of one
	// webhook-signature header.
	SignaturesMax = 8
	// WebhookSecretPrefix starts every webhook secret.
	WebhookSecretPrefix = "sbw_"
	// SenderExprDefault finds the sender in a payload (GitHub's shape).
	SenderExprDefault = ".sender.login"
	// SubjectExprDefault finds the subject key in a payload: the
	// repository and the issue or pull request number, "org/repo#12", or
	// none.
	SubjectExprDefault = `[.repository.full_name, (.issue.number // .pull_request.number)] ` +
		`| select(all(. != null)) | map(tostring) | join("#")`
	// TrustedSendersMax bounds a webhook's trusted senders.
	TrustedSendersMax = 100
	// DeliveriesListDefault and DeliveriesListMax bound delivery lists.
	DeliveriesListDefault = 50
	DeliveriesListMax     = 500
)

// The webhooks' writes in the write log (history.RecordWrite, REQ-5): who
// created, changed, rotated the secret of, or deleted which webhook. Rules
// carry their author on their own rows.
const (
	WriteWebhookCreate = "webhook.create"
	WriteWebhookUpdate = "webhook.update"
	WriteWebhookRotate = "webhook.rotate_secret"
	WriteWebhookDelete = "webhook.delete"
	// ObjectWebhook is the write log's object kind of a webhook.
	ObjectWebhook = "webhook"
)

// titleExpr finds a delivery's title in a payload: the or pull
// request's title, else nothing (the delivery is then titled by its id).
const titleExpr = `.issue.title // .pull_request.title // .title // empty | strings`

// bodyExpr finds the subject's body, the source of an opt-in excerpt.
const bodyExpr = `.comment.body // .issue.body // .pull_request.body // empty | strings`

// Webhooks is the reference host's webhooks, routing rules and quarantine
// (SPEC-0020 and SPEC-0026 stand-ins, D17): the one service the web UI, the
// operator API and the MCP rule verbs call, so they pass the same checks.
type Webhooks struct {
	pool    *pgxpool.Pool
	emitter SinkEmitter
	clock   clocks.Clock
	vault   *vault.Vault
	timeout time.Duration
	budget  time.Duration
	// compile bounds a save's compiling (WebhooksConfig.CompileBudget).
	compile time.Duration
	// sandbox runs the rules and the sender and subject expressions, in
	// worker processes (rulesandbox): nothing compiles or runs them here.
	sandbox *rulesandbox.Pool
	// dummySealed is a secret sealed at start that a delivery to an unknown
	// webhook is checked against (verifyUnknown); nil without a key.
	dummySealed []byte
}

// SinkEmitter is what routing needs of the engine: Emit for quarantine,
// EmitToSink for a rule's notify. An *engine.Engine satisfies it.
type SinkEmitter interface {
	Emitter
	EmitToSink(ctx context.Context, tx pgx.Tx, sinkID int64, ev engine.Event) (bool, error)
}

var _ SinkEmitter = (*engine.Engine)(nil)

// WebhooksConfig configures Webhooks.
type WebhooksConfig struct {
	// Pool is the database. Required.
	Pool *pgxpool.Pool
	// Emitter announces quarantines and rule notifies. Required.
	Emitter SinkEmitter
	// SecretKey seals webhook secrets (SWITCHBOARD_SECRET_KEY, 32 bytes).
	// Without it, creating a webhook fails with encryption_required.
	SecretKey []byte
	// Clock defaults to the system clock.
	Clock clocks.Clock
	// RuleTimeout bounds one expression on one delivery. Defaults to
	// RuleTimeoutDefault (250 ms).
	RuleTimeout time.Duration
	// RulesBudget bounds the wall time of everything of the owner's one
	// delivery runs (its sender and subject expressions, then all of its
	// webhook's rules, one budget counted from the first), or a whole dry
	// run's; rules past it are faults ("not run"). Defaults to
	// RulesBudgetDefault (1 s).
	RulesBudget time.Duration
	// CompileBudget bounds the wall time of compiling one save's
	// expressions (rules, sender and subject) in workers. A program's own
	// compile limits are its worker's (CPU time and memory); this bound
	// covers a busy server starting a worker and giving it that CPU, which
	// must not refuse a good rule. Defaults to twice RulesBudget, and at
	// least CompileBudgetMin. (A dry run compiles its candidates within
	// twice RulesBudget: it answers within that.)
	CompileBudget time.Duration
	// Sandbox is the rule workers' pool. Defaults to rulesandbox.Default(),
	// the process's shared pool.
	Sandbox *rulesandbox.Pool
}

// NewWebhooks returns the webhooks service.
func NewWebhooks(cfg WebhooksConfig) *Webhooks {
	if cfg.Pool == nil || cfg.Emitter == nil {
		panic("host: NewWebhooks needs a pool and an emitter")
	}
	if cfg.Clock == nil {
		cfg.Clock = clocks.System{}
	}
	if cfg.RuleTimeout <= 0 {
		cfg.RuleTimeout = RuleTimeoutDefault
	}
	if cfg.RulesBudget <= 0 {
		cfg.RulesBudget = RulesBudgetDefault
	}
	if cfg.CompileBudget <= 0 {
		cfg.CompileBudget = max(2*cfg.RulesBudget, CompileBudgetMin)
	}
	s := &Webhooks{
		pool: cfg.Pool, emitter: cfg.Emitter, clock: cfg.Clock, vault: vault.New(cfg.SecretKey),
		timeout: cfg.RuleTimeout, budget: cfg.RulesBudget, compile: cfg.CompileBudget, sandbox: cfg.Sandbox,
	}
	if s.sandbox == nil {
		s.sandbox = rulesandbox.Default()
	}
	if s.vault.Enabled() {
		sealed, err := s.vault.Seal(0, dummyScope, notifytype.NewSecret(dummySignatureKey))
		if err != nil {
			panic("host: sealing the dummy webhook secret: " + err.Error()) // a valid key always seals
		}
		s.dummySealed = sealed
	}
	return s
}

// Webhook is a webhook as the service answers it. Its secret is never
// part of it: it is shown once, when created or rotated.
type Webhook struct {
	ID             int64                 `json:"id"`
	Owner          notifytype.OwnerScope `json:"owner"`
	Name           string                `json:"name"`
	TrustedSenders []string              `json:"trusted_senders"`
	SenderExpr     string                `json:"sender_expr"`
	SubjectExpr    string                `json:"subject_expr"`
	// Path is where deliveries are posted: /hooks/<id>.
	Path      string    `json:"path"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func webhookOut(w hoststore.WebhookRow) (Webhook, error) {
	owner, err := notifytype.ParseOwnerScope(w.Owner)
	if err != nil {
		return Webhook{}, fmt.Errorf("error reading webhook %d owner: %w", w.ID, err)
	}
	subject := w.SubjectExpr
	if subject == "" {
		subject = SubjectExprDefault
	}
	return Webhook{
		ID: w.ID, Owner: owner, Name: w.Name, TrustedSenders: append([]string{}, w.TrustedSenders...),
		SenderExpr: w.SenderExpr, SubjectExpr: subject, Path: "/hooks/" + strconv.FormatInt(w.ID, 10),
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
	}, nil
}

// WebhookInput is a new webhook.
type WebhookInput struct {
	// Owner is the webhook's owner scope. Required.
	Owner notifytype.OwnerScope
	// Name is unique in the scope, 1 to 64 printable characters. Required.
	Name string
	// TrustedSenders are the sender identities whose deliveries are
	// routed; every other sender's are quarantined. Defaults to none.
	TrustedSenders []string
	// SenderExpr finds the sender in a payload. Defaults to
	// SenderExprDefault (.sender.login).
	SenderExpr string
	// SubjectExpr finds the subject key in a payload. Defaults to
	// SubjectExprDefault.
	SubjectExpr string
}

// WebhookSettings are what an owner may change on a webhook.
type WebhookSettings struct {
	TrustedSenders []string
	SenderExpr     string
	SubjectExpr    string
}

// authorize is the webhooks' permission check, as the engine's is for
// sinks: a human acts on their own scope and, on a team, members read and
// only owners and admins write (D2); an endpoint needs the rules grant and
// acts only in its own scope with its human's permissions there (D5). A
// scope the caller has no part in is not_found (D3).
func (s *Webhooks) authorize(ctx context.Context, p engine.Principal, scope notifytype.OwnerScope, write bool) error {
	human, ok := hostid.Parse(p.HumanID)
	if !ok {
		return notifytype.Forbidden("no acting human")
	}
	if p.EndpointID != 0 && !p.Has(notifytype.GrantRules) {
		return notifytype.Forbidden("this endpoint's grant lacks the rules verbs")
	}
	if !scope.Valid() || (p.EndpointID != 0 && scope != p.EndpointScope) {
		return notifytype.NotFound("webhook")
	}
	switch scope.Kind {
	case notifytype.ScopeHuman:
		if scope != hostid.Human(human) {
			return notifytype.NotFound("webhook")
		}
		return nil
	case notifytype.ScopeTeam:
		team, ok := hostid.Of(scope, notifytype.ScopeTeam)
		if !ok {
			return notifytype.NotFound("webhook")
		}
		role, err := hoststore.TeamRole(ctx, s.pool, team, human)
		if err != nil {
			return fmt.Errorf("error reading team role: %w", err)
		}
		switch r := engine.Role(role); {
		case r == engine.RoleNone:
			return notifytype.NotFound("webhook")
		case write && !r.CanConfigure():
			return notifytype.Forbidden("only a team owner or admin may change the team's webhooks")
		}
		return nil
	}
	return notifytype.NotFound("webhook")
}

// read reads a webhook the caller may see (write: may change), in db.
func (s *Webhooks) read(ctx context.Context, db hoststore.DBTX, p engine.Principal, id int64, write, lock bool) (hoststore.WebhookRow, error) {
	w, err := hoststore.GetWebhook(ctx, db, id, lock)
	if errors.Is(err, pgx.ErrNoRows) {
		return hoststore.WebhookRow{}, notifytype.NotFound("webhook")
	}
	if err != nil {
		return hoststore.WebhookRow{}, err
	}
	scope, err := notifytype.ParseOwnerScope(w.Owner)
	if err != nil {
		return hoststore.WebhookRow{}, fmt.Errorf("error reading webhook %d owner: %w", w.ID, err)
	}
	if err := s.authorize(ctx, p, scope, write); err != nil {
		return hoststore.WebhookRow{}, err
	}
	return w, nil
}

func checkWebhookName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > 64 || !utf8.ValidString(name) ||
		strings.ContainsFunc(name, unicode.IsControl) || strings.ContainsFunc(name, isBidiControl) {
		return "", notifytype.InvalidArgument("name", "must be 1 to 64 printable characters")
	}
	return name, nil
}

func checkSettings(in WebhookSettings) (WebhookSettings, error) {
	if len(in.TrustedSenders) > TrustedSendersMax {
		return in, notifytype.InvalidArgumentf("trusted_senders", "at most %d senders", TrustedSendersMax)
	}
	senders := []string{}
	for _, snd := range in.TrustedSenders {
		snd = strings.TrimSpace(snd)
		if snd == "" || utf8.RuneCountInString(snd) > 200 || !utf8.ValidString(snd) || strings.ContainsFunc(snd, unicode.IsControl) {
			return in, notifytype.InvalidArgument("trusted_senders", "each sender must be 1 to 200 printable characters")
		}
		senders = append(senders, snd)
	}
	in.TrustedSenders = senders
	in.SenderExpr = strings.TrimSpace(in.SenderExpr)
	if in.SenderExpr == "" {
		in.SenderExpr = SenderExprDefault
	}
	in.SubjectExpr = strings.TrimSpace(in.SubjectExpr)
	if in.SubjectExpr == SubjectExprDefault {
		in.SubjectExpr = ""
	}
	for field, expr := range map[string]string{"sender_expr": in.SenderExpr, "subject_expr": in.SubjectExpr} {
		if expr == "" {
			continue
		}
		if len(expr) > RuleExprMaxLen || !utf8.ValidString(expr) || strings.ContainsRune(expr, 0) {
			return in, notifytype.InvalidArgumentf(field, "must be valid UTF-8 of at most %d bytes, without NUL", RuleExprMaxLen)
		}
	}
	return in, nil
}

// compileSettings compiles a webhook's sender and subject expressions in a
// rule worker, for owner; call it once the caller may write the webhook.
func (s *Webhooks) compileSettings(ctx context.Context, owner string, in WebhookSettings) error {
	fields, exprs := []string{}, []string{}
	for _, f := range []struct{ field, expr string }{{"sender_expr", in.SenderExpr}, {"subject_expr", in.SubjectExpr}} {
		if f.expr != "" {
			fields, exprs = append(fields, f.field), append(exprs, f.expr)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, s.compileWall())
	defer cancel()
	for i, res := range s.sandbox.Compile(cctx, owner, exprs) {
		if msg := compileFault(res); msg != "" {
			return notifytype.InvalidArgument(fields[i], msg)
		}
	}
	return ctx.Err()
}

// newWebhookSecret mints a signing secret.
func newWebhookSecret() notifytype.Secret {
	return notifytype.NewSecret(WebhookSecretPrefix + rand.Text())
}

// sealSecret seals a webhook's secret. The row id is negated in the
// associated data so that a connection's sealed secret (same key, same
// scope, maybe the same id) never opens as a webhook's.
func (s *Webhooks) sealSecret(id int64, owner string, secret notifytype.Secret) ([]byte, error) {
	scope, err := notifytype.ParseOwnerScope(owner)
	if err != nil {
		return nil, err
	}
	return s.vault.Seal(-id, scope, secret)
}

func (s *Webhooks) openSecret(w hoststore.WebhookRow) (notifytype.Secret, error) {
	scope, err := notifytype.ParseOwnerScope(w.Owner)
	if err != nil {
		return notifytype.Secret{}, err
	}
	return s.vault.Open(-w.ID, scope, w.Secret)
}

// Create creates a webhook and returns it with its signing secret, which
// is shown this once. Only humans create webhooks.
func (s *Webhooks) Create(ctx context.Context, p engine.Principal, in WebhookInput) (Webhook, notifytype.Secret, error) {
	if p.EndpointID != 0 {
		return Webhook{}, notifytype.Secret{}, notifytype.Forbidden("an endpoint may not create a webhook")
	}
	if !in.Owner.Valid() {
		return Webhook{}, notifytype.Secret{}, notifytype.InvalidArgument("owner", "must be human:<id> or team:<id>")
	}
	name, err := checkWebhookName(in.Name)
	if err != nil {
		return Webhook{}, notifytype.Secret{}, err
	}
	set, err := checkSettings(WebhookSettings{TrustedSenders: in.TrustedSenders, SenderExpr: in.SenderExpr, SubjectExpr: in.SubjectExpr})
	if err != nil {
		return Webhook{}, notifytype.Secret{}, err
	}
	if err := s.authorize(ctx, p, in.Owner, true); err != nil {
		if errors.Is(err, notifytype.ErrNotFound) {
			return Webhook{}, notifytype.Secret{}, notifytype.NotFound("owner scope")
		}
		return Webhook{}, notifytype.Secret{}, err
	}
	if err := s.compileSettings(ctx, in.Owner.String(), set); err != nil {
		return Webhook{}, notifytype.Secret{}, err
	}
	if !s.vault.Enabled() {
		return Webhook{}, notifytype.Secret{}, notifytype.EncryptionRequired()
	}
	secret := newWebhookSecret()
	var out Webhook
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.clock.Now()
		w, err := hoststore.InsertWebhook(ctx, tx, hoststore.WebhookInsert{
			Owner: in.Owner.String(), Name: name, TrustedSenders: set.TrustedSenders,
			SenderExpr: set.SenderExpr, SubjectExpr: set.SubjectExpr, Now: now,
		})
		if errors.Is(err, hoststore.ErrWebhookNameTaken) {
			return notifytype.InvalidArgument("name", "a webhook of this name exists in this owner scope")
		}
		if err != nil {
			return err
		}
		sealed, err := s.sealSecret(w.ID, w.Owner, secret)
		if err != nil {
			return err
		}
		if err := hoststore.SetWebhookSecret(ctx, tx, w.ID, sealed, now); err != nil {
			return err
		}
		if err := history.RecordWrite(ctx, tx, p, in.Owner, WriteWebhookCreate, ObjectWebhook, w.ID); err != nil {
			return err
		}
		out, err = webhookOut(w)
		return err
	})
	if err != nil {
		return Webhook{}, notifytype.Secret{}, wrap(err, "creating webhook")
	}
	return out, secret, nil
}

// RotateSecret replaces a webhook's signing secret and returns the new
// one, shown this once; the old one stops verifying at once. Only humans
// rotate secrets.
func (s *Webhooks) RotateSecret(ctx context.Context, p engine.Principal, id int64) (notifytype.Secret, error) {
	if p.EndpointID != 0 {
		return notifytype.Secret{}, notifytype.Forbidden("an endpoint may not rotate a webhook's secret")
	}
	secret := newWebhookSecret()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		w, err := s.read(ctx, tx, p, id, true, true)
		if err != nil {
			return err
		}
		sealed, err := s.sealSecret(w.ID, w.Owner, secret)
		if err != nil {
			return err
		}
		if err := hoststore.SetWebhookSecret(ctx, tx, w.ID, sealed, s.clock.Now()); err != nil {
			return err
		}
		return recordWebhookWrite(ctx, tx, p, w, WriteWebhookRotate)
	})
	if err != nil {
		return notifytype.Secret{}, wrap(err, "rotating webhook secret")
	}
	return secret, nil
}

// UpdateSettings replaces a webhook's trusted senders and expressions.
func (s *Webhooks) UpdateSettings(ctx context.Context, p engine.Principal, id int64, in WebhookSettings) (Webhook, error) {
	set, err := checkSettings(in)
	if err != nil {
		return Webhook{}, err
	}
	// Who may write the webhook is checked before its expressions are
	// compiled, and again (locked) in the transaction.
	w, err := s.read(ctx, s.pool, p, id, true, false)
	if err != nil {
		return Webhook{}, wrap(err, "updating webhook")
	}
	if err := s.compileSettings(ctx, w.Owner, set); err != nil {
		return Webhook{}, err
	}
	var out Webhook
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := s.read(ctx, tx, p, id, true, true); err != nil {
			return err
		}
		w, err := hoststore.UpdateWebhookSettings(ctx, tx, id, hoststore.WebhookSettings{
			TrustedSenders: set.TrustedSenders, SenderExpr: set.SenderExpr, SubjectExpr: set.SubjectExpr, Now: s.clock.Now(),
		})
		if err != nil {
			return err
		}
		if err := recordWebhookWrite(ctx, tx, p, w, WriteWebhookUpdate); err != nil {
			return err
		}
		out, err = webhookOut(w)
		return err
	})
	return out, wrap(err, "updating webhook")
}

// Delete deletes a webhook, as deleting a sink does (REQ-5): what
// configures it goes with it (its rules and its signing secret, so
// POST /hooks/<id> is refused from now on); what it received stays (its
// deliveries, their routing traces and the quarantine, whose board links
// messages already carry), until the janitor removes them past retention.
// A todo it routed stays in its queue, and a notification already queued
// about one of its deliveries is still sent. A subscription filtered to it
// keeps the id and matches nothing more from it; the filter is never
// widened. Only humans delete webhooks, with the permission creating one
// needs: their own, or as a team's owner or admin (D2); another scope's is
// not_found (D3). The deletion is recorded in the write log.
func (s *Webhooks) Delete(ctx context.Context, p engine.Principal, id int64) error {
	if p.EndpointID != 0 {
		return notifytype.Forbidden("an endpoint may not delete a webhook")
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		w, err := s.read(ctx, tx, p, id, true, true)
		if err != nil {
			return err
		}
		if err := hoststore.DeleteWebhook(ctx, tx, w.ID); err != nil {
			return err
		}
		return recordWebhookWrite(ctx, tx, p, w, WriteWebhookDelete)
	})
	return wrap(err, "deleting webhook")
}

// recordWebhookWrite records p's write (action) of w in the write log.
func recordWebhookWrite(ctx context.Context, tx pgx.Tx, p engine.Principal, w hoststore.WebhookRow, action string) error {
	owner, err := notifytype.ParseOwnerScope(w.Owner)
	if err != nil {
		return fmt.Errorf("error reading webhook %d owner: %w", w.ID, err)
	}
	return history.RecordWrite(ctx, tx, p, owner, action, ObjectWebhook, w.ID)
}

// Get returns a webhook the caller may see.
func (s *Webhooks) Get(ctx context.Context, p engine.Principal, id int64) (Webhook, error) {
	w, err := s.read(ctx, s.pool, p, id, false, false)
	if err != nil {
		return Webhook{}, wrap(err, "reading webhook")
	}
	return webhookOut(w)
}

// List lists the webhooks of scope for a caller who may see them.
func (s *Webhooks) List(ctx context.Context, p engine.Principal, scope notifytype.OwnerScope) ([]Webhook, error) {
	if err := s.authorize(ctx, p, scope, false); err != nil {
		return nil, err
	}
	rows, err := hoststore.ListWebhooks(ctx, s.pool, []string{scope.String()})
	if err != nil {
		return nil, err
	}
	out := make([]Webhook, 0, len(rows))
	for _, r := range rows {
		w, err := webhookOut(r)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// Rules returns a webhook's rules in order.
func (s *Webhooks) Rules(ctx context.Context, p engine.Principal, id int64) ([]Rule, error) {
	if _, err := s.read(ctx, s.pool, p, id, false, false); err != nil {
		return nil, wrap(err, "listing rules")
	}
	rows, err := hoststore.ListRules(ctx, s.pool, id)
	if err != nil {
		return nil, err
	}
	out := make([]Rule, len(rows))
	for i, r := range rows {
		out[i] = ruleOut(r)
	}
	return out, nil
}

func (s *Webhooks) ruleWrite(p engine.Principal, in RuleInput) hoststore.RuleWrite {
	human, _ := hostid.Parse(p.HumanID) // authorize parsed it
	return hoststore.RuleWrite{
		Name: in.Name, Expr: in.Expr, QueueID: in.Action.Queue, Drop: in.Action.Drop,
		Notify: in.Action.Notify, NotifySeverity: string(in.Action.NotifySeverity),
		HumanID: human, EndpointID: p.EndpointID, Now: s.clock.Now(),
	}
}

// SetRules replaces a webhook's whole rule list (set_webhook_rules). Every
// rule is checked first (REQ-8): a bad expression, or a notify naming no
// sink of the webhook's owner scope, is invalid_argument naming the rule,
// and nothing is saved.
func (s *Webhooks) SetRules(ctx context.Context, p engine.Principal, id int64, ins []RuleInput) ([]Rule, error) {
	if len(ins) > RulesMax {
		return nil, notifytype.InvalidArgumentf("rules", "at most %d rules", RulesMax)
	}
	checked := make([]checkedRule, len(ins))
	for i, in := range ins {
		c, err := checkRule(in, i, fmt.Sprintf("rules[%d].", i))
		if err != nil {
			return nil, err
		}
		checked[i] = c
	}
	if err := s.authorizeThenCompile(ctx, p, id, checked, func(i int) string { return fmt.Sprintf("rules[%d].", i) }); err != nil {
		return nil, wrap(err, "setting rules")
	}
	var out []Rule
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		w, err := s.read(ctx, tx, p, id, true, true)
		if err != nil {
			return err
		}
		if err := checkRulesInScope(ctx, tx, w.Owner, checked, func(i int) string { return fmt.Sprintf("rules[%d].", i) }); err != nil {
			return err
		}
		if err := hoststore.DeleteRules(ctx, tx, id); err != nil {
			return err
		}
		out = make([]Rule, 0, len(checked))
		for _, c := range checked {
			r, err := hoststore.InsertRule(ctx, tx, id, s.ruleWrite(p, c.in))
			if err != nil {
				return err
			}
			out = append(out, ruleOut(r))
		}
		return nil
	})
	if err != nil {
		return nil, wrap(err, "setting rules")
	}
	return out, nil
}

// authorizeThenCompile checks that p may write webhook id, then compiles
// the rules in a rule worker for the webhook's owner: nobody gets a rule
// compiled (which may cost up to a worker's limits) on a webhook that is
// not theirs. The transaction that saves checks p again, locked.
func (s *Webhooks) authorizeThenCompile(ctx context.Context, p engine.Principal, id int64, rules []checkedRule, field func(i int) string) error {
	w, err := s.read(ctx, s.pool, p, id, true, false)
	if err != nil {
		return err
	}
	return s.compileRules(ctx, w.Owner, rules, field, s.compileWall())
}

// AddRule appends one rule to a webhook's list (add_webhook_rule), checked
// as SetRules checks each.
func (s *Webhooks) AddRule(ctx context.Context, p engine.Principal, id int64, in RuleInput) (Rule, error) {
	c, err := checkRule(in, 0, "")
	if err != nil {
		return Rule{}, err
	}
	if err := s.authorizeThenCompile(ctx, p, id, []checkedRule{c}, func(int) string { return "" }); err != nil {
		return Rule{}, wrap(err, "saving rule")
	}
	var out Rule
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		w, err := s.read(ctx, tx, p, id, true, true)
		if err != nil {
			return err
		}
		if err := checkRulesInScope(ctx, tx, w.Owner, []checkedRule{c}, func(int) string { return "" }); err != nil {
			return err
		}
		rows, err := hoststore.ListRules(ctx, tx, id)
		if err != nil {
			return err
		}
		if len(rows) >= RulesMax {
			return notifytype.InvalidArgumentf("rules", "at most %d rules", RulesMax)
		}
		r, err := hoststore.InsertRule(ctx, tx, id, s.ruleWrite(p, c.in))
		out = ruleOut(r)
		return err
	})
	if err != nil {
		return Rule{}, wrap(err, "adding rule")
	}
	return out, nil
}

// UpdateRule rewrites one rule in place (update_webhook_rule): its id and
// place stay. Checked as SetRules checks each.
func (s *Webhooks) UpdateRule(ctx context.Context, p engine.Principal, id, ruleID int64, in RuleInput) (Rule, error) {
	c, err := checkRule(in, 0, "")
	if err != nil {
		return Rule{}, err
	}
	if err := s.authorizeThenCompile(ctx, p, id, []checkedRule{c}, func(int) string { return "" }); err != nil {
		return Rule{}, wrap(err, "saving rule")
	}
	var out Rule
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		w, err := s.read(ctx, tx, p, id, true, true)
		if err != nil {
			return err
		}
		if err := checkRulesInScope(ctx, tx, w.Owner, []checkedRule{c}, func(int) string { return "" }); err != nil {
			return err
		}
		r, err := hoststore.UpdateRule(ctx, tx, id, ruleID, s.ruleWrite(p, c.in))
		if errors.Is(err, pgx.ErrNoRows) {
			return notifytype.NotFound("rule")
		}
		out = ruleOut(r)
		return err
	})
	if err != nil {
		return Rule{}, wrap(err, "updating rule")
	}
	return out, nil
}

// RoutableQueue is a queue a webhook's rules may route to.
type RoutableQueue struct {
	ID    int64
	Name  string
	Owner notifytype.OwnerScope
}

// RoutableQueues lists the queues the rules of webhook id may route to:
// its owner scope's queues, then those other owners befriended it with
// (the same set a rule's queue is checked against on save).
func (s *Webhooks) RoutableQueues(ctx context.Context, p engine.Principal, id int64) ([]RoutableQueue, error) {
	w, err := s.read(ctx, s.pool, p, id, false, false)
	if err != nil {
		return nil, err
	}
	rows, err := hoststore.RoutableQueues(ctx, s.pool, w.Owner)
	if err != nil {
		return nil, wrap(err, "listing routable queues")
	}
	out := make([]RoutableQueue, 0, len(rows))
	for _, r := range rows {
		owner, err := notifytype.ParseOwnerScope(r.Owner)
		if err != nil {
			return nil, wrap(err, "listing routable queues")
		}
		out = append(out, RoutableQueue{ID: r.ID, Name: r.Name, Owner: owner})
	}
	return out, nil
}

// BefriendQueue lets the webhooks of friend route deliveries into a queue
// the human may manage (SPEC-0033 stand-in): their own, or a team's they
// own or administer.
func (s *Webhooks) BefriendQueue(ctx context.Context, humanID, queueID int64, friend notifytype.OwnerScope) error {
	if !friend.Valid() {
		return notifytype.InvalidArgument("friend", "must be human:<id> or team:<id>")
	}
	owner, err := hoststore.QueueOwner(ctx, s.pool, queueID)
	if errors.Is(err, pgx.ErrNoRows) {
		return notifytype.NotFound("queue")
	}
	if err != nil {
		return err
	}
	scope, err := notifytype.ParseOwnerScope(owner)
	if err != nil {
		return err
	}
	if err := s.authorize(ctx, engine.HumanPrincipal(hostid.String(humanID)), scope, true); err != nil {
		if errors.Is(err, notifytype.ErrNotFound) {
			return notifytype.NotFound("queue")
		}
		return err
	}
	return hoststore.BefriendQueue(ctx, s.pool, queueID, friend.String())
}

// wrap adds context to an uncoded error; a coded refusal passes as it is.
func wrap(err error, doing string) error {
	if err == nil {
		return nil
	}
	if _, ok := notifytype.AsError(err); ok {
		return err
	}
	return fmt.Errorf("error %s: %w", doing, err)
}

// Delivery is a received delivery with its routing trace.
type Delivery struct {
	ID         int64           `json:"id"`
	WebhookID  int64           `json:"webhook_id"`
	ReceivedAt time.Time       `json:"received_at"`
	Sender     string          `json:"sender,omitempty"`
	SubjectKey string          `json:"subject_key,omitempty"`
	Title      string          `json:"title,omitempty"`
	Outcome    Outcome         `json:"outcome"`
	TodoID     int64           `json:"todo_id,omitempty"`
	Trace      Trace           `json:"trace"`
	Payload    json.RawMessage `json:"-"`
	// Owner is the owner scope of the webhook that received it.
	Owner notifytype.OwnerScope `json:"-"`
}

func deliveryOut(d hoststore.DeliveryRow) (Delivery, error) {
	owner, err := notifytype.ParseOwnerScope(d.Owner)
	if err != nil {
		return Delivery{}, fmt.Errorf("error reading delivery %d owner: %w", d.ID, err)
	}
	out := Delivery{Owner: owner,
		ID: d.ID, WebhookID: d.WebhookID, ReceivedAt: d.ReceivedAt, Sender: d.Sender, SubjectKey: d.SubjectKey,
		Title: d.Title, Outcome: Outcome(d.Outcome), TodoID: d.TodoID, Payload: d.Payload,
	}
	if err := json.Unmarshal(d.Trace, &out.Trace); err != nil {
		return Delivery{}, fmt.Errorf("error reading delivery %d trace: %w", d.ID, err)
	}
	return out, nil
}

// Deliveries lists a webhook's most recent deliveries, newest first; a
// non-empty outcome keeps only those (OutcomeQuarantined: the quarantine).
func (s *Webhooks) Deliveries(ctx context.Context, p engine.Principal, id int64, outcome Outcome, limit int) ([]Delivery, error) {
	if outcome != "" && !outcome.Valid() {
		return nil, notifytype.InvalidArgument("outcome", "must be routed, dropped, quarantined or unrouted")
	}
	if limit <= 0 {
		limit = DeliveriesListDefault
	}
	limit = min(limit, DeliveriesListMax)
	if _, err := s.read(ctx, s.pool, p, id, false, false); err != nil {
		return nil, wrap(err, "listing deliveries")
	}
	rows, err := hoststore.ListDeliveries(ctx, s.pool, id, string(outcome), limit)
	if err != nil {
		return nil, err
	}
	out := make([]Delivery, 0, len(rows))
	for _, r := range rows {
		d, err := deliveryOut(r)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Delivery returns one delivery of a webhook the caller may see, also
// after the webhook was deleted (its deliveries stay until retention, so
// the board links of messages already sent still open); another scope's
// is not_found, as is a delivery that does not exist, alike (D3).
func (s *Webhooks) Delivery(ctx context.Context, p engine.Principal, webhookID, deliveryID int64) (Delivery, error) {
	r, err := hoststore.GetDelivery(ctx, s.pool, webhookID, deliveryID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Delivery{}, notifytype.NotFound("delivery")
	}
	if err != nil {
		return Delivery{}, err
	}
	// A webhook never changes owner scope, so the delivery's scope is its
	// webhook's, whether or not the webhook still exists.
	scope, err := notifytype.ParseOwnerScope(r.Owner)
	if err != nil {
		return Delivery{}, fmt.Errorf("error reading delivery %d owner: %w", r.ID, err)
	}
	if err := s.authorize(ctx, p, scope, false); err != nil {
		if errors.Is(err, notifytype.ErrNotFound) {
			return Delivery{}, notifytype.NotFound("delivery")
		}
		return Delivery{}, wrap(err, "reading delivery")
	}
	return deliveryOut(r)
}

// CompileBudgetMin is the least default bound of a save's compiling
// (WebhooksConfig.CompileBudget).
const CompileBudgetMin = 10 * time.Second

// compileWall bounds the wall time of compiling one save's expressions
// (WebhooksConfig.CompileBudget).
func (s *Webhooks) compileWall() time.Duration { return s.compile }
