package hoststore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Endpoint is an agent's vended credential: its owner scope, grant and
// accountable human. The credential itself is kept only as a hash.
type Endpoint struct {
	ID                 int64
	Owner              string
	Name               string
	AccountableHumanID int64
	Grants             []string
	CreatedAt          time.Time
	RevokedAt          *time.Time
}

const endpointColumns = `id, owner, name, accountable_human_id, grants, created_at, revoked_at`

func scanEndpoint(row pgx.Row) (Endpoint, error) {
	var e Endpoint
	err := row.Scan(&e.ID, &e.Owner, &e.Name, &e.AccountableHumanID, &e.Grants, &e.CreatedAt, &e.RevokedAt)
	return e, err
}

// ErrEndpointNameTaken reports an endpoint name already used in its scope.
var ErrEndpointNameTaken = errors.New("an endpoint with this name exists in this owner scope")

// InsertEndpoint stores a vended endpoint.
func InsertEndpoint(ctx context.Context, db DBTX, e Endpoint, credentialHash []byte) (Endpoint, error) {
	out, err := scanEndpoint(db.QueryRow(ctx, `
		INSERT INTO endpoints (owner, name, accountable_human_id, grants, credential_hash)
		VALUES ($1, $2, $3, $4, $5) RETURNING `+endpointColumns,
		e.Owner, e.Name, e.AccountableHumanID, e.Grants, credentialHash))
	if isUniqueViolation(err, "endpoints_owner_name_key") {
		return Endpoint{}, ErrEndpointNameTaken
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("error inserting endpoint: %w", err)
	}
	return out, nil
}

// EndpointByCredentialHash returns the live endpoint a credential hash
// belongs to (pgx.ErrNoRows, wrapped, for none or a revoked one).
func EndpointByCredentialHash(ctx context.Context, db DBTX, hash []byte) (Endpoint, error) {
	e, err := scanEndpoint(db.QueryRow(ctx, `SELECT `+endpointColumns+` FROM endpoints
		WHERE credential_hash = $1 AND revoked_at IS NULL`, hash))
	if err != nil {
		return Endpoint{}, fmt.Errorf("error reading endpoint: %w", err)
	}
	return e, nil
}

// GetEndpoint returns one endpoint.
func GetEndpoint(ctx context.Context, db DBTX, id int64) (Endpoint, error) {
	e, err := scanEndpoint(db.QueryRow(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE id = $1`, id))
	if err != nil {
		return Endpoint{}, fmt.Errorf("error reading endpoint %d: %w", id, err)
	}
	return e, nil
}

// ListEndpoints lists an owner scope's endpoints, newest first.
func ListEndpoints(ctx context.Context, db DBTX, owner string) ([]Endpoint, error) {
	rows, err := db.Query(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE owner = $1 ORDER BY id DESC`, owner)
	if err != nil {
		return nil, fmt.Errorf("error listing endpoints: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Endpoint, error) { return scanEndpoint(r) })
	if err != nil {
		return nil, fmt.Errorf("error listing endpoints: %w", err)
	}
	return out, nil
}

// InsertSession stores a web session.
func InsertSession(ctx context.Context, db DBTX, humanID int64, tokenHash []byte, expires time.Time) error {
	_, err := db.Exec(ctx, `INSERT INTO sessions (token_hash, human_id, expires_at) VALUES ($1, $2, $3)`,
		tokenHash, humanID, expires)
	if err != nil {
		return fmt.Errorf("error inserting session: %w", err)
	}
	return nil
}

// HumanBySession returns the human of a live session.
func HumanBySession(ctx context.Context, db DBTX, tokenHash []byte, now time.Time) (Human, error) {
	h, err := scanHuman(db.QueryRow(ctx, `
		SELECT `+humanColumns+` FROM sessions s JOIN humans h ON h.id = s.human_id
		WHERE s.token_hash = $1 AND s.expires_at > $2`, tokenHash, now))
	if err != nil {
		return Human{}, fmt.Errorf("error reading session: %w", err)
	}
	return h, nil
}

// DeleteSession ends a web session.
func DeleteSession(ctx context.Context, db DBTX, tokenHash []byte) error {
	if _, err := db.Exec(ctx, `DELETE FROM sessions WHERE token_hash = $1`, tokenHash); err != nil {
		return fmt.Errorf("error deleting session: %w", err)
	}
	return nil
}
