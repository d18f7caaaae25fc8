package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
)

func TestRedactedHidesAnEchoedSecret(t *testing.T) {
	t.Parallel()
	secret := `{"urls":["tgram://bot-token-123456/chat"],"authorization":"Bearer abc"}`
	for _, echoed := range []error{
		notifytype.InvalidArgument("secret.urls", "bad URL tgram://bot-token-123456/chat"),
		notifytype.InvalidArgument("secret", "cannot parse "+secret),
	} {
		err := redacted(echoed, "secret", secret)
		requireCodeField(t, err, notifytype.CodeInvalidArgument, "secret")
		require.NotContains(t, err.Error(), "bot-token")
	}
	kept := notifytype.InvalidArgument("secret", "is not an Apprise secret (a JSON object with urls and/or authorization)")
	require.Same(t, kept, redacted(kept, "secret", secret))
	scheme := notifytype.ForbiddenScheme("json")
	require.Same(t, scheme, redacted(scheme, "secret", secret))
}

func requireCodeField(t *testing.T, err error, code notifytype.Code, field string) {
	t.Helper()
	e, ok := notifytype.AsError(err)
	require.True(t, ok)
	require.Equal(t, code, e.Code)
	require.Equal(t, field, e.Field)
}
