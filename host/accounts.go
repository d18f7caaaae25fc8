package host

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/notifytype"
)

// Credential prefixes (D4). A prefix says what a leaked string is, so
// secret scanners and humans can tell an operator token from a login link.
const (
	APITokenPrefix  = "sbo_"
	LoginLinkPrefix = "sbl_"
)

// LoginLinkTTL is how long a one-time login link stays valid.
const LoginLinkTTL = 15 * time.Minute

// tokenBytes is the entropy of every minted credential.
const tokenBytes = 32

// Accounts is the reference host's owners and their credentials (D2, D4):
// it creates humans and teams, mints operator API tokens and one-time login
// links, and resolves them back to a human. Credentials are returned once,
// at minting, and stored only as SHA-256 hashes.
type Accounts struct {
	pool *pgxpool.Pool
}

// NewAccounts returns the accounts kept in pool's database.
func NewAccounts(pool *pgxpool.Pool) *Accounts { return &Accounts{pool: pool} }

// Human is a person of the reference host: an owner scope
// (hostid.Human), an acting human, an operator.
type Human = hoststore.Human

// Team is a team of humans: an owner scope of its own (hostid.Team).
type Team = hoststore.Team

// TeamListing is a team with its members, for the operator's lists.
type TeamListing = hoststore.TeamListing

// Membership is a human's role in one team.
type Membership = hoststore.Membership

// HumanByID returns the human with id (not_found when there is none).
func (a *Accounts) HumanByID(ctx context.Context, id int64) (Human, error) {
	return hoststore.HumanByID(ctx, a.pool, id)
}

// CreateHuman creates a human. An email already taken is an error.
func (a *Accounts) CreateHuman(ctx context.Context, name, email string) (Human, error) {
	name, email, err := checkHuman(name, email)
	if err != nil {
		return Human{}, err
	}
	return hoststore.InsertHuman(ctx, a.pool, name, email)
}

// EnsureHuman returns the human with email, creating one named name if none
// exists; created says which happened.
func (a *Accounts) EnsureHuman(ctx context.Context, name, email string) (h Human, created bool, err error) {
	name, email, err = checkHuman(name, email)
	if err != nil {
		return Human{}, false, err
	}
	return hoststore.EnsureHuman(ctx, a.pool, name, email)
}

// CountHumans returns how many humans exist.
func (a *Accounts) CountHumans(ctx context.Context) (int, error) {
	return hoststore.CountHumans(ctx, a.pool)
}

func checkHuman(name, email string) (string, string, error) {
	name, email = strings.TrimSpace(name), strings.TrimSpace(email)
	if name == "" {
		return "", "", notifytype.InvalidArgument("name", "a human needs a name")
	}
	if at := strings.IndexByte(email, '@'); at <= 0 || at == len(email)-1 {
		return "", "", notifytype.InvalidArgument("email", "not an email address")
	}
	return name, email, nil
}

// Member is a human with a role, for CreateTeam.
type Member struct {
	HumanID int64
	Role    engine.Role
}

// CreateTeam creates a team with its members in one transaction.
func (a *Accounts) CreateTeam(ctx context.Context, name string, members ...Member) (Team, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return Team{}, notifytype.InvalidArgument("name", "a team needs a name")
	}
	for _, m := range members {
		if err := checkRole(m.Role); err != nil {
			return Team{}, err
		}
	}
	var team Team
	err := pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		var err error
		if team, err = hoststore.InsertTeam(ctx, tx, name); err != nil {
			return err
		}
		for _, m := range members {
			if err := hoststore.UpsertTeamMember(ctx, tx, team.ID, m.HumanID, string(m.Role)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Team{}, fmt.Errorf("error creating team: %w", err)
	}
	return team, nil
}

// AddMember makes the human a member of the team with role, replacing any
// role it had.
func (a *Accounts) AddMember(ctx context.Context, teamID, humanID int64, role engine.Role) error {
	if err := checkRole(role); err != nil {
		return err
	}
	return hoststore.UpsertTeamMember(ctx, a.pool, teamID, humanID, string(role))
}

func checkRole(r engine.Role) error {
	switch r {
	case engine.RoleOwner, engine.RoleAdmin, engine.RoleMember:
		return nil
	}
	return notifytype.InvalidArgumentf("role", "%q is not owner, admin or member", string(r))
}

// MintAPIToken creates an operator API bearer token for the human and
// returns it. This is the only time the token exists outside its holder:
// the database keeps its SHA-256 hash.
func (a *Accounts) MintAPIToken(ctx context.Context, humanID int64) (notifytype.Secret, error) {
	token, hash, err := mint(APITokenPrefix)
	if err != nil {
		return notifytype.Secret{}, err
	}
	if _, err := hoststore.InsertAPIToken(ctx, a.pool, humanID, hash); err != nil {
		return notifytype.Secret{}, err
	}
	return token, nil
}

// HumanByAPIToken returns the human holding an unrevoked operator API
// token, or not_found.
func (a *Accounts) HumanByAPIToken(ctx context.Context, token string) (Human, error) {
	if !strings.HasPrefix(token, APITokenPrefix) {
		return Human{}, notifytype.NotFound("api token")
	}
	return hoststore.HumanByAPITokenHash(ctx, a.pool, HashToken(token))
}

// MintLoginLink creates a one-time web login token for the human, valid for
// LoginLinkTTL, and returns it with its expiry. The web UI serves it at
// <base>/login/<token>.
func (a *Accounts) MintLoginLink(ctx context.Context, humanID int64) (notifytype.Secret, time.Time, error) {
	token, hash, err := mint(LoginLinkPrefix)
	if err != nil {
		return notifytype.Secret{}, time.Time{}, err
	}
	expires, err := hoststore.InsertLoginLink(ctx, a.pool, humanID, hash, LoginLinkTTL)
	if err != nil {
		return notifytype.Secret{}, time.Time{}, err
	}
	return token, expires, nil
}

// MintLoginLinkCapped is MintLoginLink unless the human already has
// limit links minted within LoginLinkTTL (however minted); then it mints
// nothing and ok is false. The count and the insert hold the human's row
// lock, so concurrent callers never pass the cap together. It bounds the
// web UI's "send me a sign-in link" per human across instances.
func (a *Accounts) MintLoginLinkCapped(ctx context.Context, humanID int64, limit int) (token notifytype.Secret, expires time.Time, ok bool, err error) {
	tok, hash, err := mint(LoginLinkPrefix)
	if err != nil {
		return notifytype.Secret{}, time.Time{}, false, err
	}
	err = pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		expires, ok, err = hoststore.InsertLoginLinkCapped(ctx, tx, humanID, hash, LoginLinkTTL, limit)
		return err
	})
	if err != nil || !ok {
		return notifytype.Secret{}, time.Time{}, false, err
	}
	return tok, expires, true, nil
}

// UseLoginLink spends a login link and returns its human. A link that is
// unknown, expired or already used answers not_found.
func (a *Accounts) UseLoginLink(ctx context.Context, token string) (Human, error) {
	if !strings.HasPrefix(token, LoginLinkPrefix) {
		return Human{}, notifytype.NotFound("login link")
	}
	return hoststore.UseLoginLink(ctx, a.pool, HashToken(token))
}

// HashToken is how every credential is stored and looked up: the SHA-256
// of the whole token, prefix included.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

func mint(prefix string) (notifytype.Secret, []byte, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return notifytype.Secret{}, nil, fmt.Errorf("error reading random bytes: %w", err)
	}
	token := prefix + base64.RawURLEncoding.EncodeToString(b)
	return notifytype.NewSecret(token), HashToken(token), nil
}

// HumanByEmail returns the human with email (not_found for none).
func (a *Accounts) HumanByEmail(ctx context.Context, email string) (Human, error) {
	return hoststore.HumanByEmail(ctx, a.pool, email)
}

// HumanByEmailFold returns the human with email, ignoring case when no
// email matches exactly and one does so (not_found for none or several).
func (a *Accounts) HumanByEmailFold(ctx context.Context, email string) (Human, error) {
	return hoststore.HumanByEmailFold(ctx, a.pool, strings.TrimSpace(email))
}

// GrantOperator gives the human with email the operator role (D26): the
// instance-wide ops view and /metrics. An unknown email is not_found.
func (a *Accounts) GrantOperator(ctx context.Context, email string) (Human, error) {
	return hoststore.SetOperator(ctx, a.pool, strings.TrimSpace(email), true)
}

// IsOperator reports whether the human holds the operator role.
func (a *Accounts) IsOperator(ctx context.Context, humanID int64) (bool, error) {
	h, err := hoststore.HumanByID(ctx, a.pool, humanID)
	if err != nil {
		return false, fmt.Errorf("error reading human %d: %w", humanID, err)
	}
	return h.IsOperator, nil
}
