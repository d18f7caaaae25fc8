package hoststore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrWebhookNameTaken reports a webhook name already used in its owner scope.
var ErrWebhookNameTaken = errors.New("a webhook with this name exists in this owner scope")

// WebhookRow is a row of webhooks (D17). Secret is sealed; nil until set.
type WebhookRow struct {
	ID             int64
	Owner          string
	Name           string
	Secret         []byte
	TrustedSenders []string
	SenderExpr     string
	SubjectExpr    string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

const webhookColumns = `id, owner, name, secret, trusted_senders, sender_expr, subject_expr, created_at, updated_at`

func scanWebhook(row pgx.Row) (WebhookRow, error) {
	var w WebhookRow
	err := row.Scan(&w.ID, &w.Owner, &w.Name, &w.Secret, &w.TrustedSenders, &w.SenderExpr, &w.SubjectExpr,
		&w.CreatedAt, &w.UpdatedAt)
	return w, err
}

// WebhookInsert is a new webhook; its secret is set after the insert (it
// is sealed with the row's id).
type WebhookInsert struct {
	Owner          string
	Name           string
	TrustedSenders []string
	SenderExpr     string
	SubjectExpr    string
	Now            time.Time
}

// InsertWebhook inserts a webhook without a secret.
func InsertWebhook(ctx context.Context, db DBTX, in WebhookInsert) (WebhookRow, error) {
	w, err := scanWebhook(db.QueryRow(ctx, `INSERT INTO webhooks (owner, name, trusted_senders, sender_expr,
			subject_expr, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING `+webhookColumns,
		in.Owner, in.Name, in.TrustedSenders, in.SenderExpr, in.SubjectExpr, in.Now))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return WebhookRow{}, ErrWebhookNameTaken
	}
	if err != nil {
		return WebhookRow{}, fmt.Errorf("error inserting webhook: %w", err)
	}
	return w, nil
}

// SetWebhookSecret stores a webhook's sealed secret.
func SetWebhookSecret(ctx context.Context, db DBTX, id int64, sealed []byte, now time.Time) error {
	tag, err := db.Exec(ctx, `UPDATE webhooks SET secret = $2, updated_at = $3 WHERE id = $1`, id, sealed, now)
	if err != nil {
		return fmt.Errorf("error storing webhook secret: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return pgx.ErrNoRows
	}
	return nil
}

// WebhookSettings are a webhook's editable settings.
type WebhookSettings struct {
	TrustedSenders []string
	SenderExpr     string
	SubjectExpr    string
	Now            time.Time
}

// UpdateWebhookSettings replaces a webhook's settings.
func UpdateWebhookSettings(ctx context.Context, db DBTX, id int64, s WebhookSettings) (WebhookRow, error) {
	w, err := scanWebhook(db.QueryRow(ctx, `UPDATE webhooks SET trusted_senders = $2, sender_expr = $3,
			subject_expr = $4, updated_at = $5 WHERE id = $1 RETURNING `+webhookColumns,
		id, s.TrustedSenders, s.SenderExpr, s.SubjectExpr, s.Now))
	if err != nil {
		return WebhookRow{}, fmt.Errorf("error updating webhook: %w", err)
	}
	return w, nil
}

// GetWebhook reads a webhook; lock takes its row lock in a transaction
// (writers of its rules serialise on it). No row is pgx.ErrNoRows.
func GetWebhook(ctx context.Context, db DBTX, id int64, lock bool) (WebhookRow, error) {
	sql := `SELECT ` + webhookColumns + ` FROM webhooks WHERE id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	w, err := scanWebhook(db.QueryRow(ctx, sql, id))
	if err != nil {
		return WebhookRow{}, fmt.Errorf("error reading webhook: %w", err)
	}
	return w, nil
}

// DeleteWebhook deletes a webhook and, by cascade, its rules; its
// deliveries stay (they carry the webhook's id without a foreign key). No
// row is pgx.ErrNoRows.
func DeleteWebhook(ctx context.Context, db DBTX, id int64) error {
	tag, err := db.Exec(ctx, `DELETE FROM webhooks WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("error deleting webhook: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("error deleting webhook: %w", pgx.ErrNoRows)
	}
	return nil
}

// ListWebhooks lists the webhooks of the given owner scopes, by id.
func ListWebhooks(ctx context.Context, db DBTX, owners []string) ([]WebhookRow, error) {
	rows, err := db.Query(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE owner = ANY($1) ORDER BY id`, owners)
	if err != nil {
		return nil, fmt.Errorf("error listing webhooks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WebhookRow, error) { return scanWebhook(r) })
	if err != nil {
		return nil, fmt.Errorf("error listing webhooks: %w", err)
	}
	return out, nil
}

// RuleRow is a row of webhook_rules. QueueID is 0 for none; Notify and
// NotifySeverity are "" for none.
type RuleRow struct {
	ID                  int64
	WebhookID           int64
	Position            int
	Name                string
	Expr                string
	QueueID             int64
	Drop                bool
	Notify              string
	NotifySeverity      string
	UpdatedAt           time.Time
	UpdatedByHumanID    int64
	UpdatedByEndpointID int64
}

const ruleColumns = `id, webhook_id, position, name, expr, coalesce(queue_id, 0), drop_delivery,
	coalesce(notify, ''), coalesce(notify_severity, ''), updated_at, coalesce(updated_by_human_id, 0),
	coalesce(updated_by_endpoint_id, 0)`

func scanRule(row pgx.Row) (RuleRow, error) {
	var r RuleRow
	err := row.Scan(&r.ID, &r.WebhookID, &r.Position, &r.Name, &r.Expr, &r.QueueID, &r.Drop, &r.Notify,
		&r.NotifySeverity, &r.UpdatedAt, &r.UpdatedByHumanID, &r.UpdatedByEndpointID)
	return r, err
}

// ListRules returns a webhook's rules in order.
func ListRules(ctx context.Context, db DBTX, webhookID int64) ([]RuleRow, error) {
	rows, err := db.Query(ctx, `SELECT `+ruleColumns+` FROM webhook_rules WHERE webhook_id = $1 ORDER BY position`, webhookID)
	if err != nil {
		return nil, fmt.Errorf("error listing rules: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RuleRow, error) { return scanRule(r) })
	if err != nil {
		return nil, fmt.Errorf("error listing rules: %w", err)
	}
	return out, nil
}

// MessageDeliveryAndRules reads, in one round trip, what MessageDelivery
// and ListRules read: the delivery webhook's message id was taken by (seen
// false when it is not taken), and the webhook's rules in order.
func MessageDeliveryAndRules(ctx context.Context, db Batcher, webhookID int64, messageID string) (first int64, seen bool, rules []RuleRow, err error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT delivery_id FROM webhook_message_ids WHERE webhook_id = $1 AND message_id = $2`, webhookID, messageID).
		QueryRow(func(row pgx.Row) error {
			err := row.Scan(&first)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			seen = err == nil
			return err
		})
	b.Queue(`SELECT `+ruleColumns+` FROM webhook_rules WHERE webhook_id = $1 ORDER BY position`, webhookID).
		Query(func(rows pgx.Rows) error {
			var err error
			rules, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (RuleRow, error) { return scanRule(r) })
			return err
		})
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return 0, false, nil, fmt.Errorf("error reading a webhook message id and its rules: %w", err)
	}
	return first, seen, rules, nil
}

// Batcher sends a pgx.Batch: a *pgxpool.Pool, a pgx.Tx or a *pgx.Conn.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// RuleWrite is a rule as written, with its author.
type RuleWrite struct {
	Name           string
	Expr           string
	QueueID        int64
	Drop           bool
	Notify         string
	NotifySeverity string
	HumanID        int64
	EndpointID     int64
	Now            time.Time
}

func nullID(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

func nullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// DeleteRules deletes every rule of a webhook.
func DeleteRules(ctx context.Context, db DBTX, webhookID int64) error {
	if _, err := db.Exec(ctx, `DELETE FROM webhook_rules WHERE webhook_id = $1`, webhookID); err != nil {
		return fmt.Errorf("error deleting rules: %w", err)
	}
	return nil
}

// InsertRule appends a rule to the end of a webhook's list.
func InsertRule(ctx context.Context, db DBTX, webhookID int64, w RuleWrite) (RuleRow, error) {
	r, err := scanRule(db.QueryRow(ctx, `INSERT INTO webhook_rules (webhook_id, position, name, expr, queue_id,
			drop_delivery, notify, notify_severity, updated_at, updated_by_human_id, updated_by_endpoint_id)
		SELECT $1, coalesce(max(position), 0) + 1, $2, $3, $4, $5, $6, $7, $8, $9, $10
		FROM webhook_rules WHERE webhook_id = $1
		RETURNING `+ruleColumns,
		webhookID, w.Name, w.Expr, nullID(w.QueueID), w.Drop, nullText(w.Notify), nullText(w.NotifySeverity),
		w.Now, nullID(w.HumanID), nullID(w.EndpointID)))
	if err != nil {
		return RuleRow{}, fmt.Errorf("error inserting rule: %w", err)
	}
	return r, nil
}

// UpdateRule rewrites one rule of a webhook in place (its id and position
// stay). No such rule of that webhook is pgx.ErrNoRows.
func UpdateRule(ctx context.Context, db DBTX, webhookID, ruleID int64, w RuleWrite) (RuleRow, error) {
	r, err := scanRule(db.QueryRow(ctx, `UPDATE webhook_rules SET name = $3, expr = $4, queue_id = $5,
			drop_delivery = $6, notify = $7, notify_severity = $8, updated_at = $9,
			updated_by_human_id = $10, updated_by_endpoint_id = $11
		WHERE webhook_id = $1 AND id = $2 RETURNING `+ruleColumns,
		webhookID, ruleID, w.Name, w.Expr, nullID(w.QueueID), w.Drop, nullText(w.Notify),
		nullText(w.NotifySeverity), w.Now, nullID(w.HumanID), nullID(w.EndpointID)))
	if err != nil {
		return RuleRow{}, fmt.Errorf("error updating rule: %w", err)
	}
	return r, nil
}

// SinkRef is a sink as a rule's notify names it.
type SinkRef struct {
	ID      int64
	Name    string
	Enabled bool
}

// SinksByName returns the sinks of owner with the given names, keyed by
// name; a name with no sink is absent. lock takes a share lock on each, so
// a sink cannot be deleted or disabled before the caller's transaction
// ends.
func SinksByName(ctx context.Context, db DBTX, owner string, names []string, lock bool) (map[string]SinkRef, error) {
	out := map[string]SinkRef{}
	if len(names) == 0 {
		return out, nil
	}
	sql := `SELECT id, name, enabled FROM switchboard.sinks WHERE owner = $1 AND name = ANY($2) ORDER BY id`
	if lock {
		sql += ` FOR SHARE`
	}
	rows, err := db.Query(ctx, sql, owner, names)
	if err != nil {
		return nil, fmt.Errorf("error reading sinks by name: %w", err)
	}
	refs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[SinkRef])
	if err != nil {
		return nil, fmt.Errorf("error reading sinks by name: %w", err)
	}
	for _, r := range refs {
		out[r.Name] = r
	}
	return out, nil
}

// RoutableQueue is a queue the webhooks of a scope may route into.
type RoutableQueue struct {
	ID    int64
	Name  string
	Owner string
}

// RoutableQueues lists the queues the webhooks of scope may route into:
// the scope's own and those whose owner befriended the scope (as
// QueueRoutable decides), the scope's own first, by name.
func RoutableQueues(ctx context.Context, db DBTX, scope string) ([]RoutableQueue, error) {
	rows, err := db.Query(ctx, `SELECT q.id, q.name, q.owner FROM queues q
		WHERE q.owner = $1 OR EXISTS (SELECT 1 FROM queue_friends f WHERE f.queue_id = q.id AND f.friend = $1)
		ORDER BY q.owner <> $1, q.name, q.id`, scope)
	if err != nil {
		return nil, fmt.Errorf("error listing routable queues: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[RoutableQueue])
	if err != nil {
		return nil, fmt.Errorf("error listing routable queues: %w", err)
	}
	return out, nil
}

// QueueRoutable reports whether the webhooks of scope may route into the
// queue: it is the scope's own, or its owner befriended the scope.
func QueueRoutable(ctx context.Context, db DBTX, queueID int64, scope string) (bool, error) {
	var ok bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM queues q WHERE q.id = $1 AND (q.owner = $2
		OR EXISTS (SELECT 1 FROM queue_friends f WHERE f.queue_id = q.id AND f.friend = $2)))`, queueID, scope).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("error checking queue: %w", err)
	}
	return ok, nil
}

// BefriendQueue lets the webhooks of friend route into the queue.
func BefriendQueue(ctx context.Context, db DBTX, queueID int64, friend string) error {
	if _, err := db.Exec(ctx, `INSERT INTO queue_friends (queue_id, friend) VALUES ($1, $2)
		ON CONFLICT DO NOTHING`, queueID, friend); err != nil {
		return fmt.Errorf("error befriending queue: %w", err)
	}
	return nil
}

// QueueOwner returns a queue's owner scope. No queue is pgx.ErrNoRows.
func QueueOwner(ctx context.Context, db DBTX, queueID int64) (string, error) {
	var owner string
	if err := db.QueryRow(ctx, `SELECT owner FROM queues WHERE id = $1`, queueID).Scan(&owner); err != nil {
		return "", fmt.Errorf("error reading queue: %w", err)
	}
	return owner, nil
}

// DeliveryRow is a received webhook delivery.
type DeliveryRow struct {
	ID         int64
	WebhookID  int64
	Owner      string
	ReceivedAt time.Time
	Sender     string
	SubjectKey string
	Title      string
	Outcome    string
	TodoID     int64
	Payload    []byte
	Trace      []byte
}

const deliveryColumns = `id, webhook_id, owner, received_at, coalesce(sender, ''), coalesce(subject_key, ''),
	coalesce(title, ''), outcome, coalesce(todo_id, 0), payload, trace`

func scanDelivery(row pgx.Row) (DeliveryRow, error) {
	var d DeliveryRow
	err := row.Scan(&d.ID, &d.WebhookID, &d.Owner, &d.ReceivedAt, &d.Sender, &d.SubjectKey, &d.Title,
		&d.Outcome, &d.TodoID, &d.Payload, &d.Trace)
	return d, err
}

// TakeMessageIDAndInsertDelivery is TakeMessageID then InsertDelivery in
// one statement, for a delivery that writes nothing else: it draws d's id
// (d.ID is ignored), and reports false, storing nothing, when the message
// id was already taken. A concurrent take of the same id waits for this
// statement's transaction, as with TakeMessageID.
func TakeMessageIDAndInsertDelivery(ctx context.Context, db DBTX, messageID string, expiresAt time.Time, d DeliveryRow) (int64, bool, error) {
	var id int64
	err := db.QueryRow(ctx, `WITH taken AS (
			INSERT INTO webhook_message_ids (webhook_id, message_id, delivery_id, expires_at)
			VALUES ($1, $2, nextval(pg_get_serial_sequence('webhook_deliveries', 'id')), $3)
			ON CONFLICT (webhook_id, message_id) DO NOTHING RETURNING delivery_id)
		INSERT INTO webhook_deliveries (id, webhook_id, owner, received_at, sender,
			subject_key, title, outcome, todo_id, payload, trace)
		OVERRIDING SYSTEM VALUE SELECT delivery_id, $1, $4, $5, $6, $7, $8, $9, $10, $11, $12 FROM taken
		RETURNING id`,
		d.WebhookID, messageID, expiresAt, d.Owner, d.ReceivedAt, nullText(d.Sender), nullText(d.SubjectKey), nullText(d.Title),
		d.Outcome, nullID(d.TodoID), d.Payload, d.Trace).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("error storing delivery: %w", err)
	}
	return id, true, nil
}

// InsertDelivery stores a received delivery with the id TakeMessageID
// drew for it.
func InsertDelivery(ctx context.Context, db DBTX, d DeliveryRow) error {
	_, err := db.Exec(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, owner, received_at, sender,
			subject_key, title, outcome, todo_id, payload, trace)
		OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		d.ID, d.WebhookID, d.Owner, d.ReceivedAt, nullText(d.Sender), nullText(d.SubjectKey), nullText(d.Title),
		d.Outcome, nullID(d.TodoID), d.Payload, d.Trace)
	if err != nil {
		return fmt.Errorf("error storing delivery: %w", err)
	}
	return nil
}

// ListDeliveries returns a webhook's most recent deliveries, newest first;
// a non-empty outcome keeps only those ("quarantined": the quarantine).
func ListDeliveries(ctx context.Context, db DBTX, webhookID int64, outcome string, limit int) ([]DeliveryRow, error) {
	rows, err := db.Query(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries
		WHERE webhook_id = $1 AND ($2 = '' OR outcome = $2) ORDER BY id DESC LIMIT $3`, webhookID, outcome, limit)
	if err != nil {
		return nil, fmt.Errorf("error listing deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeliveryRow, error) { return scanDelivery(r) })
	if err != nil {
		return nil, fmt.Errorf("error listing deliveries: %w", err)
	}
	return out, nil
}

// DeliveryHead is what a dry run reads of a stored delivery before its
// payload: which one it is and who sent it.
type DeliveryHead struct {
	ID     int64
	Sender string
}

// ListDeliveryHeads lists a webhook's most recent deliveries, newest first,
// without their payloads (DeliveryPayload reads one).
func ListDeliveryHeads(ctx context.Context, db DBTX, webhookID int64, limit int) ([]DeliveryHead, error) {
	rows, err := db.Query(ctx, `SELECT id, coalesce(sender, '') FROM webhook_deliveries
		WHERE webhook_id = $1 ORDER BY id DESC LIMIT $2`, webhookID, limit)
	if err != nil {
		return nil, fmt.Errorf("error listing deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DeliveryHead])
	if err != nil {
		return nil, fmt.Errorf("error listing deliveries: %w", err)
	}
	return out, nil
}

// DeliveryPayload reads the payload of one delivery of a webhook. No row
// (deleted meanwhile) is pgx.ErrNoRows.
func DeliveryPayload(ctx context.Context, db DBTX, webhookID, id int64) ([]byte, error) {
	var payload []byte
	if err := db.QueryRow(ctx, `SELECT payload FROM webhook_deliveries WHERE webhook_id = $1 AND id = $2`,
		webhookID, id).Scan(&payload); err != nil {
		return nil, fmt.Errorf("error reading a delivery's payload: %w", err)
	}
	return payload, nil
}

// GetDelivery reads one delivery of a webhook. No row is pgx.ErrNoRows.
func GetDelivery(ctx context.Context, db DBTX, webhookID, id int64) (DeliveryRow, error) {
	d, err := scanDelivery(db.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries
		WHERE webhook_id = $1 AND id = $2`, webhookID, id))
	if err != nil {
		return DeliveryRow{}, fmt.Errorf("error reading delivery: %w", err)
	}
	return d, nil
}

// TakeMessageID records that webhook's message id is delivered, until
// expiresAt, in the transaction storing that delivery, and draws the
// delivery's id (so that its board link can go into the events emitted
// with it) in the same statement. It reports false (and changes nothing
// but the id sequence) when the message id was already taken: a
// concurrent insert of the same id waits for the first to commit or roll
// back, so two instances never both take it.
func TakeMessageID(ctx context.Context, tx DBTX, webhookID int64, messageID string, expiresAt time.Time) (int64, bool, error) {
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO webhook_message_ids (webhook_id, message_id, delivery_id, expires_at)
		VALUES ($1, $2, nextval(pg_get_serial_sequence('webhook_deliveries', 'id')), $3)
		ON CONFLICT (webhook_id, message_id) DO NOTHING RETURNING delivery_id`, webhookID, messageID, expiresAt).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("error recording a webhook message id: %w", err)
	}
	return id, true, nil
}

// MessageDelivery returns the delivery a webhook's message id was taken
// by, and false when the id is not taken (or expired and pruned).
func MessageDelivery(ctx context.Context, db DBTX, webhookID int64, messageID string) (int64, bool, error) {
	var id int64
	err := db.QueryRow(ctx, `SELECT delivery_id FROM webhook_message_ids WHERE webhook_id = $1 AND message_id = $2`,
		webhookID, messageID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("error reading a webhook message id: %w", err)
	}
	return id, true, nil
}
