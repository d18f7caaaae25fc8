package vault_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine/vault"
	"github.com/switchboard/notify/notifytype"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	key := make([]byte, vault.KeySize)
	_, err := rand.Read(key)
	require.NoError(t, err)
	return key
}

func TestSealOpenRoundTrip(t *testing.T) {
	t.Parallel()
	v := vault.New(newKey(t))
	owner := notifytype.Human("7")
	secret := notifytype.NewSecret("gtfya.canary-token")

	sealed, err := v.Seal(42, owner, secret)
	require.NoError(t, err)
	require.False(t, bytes.Contains(sealed, []byte("canary")), "sealed value carries the plaintext")

	again, err := v.Seal(42, owner, secret)
	require.NoError(t, err)
	require.NotEqual(t, sealed, again, "two seals share a nonce")

	got, err := v.Open(42, owner, sealed)
	require.NoError(t, err)
	require.Equal(t, secret.Reveal(), got.Reveal())
}

func TestOpenRefusesAnotherRow(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	v := vault.New(key)
	sealed, err := v.Seal(42, notifytype.Team("3"), notifytype.NewSecret("apprise://canary"))
	require.NoError(t, err)

	for name, open := range map[string]func() (notifytype.Secret, error){
		"other row":   func() (notifytype.Secret, error) { return v.Open(43, notifytype.Team("3"), sealed) },
		"other scope": func() (notifytype.Secret, error) { return v.Open(42, notifytype.Human("3"), sealed) },
		"other key":   func() (notifytype.Secret, error) { return vault.New(newKey(t)).Open(42, notifytype.Team("3"), sealed) },
		"altered": func() (notifytype.Secret, error) {
			b := bytes.Clone(sealed)
			b[len(b)-1] ^= 1
			return v.Open(42, notifytype.Team("3"), b)
		},
		"truncated": func() (notifytype.Secret, error) { return v.Open(42, notifytype.Team("3"), sealed[:4]) },
	} {
		t.Run(name, func(t *testing.T) {
			got, err := open()
			require.ErrorIs(t, err, vault.ErrOpen)
			require.True(t, got.IsZero())
			require.NotContains(t, err.Error(), "canary")
		})
	}
}

func TestNoKeyRefusesToSeal(t *testing.T) {
	t.Parallel()
	for _, v := range []*vault.Vault{vault.New(nil), vault.New([]byte{}), {}} {
		require.False(t, v.Enabled())
		sealed, err := v.Seal(1, notifytype.Human("1"), notifytype.NewSecret("x"))
		require.ErrorIs(t, err, notifytype.ErrEncryptionRequired)
		require.Nil(t, sealed)
		_, err = v.Open(1, notifytype.Human("1"), []byte("whatever"))
		require.ErrorIs(t, err, notifytype.ErrEncryptionRequired)
	}
}

func TestNewPanicsOnAWrongKeyLength(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { vault.New(make([]byte, 16)) })
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	for _, s := range []string{
		hex.EncodeToString(key),
		"  " + hex.EncodeToString(key) + "\n",
		base64.StdEncoding.EncodeToString(key),
		base64.RawStdEncoding.EncodeToString(key),
	} {
		got, err := vault.ParseKey(s)
		require.NoError(t, err, s)
		require.Equal(t, key, got)
	}
	for _, s := range []string{
		"",
		hex.EncodeToString(key[:16]),
		base64.StdEncoding.EncodeToString(key[:31]),
		"zz" + hex.EncodeToString(key)[2:],
		"not a key at all, not a key at all, not a key at all, not a key!",
	} {
		_, err := vault.ParseKey(s)
		require.Error(t, err, s)
		if s != "" {
			require.NotContains(t, err.Error(), s)
		}
	}
}
