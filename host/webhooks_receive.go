package host

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/host/rulesandbox"
	"github.com/switchboard/notify/notifytype"
)

// Outcome is what became of a received delivery.
type Outcome string

const (
	// OutcomeRouted: a rule routed it to a queue as a new todo.
	OutcomeRouted Outcome = "routed"
	// OutcomeDropped: a rule dropped it.
	OutcomeDropped Outcome = "dropped"
	// OutcomeQuarantined: its sender is not trusted (SPEC-0026 stand-in).
	OutcomeQuarantined Outcome = "quarantined"
	// OutcomeUnrouted: no rule decided its routing, or the deciding rule's
	// queue could not take it.
	OutcomeUnrouted Outcome = "unrouted"
	// OutcomeDuplicate is an answer, never a stored outcome: the
	// delivery's webhook-id was already taken by a stored delivery of the
	// same webhook (whose id Received carries), so nothing was done again.
	// A sender's retry of a delivery it thinks failed is idempotent; a
	// replay of a captured one changes nothing.
	OutcomeDuplicate Outcome = "duplicate"
)

// Valid reports whether o is one of the outcomes.
func (o Outcome) Valid() bool {
	return slices.Contains([]Outcome{OutcomeRouted, OutcomeDropped, OutcomeQuarantined, OutcomeUnrouted}, o)
}

// NotifiedSink is a rule.notify enqueued for a delivery.
type NotifiedSink struct {
	Sink   string `json:"sink"`
	RuleID int64  `json:"rule_id"`
	Rule   string `json:"rule"`
}

// Trace is a delivery's routing trace (REQ-8, D17): each rule's outcome,
// where routing went and which rule decided it, the sinks a rule.notify was
// enqueued for, and every fault.
type Trace struct {
	Sender  string       `json:"sender,omitempty"`
	Trusted bool         `json:"trusted"`
	Rules   []RuleResult `json:"rules,omitempty"`
	// DecidedBy is the rule that decided routing; 0 for none.
	DecidedBy int64 `json:"decided_by,omitempty"`
	// Queue is the queue the delivery was routed to; 0 for none.
	Queue    int64          `json:"queue,omitempty"`
	Notified []NotifiedSink `json:"notified,omitempty"`
	Faults   []string       `json:"faults,omitempty"`
}

// Received is what Receive made of a delivery. Outcome is the machine
// value (stable for API clients, documented in the README); Summary says
// the same for a person: "notified phone; no todo created".
type Received struct {
	DeliveryID int64   `json:"delivery_id"`
	Outcome    Outcome `json:"outcome"`
	Summary    string  `json:"summary"`
}

// Describe says what became of a delivery in words a person knows (issue
// 25): who was notified and whether a todo was created, "notified phone;
// no todo created", "created todo 12; nobody notified", "quarantined: the
// sender is not trusted". Outcome's machine value "unrouted" reads "no
// todo created": it says nothing about notifying.
func Describe(o Outcome, todoID int64, notified []string) string {
	switch o {
	case OutcomeQuarantined:
		return "quarantined: the sender is not trusted; nobody notified"
	case OutcomeDuplicate:
		return "already received; nothing was done again"
	}
	var todo string
	switch o {
	case OutcomeRouted:
		todo = "created a todo"
		if todoID > 0 {
			todo = "created todo " + strconv.FormatInt(todoID, 10)
		}
	case OutcomeDropped:
		todo = "dropped by a rule"
	default:
		todo = "no todo created"
	}
	if len(notified) == 0 {
		return todo + "; nobody notified"
	}
	return "notified " + strings.Join(notified, ", ") + "; " + todo
}

// Summary is Describe for a stored delivery.
func (d Delivery) Summary() string {
	return Describe(d.Outcome, d.TodoID, d.Trace.NotifiedSinks())
}

// NotifiedSinks names the sinks a rule.notify was enqueued for, each once.
func (t Trace) NotifiedSinks() []string {
	var out []string
	for _, n := range t.Notified {
		if !slices.Contains(out, n.Sink) {
			out = append(out, n.Sink)
		}
	}
	return out
}

// describeWould is Describe for a dry run: what would happen.
func describeWould(o Outcome, notify []NotifyRequest) string {
	var names []string
	for _, n := range notify {
		if !slices.Contains(names, n.Sink) {
			names = append(names, n.Sink)
		}
	}
	var todo string
	switch o {
	case OutcomeQuarantined:
		return "would be quarantined: the sender is not trusted"
	case OutcomeRouted:
		todo = "would create a todo"
	case OutcomeDropped:
		todo = "would be dropped"
	default:
		todo = "would create no todo"
	}
	if len(names) == 0 {
		return todo + "; would notify nobody"
	}
	return "would notify " + strings.Join(names, ", ") + "; " + todo
}

// subjectWords names what a delivery is about, from its payload, in
// words: its sender, repository and issue or pull request ("octocat ·
// org/repo · issue #12"); only the parts the payload has. Sender-written:
// a message shows it on its own labelled line, cleaned and cut.
func subjectWords(sender string, payload map[string]any) string {
	var parts []string
	if sender != "" {
		parts = append(parts, sender)
	}
	if repo, ok := payload["repository"].(map[string]any); ok {
		if name, ok := repo["full_name"].(string); ok && name != "" {
			parts = append(parts, name)
		}
	}
	for _, k := range []struct{ key, words string }{{"issue", "issue"}, {"pull_request", "pull request"}} {
		if item, ok := payload[k.key].(map[string]any); ok {
			if n, ok := item["number"].(json.Number); ok {
				parts = append(parts, k.words+" #"+n.String())
				break
			}
			if n, ok := item["number"].(float64); ok {
				parts = append(parts, k.words+" #"+strconv.FormatFloat(n, 'f', -1, 64))
				break
			}
		}
	}
	return strings.Join(parts, " · ")
}

// asText is a sender or subject expression's answer as text ("" for none,
// a fault or a non-scalar), cut to maxRunes.
func asText(res rulesandbox.Result, maxRunes int) string {
	if res.Kind != rulesandbox.Ran || !res.HasText {
		return ""
	}
	v := strings.ToValidUTF8(res.Text, "")
	if utf8.RuneCountInString(v) > maxRunes {
		v = string([]rune(v)[:maxRunes])
	}
	return v
}

// Why Receive refused a delivery before reading it, for the operator's log
// (ReceiveRefusal.Reason). The caller is told neither which webhook ids
// exist nor why a signature failed.
const (
	// RefusalUnknownWebhook: no webhook has this id (never had one, or it
	// was deleted).
	RefusalUnknownWebhook = "unknown_webhook"
	// RefusalBadSignature: the webhook exists and the signature is
	// missing, malformed or wrong.
	RefusalBadSignature = "bad_signature"
	// RefusalStaleTimestamp: the webhook-timestamp is more than
	// SignatureTolerance from the server's clock. It is checked before the
	// webhook is looked up, so it says nothing of which ids exist.
	RefusalStaleTimestamp = "stale_timestamp"
)

// ReceiveRefusal is Receive's answer to a delivery it cannot show came from
// a webhook's sender: an unknown webhook id and a bad signature are the same
// forbidden refusal to the caller (same status, same body: Unwrap gives the
// one *notifytype.Error both share), so POST /hooks/{id} reveals no webhook
// id that exists. A stale timestamp is forbidden with its own message (it is
// decided before any webhook is read). Reason tells the operator which it
// was, for the log.
type ReceiveRefusal struct {
	Reason string
}

// refusedSignature is the one refusal an unknown webhook and a bad
// signature share.
func refusedSignature() *notifytype.Error {
	return notifytype.Forbidden("the signature does not match the body")
}

func (r *ReceiveRefusal) public() *notifytype.Error {
	if r.Reason == RefusalStaleTimestamp {
		return notifytype.Forbidden("the webhook-timestamp is more than 5 minutes from the server's clock")
	}
	return refusedSignature()
}

func (r *ReceiveRefusal) Error() string { return r.public().Error() }
func (r *ReceiveRefusal) Unwrap() error { return r.public() }

// dummySignatureKey is what an unknown webhook's delivery is checked
// against, so that it costs what a known webhook's bad signature costs:
// one decryption of a sealed secret and one HMAC of the signed content.
const dummySignatureKey = "sbw_unknown-webhooks-are-checked-against-this"

// dummyScope is the scope the dummy secret is sealed for.
var dummyScope = notifytype.Human("1")

// Envelope is what a sender sends beside a delivery's body, the Standard
// Webhooks headers as they came: MessageID (webhook-id), Timestamp
// (webhook-timestamp, Unix seconds) and Signature (webhook-signature:
// "v1,<base64 HMAC-SHA256 of <id>.<timestamp>.<body>>", several
// space-separated when a sender signs with more than one secret).
//
// The HMAC key is the webhook's secret exactly as it was shown (the whole
// "sbw_…" string), not base64-decoded as Standard Webhooks' "whsec_"
// secrets are: a sender signs with `openssl dgst -sha256 -hmac "$SECRET"`.
type Envelope struct {
	MessageID string
	Timestamp string
	Signature string
}

// EnvelopeOf reads a request's Standard Webhooks headers.
func EnvelopeOf(h http.Header) Envelope {
	return Envelope{MessageID: h.Get(MessageIDHeader), Timestamp: h.Get(TimestampHeader), Signature: h.Get(SignatureHeader)}
}

// Set writes e's headers on h (those that are not empty).
func (e Envelope) Set(h http.Header) {
	for k, v := range map[string]string{MessageIDHeader: e.MessageID, TimestampHeader: e.Timestamp, SignatureHeader: e.Signature} {
		if v != "" {
			h.Set(k, v)
		}
	}
}

// checkEnvelope checks what Receive can check of e before reading any
// webhook: the message id's length and characters and the timestamp's form
// (invalid_argument naming the header), then the timestamp's distance from
// now (a stale_timestamp refusal). It returns the timestamp.
func checkEnvelope(e Envelope, now time.Time) (time.Time, error) {
	switch {
	case e.MessageID == "":
		return time.Time{}, notifytype.InvalidArgument(MessageIDHeader,
			"is required: deliveries are signed the Standard Webhooks way (webhook-id, webhook-timestamp, webhook-signature); X-Switchboard-Signature is no longer accepted")
	case len(e.MessageID) > MessageIDMaxLen || strings.IndexFunc(e.MessageID, notIDChar) >= 0:
		return time.Time{}, notifytype.InvalidArgumentf(MessageIDHeader,
			"must be 1 to %d ASCII letters, digits, '_' or '-'", MessageIDMaxLen)
	}
	secs, err := strconv.ParseInt(e.Timestamp, 10, 64)
	if err != nil || len(e.Timestamp) > 12 || secs < 0 {
		return time.Time{}, notifytype.InvalidArgument(TimestampHeader, "must be the Unix time in seconds")
	}
	ts := time.Unix(secs, 0)
	if d := now.Sub(ts); d > SignatureTolerance || d < -SignatureTolerance {
		return time.Time{}, &ReceiveRefusal{Reason: RefusalStaleTimestamp}
	}
	return ts, nil
}

func notIDChar(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
}

// signedMAC is the HMAC-SHA256 of "<id>.<timestamp>.<body>" under secret.
func signedMAC(secret notifytype.Secret, e Envelope, body []byte) []byte {
	mac := hmac.New(sha256.New, []byte(secret.Reveal()))
	mac.Write([]byte(e.MessageID))
	mac.Write([]byte{'.'})
	mac.Write([]byte(e.Timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// checkSignature reports whether one of the "v1,<base64>" signatures of e
// is the HMAC of its signed content under secret, compared in constant
// time. Other versions are skipped, as Standard Webhooks says; more than
// SignaturesMax signatures are refused. It computes one HMAC whatever the
// header looks like, so a malformed header costs what a wrong one does.
func checkSignature(secret notifytype.Secret, e Envelope, body []byte) bool {
	want := signedMAC(secret, e, body)
	sigs := strings.Fields(e.Signature)
	ok := false
	for i, sig := range sigs {
		b64, isV1 := strings.CutPrefix(sig, "v1,")
		got, err := base64.StdEncoding.DecodeString(b64)
		if hmac.Equal(got, want) && isV1 && err == nil && i < SignaturesMax {
			ok = true
		}
	}
	return ok && len(sigs) <= SignaturesMax
}

// verify checks the delivery's webhook-signature under the webhook's
// secret (checkSignature). A webhook without a secret refuses every
// delivery, after the same work.
func (s *Webhooks) verify(w hoststore.WebhookRow, e Envelope, body []byte) error {
	if len(w.Secret) == 0 {
		s.verifyUnknown(e, body)
		return &ReceiveRefusal{Reason: RefusalBadSignature}
	}
	secret, err := s.openSecret(w)
	if err != nil {
		return fmt.Errorf("error opening webhook %d secret: %w", w.ID, err)
	}
	if !checkSignature(secret, e, body) {
		return &ReceiveRefusal{Reason: RefusalBadSignature}
	}
	return nil
}

// verifyUnknown does the work verify does, against the dummy secret, and
// throws the result away: a delivery to an unknown webhook takes about as
// long to refuse as a badly signed one to a webhook that exists.
func (s *Webhooks) verifyUnknown(e Envelope, body []byte) {
	secret := notifytype.NewSecret(dummySignatureKey)
	if s.dummySealed != nil {
		if opened, err := s.vault.Open(0, dummyScope, s.dummySealed); err == nil {
			secret = opened
		}
	}
	_ = checkSignature(secret, e, body)
}

// Sign returns the Envelope a sender posts body with: message id msgID,
// signed at at (Unix seconds), "v1," and the base64 HMAC-SHA256 of
// "<msgID>.<timestamp>.<body>" under secret.
func Sign(secret notifytype.Secret, msgID string, at time.Time, body []byte) Envelope {
	e := Envelope{MessageID: msgID, Timestamp: strconv.FormatInt(at.Unix(), 10)}
	e.Signature = "v1," + base64.StdEncoding.EncodeToString(signedMAC(secret, e, body))
	return e
}

// NewMessageID returns a fresh random message id, "msg_" and 24 hex
// digits, for a sender (the demo, tests, the load driver).
func NewMessageID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "msg_" + hex.EncodeToString(b[:])
}

// subject is what Receive reads from a payload.
type subject struct {
	payload map[string]any
	sender  string
	key     string
	title   string
	body    string
}

// readSubject reads the sender, subject key, title and body of a payload
// with the webhook's expressions.
func (s *Webhooks) readSubject(ctx context.Context, w hoststore.WebhookRow, payload map[string]any, body []byte) subject {
	subjectExpr := w.SubjectExpr
	if subjectExpr == "" {
		subjectExpr = SubjectExprDefault
	}
	// The owner's expressions and the fixed ones, in one round trip to a
	// rule worker of the owner's share, within the rules' time budget
	// (ctx's deadline, which the rules after it share).
	out := s.sandbox.Eval(ctx, w.Owner, []string{w.SenderExpr, subjectExpr, titleExpr, bodyExpr}, body, s.timeout)
	return subject{
		payload: payload,
		sender:  asText(out[0], 200),
		key:     asText(out[1], 200),
		title:   asText(out[2], TitleMaxLen),
		body:    asText(out[3], 4000),
	}
}

// Receive takes one delivery posted to webhook id (POST /hooks/{id}) with
// its Standard Webhooks envelope: it checks the size, the envelope (message
// id, timestamp within SignatureTolerance of the clock), the signature and
// the JSON, then stores the delivery with its outcome and trace and, in the
// same transaction (REQ-10), the events it causes and its message id: a
// delivery from an untrusted sender is quarantined and announced with
// delivery.quarantined; any other runs the rules (D17), becomes a todo or
// is dropped as the deciding rule says, and every sink a matching rule
// names gets one rule.notify. A refused delivery (too large, a bad
// envelope, badly signed, not a JSON object, an unknown webhook) changes
// nothing. An unknown webhook id (id <= 0 included) and a bad signature are
// one and the same refusal to the caller, a *ReceiveRefusal that is
// forbidden; only its Reason, for the operator's log, tells them apart.
//
// A message id the webhook already stored a delivery under (until its
// timestamp is past the tolerance, when the repeat is stale) is answered
// with that delivery's id and OutcomeDuplicate, and nothing is done again:
// Standard Webhooks senders retry with the same id, and a replayed capture
// is signed with it.
func (s *Webhooks) Receive(ctx context.Context, id int64, body []byte, env Envelope) (Received, error) {
	if len(body) > DeliveryMaxBytes {
		return Received{}, notifytype.InvalidArgument("body", "must be at most 256 KiB")
	}
	ts, err := checkEnvelope(env, s.clock.Now())
	if err != nil {
		return Received{}, err
	}
	w, err := hoststore.GetWebhook(ctx, s.pool, id, false)
	if errors.Is(err, pgx.ErrNoRows) {
		s.verifyUnknown(env, body)
		return Received{}, &ReceiveRefusal{Reason: RefusalUnknownWebhook}
	}
	if err != nil {
		return Received{}, err
	}
	if err := s.verify(w, env, body); err != nil {
		return Received{}, err
	}
	// A repeat is answered before its payload is run through the rules
	// again; TakeMessageID below is what decides when two race. The rules
	// come in the same round trip, read only once the signature holds.
	first, seen, rows, err := hoststore.MessageDeliveryAndRules(ctx, s.pool, w.ID, env.MessageID)
	if err != nil || seen {
		return Received{DeliveryID: first, Outcome: OutcomeDuplicate, Summary: Describe(OutcomeDuplicate, 0, nil)}, err
	}
	if bytes.Contains(body, []byte(`\u0000`)) {
		return Received{}, notifytype.InvalidArgument("body", "must not contain NUL characters")
	}
	payload, err := decodePayload(body)
	if err != nil {
		return Received{}, err
	}
	msg := message{id: env.MessageID, expires: ts.Add(SignatureTolerance + messageIDMargin)}
	// One budget for everything of the owner's a delivery runs, its
	// subject's expressions and its rules, counted from here: with a
	// budget of each, a delivery could take twice the budget, and one
	// waiting behind the owner's others took 1.98 s (faults row 6d).
	budgetCtx, cancel := context.WithTimeout(ctx, s.budget)
	defer cancel()
	subj := s.readSubject(budgetCtx, w, payload, body)
	var out Received
	if !slices.Contains(w.TrustedSenders, subj.sender) || subj.sender == "" {
		out, err = s.quarantine(ctx, w, msg, body, subj)
	} else {
		ev := evaluate(budgetCtx, s.sandbox, w.Owner, rows, body, s.timeout)
		cancel()
		if quiet(rows, ev) {
			out, err = s.routeQuietly(ctx, w, msg, body, subj, rows, ev)
		} else {
			err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				var err error
				out, err = s.route(ctx, tx, w, msg, body, subj, rows, ev)
				return err
			})
		}
		err = wrap(err, "routing delivery")
	}
	if errors.Is(err, errMessageTaken) {
		first, _, err := hoststore.MessageDelivery(ctx, s.pool, w.ID, env.MessageID)
		return Received{DeliveryID: first, Outcome: OutcomeDuplicate, Summary: Describe(OutcomeDuplicate, 0, nil)}, err
	}
	if err != nil {
		return Received{}, err
	}
	return out, nil
}

// messageIDMargin is how much longer than the tolerance a message id is
// kept: room for instances whose clocks disagree by minutes.
const messageIDMargin = 5 * time.Minute

// message is a delivery's message id and when its record may go.
type message struct {
	id      string
	expires time.Time
}

// errMessageTaken rolls back a delivery whose message id another delivery
// of the webhook took first (a concurrent repeat).
var errMessageTaken = errors.New("webhook message id already taken")

// takeMessage records msg in tx, first, and returns the id drawn for its
// delivery, so a concurrent repeat waits here and then rolls back with
// errMessageTaken.
func takeMessage(ctx context.Context, tx pgx.Tx, webhookID int64, msg message) (int64, error) {
	id, ok, err := hoststore.TakeMessageID(ctx, tx, webhookID, msg.id, msg.expires)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, errMessageTaken
	}
	return id, nil
}

func boardLink(webhookID, deliveryID int64) string {
	return "/board/webhooks/" + strconv.FormatInt(webhookID, 10) + "/deliveries/" + strconv.FormatInt(deliveryID, 10)
}

func deliveryTitle(title string, deliveryID int64) string {
	if title != "" {
		return title
	}
	return "delivery " + strconv.FormatInt(deliveryID, 10)
}

// quarantine stores a delivery from an untrusted sender and emits
// delivery.quarantined in the same transaction. Its dedup key is the
// webhook with a 10-minute window (D7): a storm is one message.
func (s *Webhooks) quarantine(ctx context.Context, w hoststore.WebhookRow, msg message, body []byte, subj subject) (Received, error) {
	owner, err := notifytype.ParseOwnerScope(w.Owner)
	if err != nil {
		return Received{}, err
	}
	var id int64
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if id, err = takeMessage(ctx, tx, w.ID, msg); err != nil {
			return err
		}
		trace, err := json.Marshal(Trace{Sender: subj.sender, Trusted: false})
		if err != nil {
			return err
		}
		title := subj.title
		if title == "" {
			title = "delivery from " + cmp.Or(subj.sender, "an unnamed sender")
		}
		if err := hoststore.InsertDelivery(ctx, tx, hoststore.DeliveryRow{
			ID: id, WebhookID: w.ID, Owner: w.Owner, ReceivedAt: s.clock.Now(), Sender: subj.sender,
			SubjectKey: subj.key, Title: subj.title, Outcome: string(OutcomeQuarantined), Payload: body, Trace: trace,
		}); err != nil {
			return err
		}
		return s.emitter.Emit(ctx, tx, engine.Event{
			Type: EventDeliveryQuarantined, Owner: owner, WebhookID: w.ID, Subject: QuarantineSubject(w.ID),
			Content: engine.Content{
				Title: title, Place: w.Name, Summary: "a delivery from an untrusted sender was quarantined",
				LinkPath: boardLink(w.ID, id),
			},
		})
	})
	if err != nil {
		return Received{}, wrap(err, "quarantining delivery")
	}
	return Received{DeliveryID: id, Outcome: OutcomeQuarantined, Summary: Describe(OutcomeQuarantined, 0, nil)}, nil
}

// quiet reports whether ev writes nothing but the delivery: no todo (the
// deciding rule, if any, drops or names no queue) and no notification.
func quiet(rules []hoststore.RuleRow, ev evaluation) bool {
	if len(ev.notify) > 0 {
		return false
	}
	if ev.decider < 0 {
		return true
	}
	r := rules[ev.decider]
	return r.Drop || r.QueueID == 0
}

// routeQuietly stores a delivery whose evaluation is quiet, as route would
// (the same outcome and trace), in one statement with its message id: a
// delivery dropped or left unrouted by its rules takes one round trip to
// store instead of four (faults row 6d: every round trip is one more wait
// for a core beside a busy owner's rules).
func (s *Webhooks) routeQuietly(ctx context.Context, w hoststore.WebhookRow, msg message, body []byte, subj subject,
	rules []hoststore.RuleRow, ev evaluation) (Received, error) {
	trace := Trace{Sender: subj.sender, Trusted: true, Rules: ev.results}
	outcome := OutcomeUnrouted
	if ev.decider >= 0 {
		r := rules[ev.decider]
		trace.DecidedBy = r.ID
		if r.Drop {
			outcome = OutcomeDropped
		}
	}
	trace.Faults = appendRuleFaults(trace.Faults, ev)
	traceJSON, err := json.Marshal(trace)
	if err != nil {
		return Received{}, fmt.Errorf("error encoding trace: %w", err)
	}
	id, ok, err := hoststore.TakeMessageIDAndInsertDelivery(ctx, s.pool, msg.id, msg.expires, hoststore.DeliveryRow{
		WebhookID: w.ID, Owner: w.Owner, ReceivedAt: s.clock.Now(), Sender: subj.sender, SubjectKey: subj.key,
		Title: subj.title, Outcome: string(outcome), Payload: body, Trace: traceJSON,
	})
	if err != nil {
		return Received{}, err
	}
	if !ok {
		return Received{}, errMessageTaken
	}
	return Received{DeliveryID: id, Outcome: outcome, Summary: Describe(outcome, 0, nil)}, nil
}

// appendRuleFaults appends the fault of every rule of ev that faulted.
func appendRuleFaults(faults []string, ev evaluation) []string {
	for _, r := range ev.results {
		if r.Fault != "" {
			faults = append(faults, fmt.Sprintf("rule %q: %s", r.Name, r.Fault))
		}
	}
	return faults
}

// route applies an evaluation in tx: the todo, the rule notifies and the
// delivery with its trace commit together (REQ-10).
func (s *Webhooks) route(ctx context.Context, tx pgx.Tx, w hoststore.WebhookRow, msg message, body []byte, subj subject,
	rules []hoststore.RuleRow, ev evaluation) (Received, error) {
	owner, err := notifytype.ParseOwnerScope(w.Owner)
	if err != nil {
		return Received{}, err
	}
	id, err := takeMessage(ctx, tx, w.ID, msg)
	if err != nil {
		return Received{}, err
	}
	now := s.clock.Now()
	trace := Trace{Sender: subj.sender, Trusted: true, Rules: ev.results}
	outcome := OutcomeUnrouted
	var todoID, queueID int64
	if ev.decider >= 0 {
		r := rules[ev.decider]
		trace.DecidedBy = r.ID
		switch {
		case r.Drop:
			outcome = OutcomeDropped
		case r.QueueID != 0:
			ok, err := hoststore.QueueRoutable(ctx, tx, r.QueueID, w.Owner)
			if err != nil {
				return Received{}, err
			}
			if !ok {
				trace.Faults = append(trace.Faults, fmt.Sprintf("rule %q: queue %d can no longer take this webhook's deliveries", r.Name, r.QueueID))
				break
			}
			todo, err := hoststore.InsertTodo(ctx, tx, hoststore.TodoInsert{
				QueueID: r.QueueID, Title: deliveryTitle(subj.title, id), Payload: body,
				AttemptCap: AttemptCapDefault, LeaseTTLSecs: int(LeaseTTLDefault.Seconds()), WebhookID: &w.ID, Now: now,
			})
			if err != nil {
				return Received{}, err
			}
			outcome, todoID, queueID = OutcomeRouted, todo.ID, r.QueueID
			trace.Queue = r.QueueID
		}
	}
	if len(ev.notify) > 0 {
		names := make([]string, len(ev.notify))
		for i, n := range ev.notify {
			names[i] = n.Sink
		}
		found, err := hoststore.SinksByName(ctx, tx, w.Owner, names, true)
		if err != nil {
			return Received{}, err
		}
		// The message says what the rule matched and what became of the
		// delivery besides this message: whether a todo was created.
		var todoWords string
		switch outcome {
		case OutcomeRouted:
			todoWords = "a todo was created"
		case OutcomeDropped:
			todoWords = "the delivery was dropped"
		default:
			todoWords = "no todo was created"
		}
		for _, n := range ev.notify {
			ref, ok := found[n.Sink]
			switch {
			case !ok:
				trace.Faults = append(trace.Faults, fmt.Sprintf("rule %q: sink %q no longer exists; nothing was sent", n.Rule, n.Sink))
				continue
			case !ref.Enabled:
				trace.Faults = append(trace.Faults, fmt.Sprintf("rule %q: sink %q is disabled; nothing was sent", n.Rule, n.Sink))
				continue
			}
			sent, err := s.emitter.EmitToSink(ctx, tx, ref.ID, engine.Event{
				Type: EventRuleNotify, Owner: owner, Severity: n.Severity, WebhookID: w.ID,
				QueueID: queueID, Subject: RuleSubject(n.RuleID, subj.key, id),
				Content: engine.Content{
					Title: deliveryTitle(subj.title, id), Place: w.Name,
					Summary:  fmt.Sprintf("rule %q matched; %s", n.Rule, todoWords),
					Subject:  subjectWords(subj.sender, subj.payload),
					LinkPath: boardLink(w.ID, id), Body: subj.body,
				},
			})
			if err != nil {
				return Received{}, err
			}
			if !sent {
				trace.Faults = append(trace.Faults, fmt.Sprintf("rule %q: sink %q could not take the notification", n.Rule, n.Sink))
				continue
			}
			trace.Notified = append(trace.Notified, NotifiedSink{Sink: n.Sink, RuleID: n.RuleID, Rule: n.Rule})
		}
	}
	trace.Faults = appendRuleFaults(trace.Faults, ev)
	traceJSON, err := json.Marshal(trace)
	if err != nil {
		return Received{}, fmt.Errorf("error encoding trace: %w", err)
	}
	if err := hoststore.InsertDelivery(ctx, tx, hoststore.DeliveryRow{
		ID: id, WebhookID: w.ID, Owner: w.Owner, ReceivedAt: now, Sender: subj.sender, SubjectKey: subj.key,
		Title: subj.title, Outcome: string(outcome), TodoID: todoID, Payload: body, Trace: traceJSON,
	}); err != nil {
		return Received{}, err
	}
	return Received{DeliveryID: id, Outcome: outcome, Summary: Describe(outcome, todoID, trace.NotifiedSinks())}, nil
}

// TestDelivery is how candidate rules score on one stored delivery.
type TestDelivery struct {
	DeliveryID int64   `json:"delivery_id"`
	Sender     string  `json:"sender,omitempty"`
	Outcome    Outcome `json:"would_outcome"`
	// Queue is the queue the delivery would be routed to; 0 for none.
	Queue int64 `json:"would_route_to_queue,omitempty"`
	// DecidedBy names the rule that would decide routing.
	DecidedBy   string          `json:"decided_by,omitempty"`
	WouldNotify []NotifyRequest `json:"would_notify,omitempty"`
	// Summary says what would happen in words: "would notify phone; would
	// create no todo".
	Summary string       `json:"summary"`
	Rules   []RuleResult `json:"rules,omitempty"`
	Faults  []string     `json:"faults,omitempty"`
}

// TestReport is test_webhook_rules' answer.
type TestReport struct {
	// Scored is how many stored deliveries were scored.
	Scored     int            `json:"scored"`
	Deliveries []TestDelivery `json:"deliveries"`
}

// budgetLeft says whether ctx's deadline is still ahead, read from the
// clock: its timer may not have fired yet when the rules that spent it
// return (as in rulesandbox's death).
func budgetLeft(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ctx.Err() == nil && (!ok || time.Now().Before(dl))
}

// storedObject says whether a stored payload is a JSON object. The column
// is jsonb, so what PostgreSQL sends back is valid JSON in its canonical
// text, which has no leading space: an object's first byte is '{'. Receive
// stores objects only; a row written otherwise (by hand, or by an older
// version) is reported, not run. Decoding each stored payload instead, as
// Receive decodes a body, cost a dry run 1.5 ms and two copies of each
// 250 KB delivery in the server (faults row 6d's profile, session 7),
// which the rule worker decodes again anyway.
func storedObject(payload []byte) bool { return len(payload) > 0 && payload[0] == '{' }

// TestRules scores candidate rules (the saved ones when candidates is nil)
// against the webhook's most recent stored deliveries (test_webhook_rules):
// which would be routed where, dropped or quarantined, and which would
// notify which sink. Candidates are checked as a save checks them. It
// sends nothing and writes nothing (REQ-8).
func (s *Webhooks) TestRules(ctx context.Context, p engine.Principal, id int64, candidates []RuleInput, limit int) (TestReport, error) {
	// One time budget for the whole dry run, counted from the request: it
	// answers within it (or within its candidates' compile bound, when
	// compiling takes longer), and the rules it did not reach are reported
	// as not run. Counted from the evaluation's start, it came on top of
	// the time the compile had waited for the owner's workers (behind the
	// owner's other dry runs): 2.4 s answers in faults row 6d.
	budgetCtx, cancel := context.WithTimeout(ctx, s.budget)
	defer cancel()
	if len(candidates) > RulesMax {
		return TestReport{}, notifytype.InvalidArgumentf("rules", "at most %d rules", RulesMax)
	}
	checked := make([]checkedRule, len(candidates))
	for i, in := range candidates {
		c, err := checkRule(in, i, fmt.Sprintf("rules[%d].", i))
		if err != nil {
			return TestReport{}, err
		}
		checked[i] = c
	}
	w, err := s.read(ctx, s.pool, p, id, false, false)
	if err != nil {
		return TestReport{}, wrap(err, "testing rules")
	}
	var rules []hoststore.RuleRow
	if candidates == nil {
		if rules, err = hoststore.ListRules(ctx, s.pool, id); err != nil {
			return TestReport{}, err
		}
	} else {
		field := func(i int) string { return fmt.Sprintf("rules[%d].", i) }
		// Compiled in a rule worker, once the caller is known to see the
		// webhook.
		if err := s.compileRules(ctx, w.Owner, checked, field, 2*s.budget); err != nil {
			return TestReport{}, wrap(err, "testing rules")
		}
		if err := checkRulesInScope(ctx, s.pool, w.Owner, checked, field); err != nil {
			return TestReport{}, err
		}
		for i, c := range checked {
			rules = append(rules, hoststore.RuleRow{
				Position: i + 1, Name: c.in.Name, Expr: c.in.Expr, QueueID: c.in.Action.Queue, Drop: c.in.Action.Drop,
				Notify: c.in.Action.Notify, NotifySeverity: string(c.in.Action.NotifySeverity),
			})
		}
	}
	var names []string
	for _, r := range rules {
		if r.Notify != "" {
			names = append(names, r.Notify)
		}
	}
	sinkRefs, err := hoststore.SinksByName(ctx, s.pool, w.Owner, names, false)
	if err != nil {
		return TestReport{}, err
	}
	if limit <= 0 {
		limit = DeliveriesListDefault
	}
	// The payloads are read one at a time, as their rules run, and not
	// once the budget is gone: its rules would not run on them. Read all
	// at once, eight dry runs starting together read 8 x 250 KB in the same
	// instant, and every other owner's statements waited behind them
	// (faults row 6d).
	stored, err := hoststore.ListDeliveryHeads(ctx, s.pool, id, min(limit, DeliveriesListMax))
	if err != nil {
		return TestReport{}, err
	}
	spent, spend := context.WithCancel(ctx)
	spend()
	report := TestReport{Scored: len(stored), Deliveries: []TestDelivery{}}
	for _, d := range stored {
		td := TestDelivery{DeliveryID: d.ID, Sender: d.Sender}
		if d.Sender == "" || !slices.Contains(w.TrustedSenders, d.Sender) {
			td.Outcome = OutcomeQuarantined
			td.Summary = describeWould(td.Outcome, nil)
			report.Deliveries = append(report.Deliveries, td)
			continue
		}
		evalCtx, payload := budgetCtx, []byte(nil)
		if !budgetLeft(budgetCtx) {
			// Spent (its timer may not have fired yet): every rule is
			// reported not run, on no payload.
			evalCtx = spent
		} else {
			payload, err = hoststore.DeliveryPayload(ctx, s.pool, id, d.ID)
			if errors.Is(err, pgx.ErrNoRows) {
				report.Scored-- // deleted since it was listed
				continue
			}
			if err != nil {
				return TestReport{}, err
			}
			if !storedObject(payload) {
				td.Outcome = OutcomeUnrouted
				td.Faults = append(td.Faults, "stored payload is not a JSON object")
				td.Summary = describeWould(td.Outcome, nil)
				report.Deliveries = append(report.Deliveries, td)
				continue
			}
		}
		ev := evaluate(evalCtx, s.sandbox, w.Owner, rules, payload, s.timeout)
		td.Rules, td.Outcome = ev.results, OutcomeUnrouted
		if ev.decider >= 0 {
			r := rules[ev.decider]
			td.DecidedBy = r.Name
			if r.Drop {
				td.Outcome = OutcomeDropped
			} else {
				td.Outcome, td.Queue = OutcomeRouted, r.QueueID
			}
		}
		for _, n := range ev.notify {
			ref, ok := sinkRefs[n.Sink]
			switch {
			case !ok:
				td.Faults = append(td.Faults, fmt.Sprintf("rule %q: sink %q does not exist", n.Rule, n.Sink))
			case !ref.Enabled:
				td.Faults = append(td.Faults, fmt.Sprintf("rule %q: sink %q is disabled", n.Rule, n.Sink))
			default:
				td.WouldNotify = append(td.WouldNotify, n)
			}
		}
		for _, r := range ev.results {
			if r.Fault != "" {
				td.Faults = append(td.Faults, fmt.Sprintf("rule %q: %s", r.Name, r.Fault))
			}
		}
		td.Summary = describeWould(td.Outcome, td.WouldNotify)
		report.Deliveries = append(report.Deliveries, td)
	}
	return report, nil
}
