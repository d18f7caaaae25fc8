package hoststore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/notifytype"
)

// Human is a person who signs in and owns things (D1, SPEC-0033 stand-in).
type Human struct {
	ID        int64
	Name      string
	Email     string
	CreatedAt time.Time
	// IsOperator is the operator role (D26): the instance-wide ops view and
	// /metrics.
	IsOperator bool
}

// Team is a group of humans with roles (D2).
type Team struct {
	ID        int64
	Name      string
	CreatedAt time.Time
}

const humanColumns = `h.id, h.name, h.email, h.created_at, h.is_operator`

func scanHuman(row pgx.Row) (Human, error) {
	var h Human
	err := row.Scan(&h.ID, &h.Name, &h.Email, &h.CreatedAt, &h.IsOperator)
	return h, err
}

// notFound turns pgx.ErrNoRows into notifytype's not_found for what.
func notFound(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return notifytype.NotFound(what)
	}
	return err
}

// InsertHuman inserts a human. An email already taken is an error.
func InsertHuman(ctx context.Context, db DBTX, name, email string) (Human, error) {
	h, err := scanHuman(db.QueryRow(ctx, `INSERT INTO humans AS h (name, email) VALUES ($1, $2)
		RETURNING `+humanColumns, name, email))
	if err != nil {
		return Human{}, fmt.Errorf("error inserting human: %w", err)
	}
	return h, nil
}

// EnsureHuman returns the human with email, inserting one named name if
// none exists; created says which happened. Safe under concurrent callers.
func EnsureHuman(ctx context.Context, db DBTX, name, email string) (h Human, created bool, err error) {
	h, err = scanHuman(db.QueryRow(ctx, `INSERT INTO humans AS h (name, email) VALUES ($1, $2)
		ON CONFLICT (email) DO NOTHING RETURNING `+humanColumns, name, email))
	if err == nil {
		return h, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Human{}, false, fmt.Errorf("error inserting human: %w", err)
	}
	h, err = HumanByEmail(ctx, db, email)
	return h, false, err
}

// HumanByEmail returns the human with email, or not_found.
func HumanByEmail(ctx context.Context, db DBTX, email string) (Human, error) {
	h, err := scanHuman(db.QueryRow(ctx, `SELECT `+humanColumns+` FROM humans h WHERE h.email = $1`, email))
	if err != nil {
		return Human{}, fmt.Errorf("error reading human: %w", notFound(err, "human"))
	}
	return h, nil
}

// HumanByID returns the human with id, or not_found.
func HumanByID(ctx context.Context, db DBTX, id int64) (Human, error) {
	h, err := scanHuman(db.QueryRow(ctx, `SELECT `+humanColumns+` FROM humans h WHERE h.id = $1`, id))
	if err != nil {
		return Human{}, fmt.Errorf("error reading human: %w", notFound(err, "human"))
	}
	return h, nil
}

// CountHumans returns how many humans exist.
func CountHumans(ctx context.Context, db DBTX) (int, error) {
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM humans`).Scan(&n); err != nil {
		return 0, fmt.Errorf("error counting humans: %w", err)
	}
	return n, nil
}

// InsertTeam inserts a team. A name already taken is an error.
func InsertTeam(ctx context.Context, db DBTX, name string) (Team, error) {
	var t Team
	err := db.QueryRow(ctx, `INSERT INTO teams (name) VALUES ($1) RETURNING id, name, created_at`, name).
		Scan(&t.ID, &t.Name, &t.CreatedAt)
	if err != nil {
		return Team{}, fmt.Errorf("error inserting team: %w", err)
	}
	return t, nil
}

// UpsertTeamMember makes the human a member of the team with role (owner,
// admin or member), replacing any role it had.
func UpsertTeamMember(ctx context.Context, db DBTX, teamID, humanID int64, role string) error {
	_, err := db.Exec(ctx, `INSERT INTO team_members (team_id, human_id, role) VALUES ($1, $2, $3)
		ON CONFLICT (team_id, human_id) DO UPDATE SET role = excluded.role`, teamID, humanID, role)
	if err != nil {
		return fmt.Errorf("error writing team member: %w", err)
	}
	return nil
}

// TeamRole returns the human's role in the team, "" when not a member.
func TeamRole(ctx context.Context, db DBTX, teamID, humanID int64) (string, error) {
	var role string
	err := db.QueryRow(ctx, `SELECT role FROM team_members WHERE team_id = $1 AND human_id = $2`, teamID, humanID).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("error reading team role: %w", err)
	}
	return role, nil
}

// KnownActor reports whether humanID is a human and, when endpointID is
// not 0, whether endpointID is an endpoint accountable to that human.
func KnownActor(ctx context.Context, db DBTX, humanID, endpointID int64) (bool, error) {
	var ok bool
	err := db.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM humans WHERE id = $1)
		   AND ($2::bigint = 0 OR EXISTS (SELECT 1 FROM endpoints WHERE id = $2 AND accountable_human_id = $1))`,
		humanID, endpointID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("error looking up human %d: %w", humanID, err)
	}
	return ok, nil
}

// InsertAPIToken stores the SHA-256 hash of an operator API token for the
// human and returns the token's row id. The token itself is never stored.
func InsertAPIToken(ctx context.Context, db DBTX, humanID int64, tokenHash []byte) (int64, error) {
	var id int64
	err := db.QueryRow(ctx, `INSERT INTO api_tokens (human_id, token_hash) VALUES ($1, $2) RETURNING id`,
		humanID, tokenHash).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("error inserting api token: %w", err)
	}
	return id, nil
}

// HumanByAPITokenHash returns the human holding the unrevoked API token
// with this hash, or not_found.
func HumanByAPITokenHash(ctx context.Context, db DBTX, tokenHash []byte) (Human, error) {
	h, err := scanHuman(db.QueryRow(ctx, `SELECT `+humanColumns+`
		FROM api_tokens t JOIN humans h ON h.id = t.human_id
		WHERE t.token_hash = $1 AND t.revoked_at IS NULL`, tokenHash))
	if err != nil {
		return Human{}, fmt.Errorf("error reading api token: %w", notFound(err, "api token"))
	}
	return h, nil
}

// InsertLoginLink stores the SHA-256 hash of a one-time login link token
// for the human, valid for ttl from the database's now, and returns when it
// expires.
func InsertLoginLink(ctx context.Context, db DBTX, humanID int64, tokenHash []byte, ttl time.Duration) (time.Time, error) {
	var expires time.Time
	err := db.QueryRow(ctx, `INSERT INTO login_links (token_hash, human_id, expires_at)
		VALUES ($1, $2, now() + make_interval(secs => $3)) RETURNING expires_at`, tokenHash, humanID, ttl.Seconds()).Scan(&expires)
	if err != nil {
		return time.Time{}, fmt.Errorf("error inserting login link: %w", err)
	}
	return expires, nil
}

// HumanByEmailFold returns the human with email, matched exactly or, when
// no email matches exactly, ignoring case when exactly one does (a phone's
// keyboard capitalises the first letter); else not_found.
func HumanByEmailFold(ctx context.Context, db DBTX, email string) (Human, error) {
	rows, err := db.Query(ctx, `SELECT `+humanColumns+` FROM humans h WHERE lower(h.email) = lower($1)
		ORDER BY (h.email = $1) DESC, h.id LIMIT 2`, email)
	if err != nil {
		return Human{}, fmt.Errorf("error reading human: %w", err)
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Human, error) { return scanHuman(row) })
	if err != nil {
		return Human{}, fmt.Errorf("error reading human: %w", err)
	}
	if len(found) == 0 || (len(found) == 2 && found[0].Email != email) {
		return Human{}, notifytype.NotFound("human")
	}
	return found[0], nil
}

// InsertLoginLinkCapped is InsertLoginLink unless the human already has
// limit links minted within the last ttl (links live ttl, so: whose
// expires_at is still ahead, used or not); then it stores nothing and ok
// is false. It locks the human's row first, so concurrent callers count
// one after the other: tx must be a transaction.
func InsertLoginLinkCapped(ctx context.Context, tx DBTX, humanID int64, tokenHash []byte, ttl time.Duration, limit int) (expires time.Time, ok bool, err error) {
	var one int
	if err := tx.QueryRow(ctx, `SELECT 1 FROM humans WHERE id = $1 FOR UPDATE`, humanID).Scan(&one); err != nil {
		return time.Time{}, false, fmt.Errorf("error locking human: %w", notFound(err, "human"))
	}
	err = tx.QueryRow(ctx, `INSERT INTO login_links (token_hash, human_id, expires_at)
		SELECT $1, $2, now() + make_interval(secs => $3)
		WHERE (SELECT count(*) FROM login_links WHERE human_id = $2 AND expires_at > now()) < $4
		RETURNING expires_at`, tokenHash, humanID, ttl.Seconds(), limit).Scan(&expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("error inserting login link: %w", err)
	}
	return expires, true, nil
}

// UseLoginLink marks the unused, unexpired login link with this hash used
// and returns its human; any other link answers not_found. One statement,
// so a link is used at most once however many callers race for it.
func UseLoginLink(ctx context.Context, db DBTX, tokenHash []byte) (Human, error) {
	h, err := scanHuman(db.QueryRow(ctx, `WITH used AS (
			UPDATE login_links SET used_at = now()
			WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()
			RETURNING human_id)
		SELECT `+humanColumns+` FROM used JOIN humans h ON h.id = used.human_id`, tokenHash))
	if err != nil {
		return Human{}, fmt.Errorf("error using login link: %w", notFound(err, "login link"))
	}
	return h, nil
}

// SetOperator grants (or withdraws) the operator role of the human with
// email; an unknown email is not_found.
func SetOperator(ctx context.Context, db DBTX, email string, operator bool) (Human, error) {
	h, err := scanHuman(db.QueryRow(ctx, `UPDATE humans h SET is_operator = $2 WHERE h.email = $1 RETURNING `+humanColumns, email, operator))
	if err != nil {
		return Human{}, notFound(fmt.Errorf("error setting operator role: %w", err), "human")
	}
	return h, nil
}
