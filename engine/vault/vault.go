package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/switchboard/notify/notifytype"
)

// KeySize is the length of an operator key: AES-256.
const KeySize = 32

// ErrOpen reports a sealed value that does not open for the row it was read
// from: it was sealed for another row or scope, under another key, or was
// altered. It never says more, and never carries the value.
var ErrOpen = errors.New("sealed secret does not open for this connection")

// Vault seals secrets for connection rows. The zero value and New(nil) hold
// no key: Seal and Open fail with encryption_required. A Vault is safe for
// concurrent use.
type Vault struct {
	aead cipher.AEAD
}

// New returns a vault sealing under key, which must be KeySize bytes or
// empty. An empty key gives a vault that refuses to seal. Any other length is
// a wiring error (operator input goes through ParseKey first) and panics.
func New(key []byte) *Vault {
	if len(key) == 0 {
		return &Vault{}
	}
	if len(key) != KeySize {
		panic(fmt.Sprintf("vault: key must be %d bytes, got %d", KeySize, len(key)))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(fmt.Sprintf("vault: %v", err)) // unreachable: the length is checked
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		panic(fmt.Sprintf("vault: %v", err)) // unreachable for AES
	}
	return &Vault{aead: aead}
}

// Enabled reports whether the vault holds a key and can seal.
func (v *Vault) Enabled() bool { return v != nil && v.aead != nil }

// Seal encrypts plaintext for the connection row rowID in scope owner. The
// result carries its own random nonce.
func (v *Vault) Seal(rowID int64, owner notifytype.OwnerScope, plaintext notifytype.Secret) ([]byte, error) {
	if !v.Enabled() {
		return nil, notifytype.EncryptionRequired()
	}
	return v.aead.Seal(nil, nil, []byte(plaintext.Reveal()), associatedData(rowID, owner)), nil
}

// Open decrypts a value sealed for the row rowID in scope owner. A value
// sealed for any other row or scope fails with ErrOpen.
func (v *Vault) Open(rowID int64, owner notifytype.OwnerScope, sealed []byte) (notifytype.Secret, error) {
	if !v.Enabled() {
		return notifytype.Secret{}, notifytype.EncryptionRequired()
	}
	plain, err := v.aead.Open(nil, nil, sealed, associatedData(rowID, owner))
	if err != nil {
		return notifytype.Secret{}, ErrOpen
	}
	return notifytype.NewSecret(string(plain)), nil
}

func associatedData(rowID int64, owner notifytype.OwnerScope) []byte {
	s := owner.String()
	ad := make([]byte, 8, 8+len(s))
	binary.BigEndian.PutUint64(ad, uint64(rowID))
	return append(ad, s...)
}

// ParseKey reads SWITCHBOARD_SECRET_KEY: 64 hexadecimal characters, or the
// standard base64 (padded or not) of 32 bytes. Surrounding space is ignored.
// The error never repeats the value.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*KeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == KeySize {
			return b, nil
		}
	}
	return nil, fmt.Errorf("SWITCHBOARD_SECRET_KEY must be 64 hex characters or the base64 of %d bytes", KeySize)
}
