package engine

import (
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/apprise"
)

// AppriseSecret is the secret of an Apprise connection (ConnectionInput.
// Secret for KindApprise): the Apprise URLs to notify and the
// Authorization header the Apprise API wants, either or both. Both empty
// is the zero secret (none).
func AppriseSecret(urls []string, authorization string) notifytype.Secret {
	s := apprise.Secret{URLs: urls, Authorization: authorization}
	if s.IsZero() {
		return notifytype.Secret{}
	}
	return notifytype.NewSecret(s.Encode())
}
