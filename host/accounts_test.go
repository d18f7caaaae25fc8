package host_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
)

func TestAccounts(t *testing.T) {
	t.Parallel()

	type bundle struct {
		accounts *host.Accounts
		factory  *hosttest.Factory
	}
	setup := func(t *testing.T) (*bundle, context.Context) {
		t.Helper()
		pool := hosttest.New(t)
		return &bundle{accounts: host.NewAccounts(pool), factory: hosttest.NewFactory(t, pool)}, context.Background()
	}

	t.Run("CreateHumanAndEnsureIsIdempotent", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)

		h, err := b.accounts.CreateHuman(ctx, "Ada", "ada@example.test")
		require.NoError(t, err)
		require.Positive(t, h.ID)
		require.Equal(t, "Ada", h.Name)

		_, err = b.accounts.CreateHuman(ctx, "Ada again", "ada@example.test")
		require.Error(t, err, "an email is unique")

		again, created, err := b.accounts.EnsureHuman(ctx, "Other name", "ada@example.test")
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, h.ID, again.ID)
		require.Equal(t, "Ada", again.Name, "an existing human is returned unchanged")

		n, err := b.accounts.CountHumans(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	})

	t.Run("EnsureHumanConcurrentCreatesOne", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)

		var wg sync.WaitGroup
		ids := make([]int64, 8)
		createdCount := make([]bool, len(ids))
		for i := range ids {
			wg.Go(func() {
				h, created, err := b.accounts.EnsureHuman(ctx, "Demo", "demo@example.test")
				if err == nil {
					ids[i], createdCount[i] = h.ID, created
				}
			})
		}
		wg.Wait()
		created := 0
		for i := range ids {
			require.Equal(t, ids[0], ids[i])
			if createdCount[i] {
				created++
			}
		}
		require.Positive(t, ids[0])
		require.Equal(t, 1, created)
	})

	t.Run("CreateHumanRefusesBadInput", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)

		_, err := b.accounts.CreateHuman(ctx, " ", "x@example.test")
		require.ErrorIs(t, err, notifytype.ErrInvalidArgument)
		_, err = b.accounts.CreateHuman(ctx, "X", "not-an-email")
		require.ErrorIs(t, err, notifytype.ErrInvalidArgument)
	})

	t.Run("CreateTeamWithMembers", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)
		owner, admin, member := b.factory.Human(""), b.factory.Human(""), b.factory.Human("")

		team, err := b.accounts.CreateTeam(ctx, "platform",
			host.Member{HumanID: owner, Role: engine.RoleOwner},
			host.Member{HumanID: admin, Role: engine.RoleAdmin})
		require.NoError(t, err)
		require.Positive(t, team.ID)
		require.NoError(t, b.accounts.AddMember(ctx, team.ID, member, engine.RoleMember))

		roles := map[int64]string{}
		for _, h := range []int64{owner, admin, member} {
			var role string
			require.NoError(t, b.factory.InTx(func(tx pgx.Tx) error {
				var err error
				role, err = hoststore.TeamRole(ctx, tx, team.ID, h)
				return err
			}))
			roles[h] = role
		}
		require.Equal(t, map[int64]string{owner: "owner", admin: "admin", member: "member"}, roles)

		// AddMember replaces a role.
		require.NoError(t, b.accounts.AddMember(ctx, team.ID, member, engine.RoleAdmin))
		require.Equal(t, 1, b.factory.Count(`SELECT count(*) FROM team_members WHERE team_id = $1 AND human_id = $2 AND role = 'admin'`, team.ID, member))
	})

	t.Run("CreateTeamIsAtomic", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)

		_, err := b.accounts.CreateTeam(ctx, "ghosts", host.Member{HumanID: 999999, Role: engine.RoleOwner})
		require.Error(t, err, "a member that does not exist fails the team")
		require.Zero(t, b.factory.Count(`SELECT count(*) FROM teams`))

		_, err = b.accounts.CreateTeam(ctx, "t", host.Member{HumanID: b.factory.Human(""), Role: "boss"})
		require.ErrorIs(t, err, notifytype.ErrInvalidArgument)
		require.Zero(t, b.factory.Count(`SELECT count(*) FROM teams`))
	})

	t.Run("APITokenIsStoredHashedAndResolves", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)
		h, err := b.accounts.CreateHuman(ctx, "Op", "op@example.test")
		require.NoError(t, err)

		tok, err := b.accounts.MintAPIToken(ctx, h.ID)
		require.NoError(t, err)
		raw := tok.Reveal()
		require.True(t, strings.HasPrefix(raw, host.APITokenPrefix))
		body, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(raw, host.APITokenPrefix))
		require.NoError(t, err)
		require.Len(t, body, 32)
		require.Equal(t, "<secret>", tok.String(), "a minted token never prints")

		sum := sha256.Sum256([]byte(raw))
		require.Equal(t, 1, b.factory.Count(`SELECT count(*) FROM api_tokens WHERE human_id = $1 AND token_hash = $2`, h.ID, sum[:]))
		require.Zero(t, b.factory.Count(`SELECT count(*) FROM api_tokens t WHERE strpos(t::text, $1) > 0 OR strpos(encode(t.token_hash, 'escape'), $1) > 0`, raw),
			"the token itself is never stored")

		got, err := b.accounts.HumanByAPIToken(ctx, raw)
		require.NoError(t, err)
		require.Equal(t, h.ID, got.ID)

		other, err := b.accounts.MintAPIToken(ctx, h.ID)
		require.NoError(t, err)
		require.NotEqual(t, raw, other.Reveal())

		_, err = b.accounts.HumanByAPIToken(ctx, raw+"x")
		require.ErrorIs(t, err, notifytype.ErrNotFound)
		_, err = b.accounts.HumanByAPIToken(ctx, "sbl_"+strings.TrimPrefix(raw, "sbo_"))
		require.ErrorIs(t, err, notifytype.ErrNotFound, "a token of another kind does not resolve")

		require.Equal(t, 1, b.factory.Count(`WITH r AS (UPDATE api_tokens SET revoked_at = now() WHERE token_hash = $1 RETURNING 1) SELECT count(*) FROM r`, sum[:]))
		_, err = b.accounts.HumanByAPIToken(ctx, raw)
		require.ErrorIs(t, err, notifytype.ErrNotFound, "a revoked token does not resolve")
	})

	t.Run("LoginLinkIsOneTimeAndExpires", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)
		h, err := b.accounts.CreateHuman(ctx, "Web", "web@example.test")
		require.NoError(t, err)

		tok, expires, err := b.accounts.MintLoginLink(ctx, h.ID)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(tok.Reveal(), host.LoginLinkPrefix))
		require.WithinDuration(t, time.Now().Add(host.LoginLinkTTL), expires, time.Minute)
		require.Zero(t, b.factory.Count(`SELECT count(*) FROM login_links l WHERE strpos(l::text, $1) > 0`, tok.Reveal()),
			"the link token itself is never stored")

		_, err = b.accounts.HumanByAPIToken(ctx, tok.Reveal())
		require.ErrorIs(t, err, notifytype.ErrNotFound, "a login link is not an API token")

		got, err := b.accounts.UseLoginLink(ctx, tok.Reveal())
		require.NoError(t, err)
		require.Equal(t, h.ID, got.ID)
		_, err = b.accounts.UseLoginLink(ctx, tok.Reveal())
		require.ErrorIs(t, err, notifytype.ErrNotFound, "a link works once")

		old, _, err := b.accounts.MintLoginLink(ctx, h.ID)
		require.NoError(t, err)
		require.Equal(t, 1, b.factory.Count(`WITH r AS (UPDATE login_links SET expires_at = now() - interval '1 second' WHERE token_hash = $1 RETURNING 1) SELECT count(*) FROM r`,
			host.HashToken(old.Reveal())))
		_, err = b.accounts.UseLoginLink(ctx, old.Reveal())
		require.ErrorIs(t, err, notifytype.ErrNotFound, "an expired link does not work")
	})

	t.Run("LoginLinkRaceHasOneWinner", func(t *testing.T) {
		t.Parallel()
		b, ctx := setup(t)
		h := b.factory.Human("")
		tok, _, err := b.accounts.MintLoginLink(ctx, h)
		require.NoError(t, err)

		var wg sync.WaitGroup
		wins := make([]bool, 8)
		for i := range wins {
			wg.Go(func() {
				_, err := b.accounts.UseLoginLink(ctx, tok.Reveal())
				wins[i] = err == nil
			})
		}
		wg.Wait()
		n := 0
		for _, w := range wins {
			if w {
				n++
			}
		}
		require.Equal(t, 1, n)
	})
}
