package web

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/switchboard/notify/api/httpx"
)

// A one-time page (a new credential, a webhook's new secret) follows the
// post-redirect-get rule like every other action: the POST does the work
// and redirects, the GET shows the result once. What the GET shows is
// carried by the flash cookie, sealed (AES-GCM) under a key derived from
// the browser's own session token, which the server stores only as a hash:
// any instance can open it for that session, no other session can, and
// nothing of it is kept on the server. The GET clears it, so a reload or
// the back button shows the secret no more (and repeats nothing).

// flashCookie is the cookie that carries a one-time page's content.
const flashCookie = "sb_flash"

// flashMaxAge bounds how long a flash waits for its GET, in seconds.
const flashMaxAge = 120

// flashKey derives the flash key of the request's session, or nil when
// the request has no session cookie.
func flashKey(r *http.Request) []byte {
	c, err := r.Cookie(httpx.SessionCookie)
	if err != nil || c.Value == "" {
		return nil
	}
	m := hmac.New(sha256.New, []byte(c.Value))
	m.Write([]byte("switchboard web flash v1"))
	return m.Sum(nil)
}

// setFlash seals v for the GET of path, which must be the page the
// response redirects to.
func (s *server) setFlash(w http.ResponseWriter, r *http.Request, path string, v any) error {
	key := flashKey(r)
	if key == nil {
		return errors.New("no session to seal a flash under")
	}
	plain, err := json.Marshal(v)
	if err != nil {
		return err
	}
	aead, err := newAEAD(key)
	if err != nil {
		return err
	}
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	sealed := aead.Seal(nonce, nonce, plain, []byte(path))
	http.SetCookie(w, &http.Cookie{
		Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString(sealed), Path: path, MaxAge: flashMaxAge,
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode,
	})
	return nil
}

// takeFlash opens the flash sealed for the request's path into v and
// clears it; false when there is none (shown already, expired, or sealed
// for another session or page).
func (s *server) takeFlash(w http.ResponseWriter, r *http.Request, v any) bool {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return false
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: "", Path: r.URL.Path, MaxAge: -1,
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode})
	key := flashKey(r)
	sealed, err := base64.RawURLEncoding.DecodeString(c.Value)
	if key == nil || err != nil {
		return false
	}
	aead, err := newAEAD(key)
	if err != nil || len(sealed) < aead.NonceSize() {
		return false
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(r.URL.Path))
	if err != nil {
		return false
	}
	return json.Unmarshal(plain, v) == nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
