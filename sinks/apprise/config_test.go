package apprise_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/apprise"
)

func TestParseOptionsDefaults(t *testing.T) {
	t.Parallel()

	want := map[notifytype.Severity]string{"low": "info", "normal": "warning", "high": "failure"}
	for _, raw := range []string{"", "null", "{}", `{"types": null}`} {
		o, err := apprise.ParseOptions(json.RawMessage(raw))
		require.NoError(t, err, raw)
		require.Equal(t, want, o.Types, raw)
		require.False(t, o.Stateful())
	}
}

func TestParseOptionsAccepts(t *testing.T) {
	t.Parallel()

	o, err := apprise.ParseOptions(json.RawMessage(`{"config_key": "ops_team-1", "tag": "devops, sre critical", "types": {"low": "success"}}`))
	require.NoError(t, err)
	require.True(t, o.Stateful())
	require.Equal(t, "ops_team-1", o.ConfigKey)
	require.Equal(t, "devops, sre critical", o.Tag)
	require.Equal(t, map[notifytype.Severity]string{"low": "success", "normal": "warning", "high": "failure"}, o.Types)
	require.Equal(t, "success", o.Type(notifytype.SeverityLow))
	require.Equal(t, "warning", o.Type("bogus"))

	b, err := json.Marshal(o)
	require.NoError(t, err)
	again, err := apprise.ParseOptions(b)
	require.NoError(t, err)
	require.Equal(t, o, again)
}

func TestParseOptionsRefusals(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct{ raw, field string }{
		{`[1]`, "options"},
		{`{"configkey": "ops"}`, "options.configkey"},
		{`{"urls": "json://x"}`, "options.urls"},
		{`{"config_key": ""}`, "options.config_key"},
		{`{"config_key": "ops/../x"}`, "options.config_key"},
		{`{"config_key": "` + strings.Repeat("k", 129) + `"}`, "options.config_key"},
		{`{"config_key": 7}`, "options.config_key"},
		{`{"tag": "a;b"}`, "options.tag"},
		{`{"tag": "a\nb"}`, "options.tag"},
		{`{"tag": "` + strings.Repeat("t", 257) + `"}`, "options.tag"},
		{`{"types": {"high": "critical"}}`, "options.types.high"},
		{`{"types": {"urgent": "info"}}`, "options.types.urgent"},
		{`{"types": {"low": 1}}`, "options.types.low"},
		{`{"types": "info"}`, "options.types"},
	} {
		_, err := apprise.ParseOptions(json.RawMessage(tc.raw))
		require.ErrorIs(t, err, notifytype.ErrInvalidArgument, tc.raw)
		e, _ := notifytype.AsError(err)
		require.Equal(t, tc.field, e.Field, tc.raw)
	}

	_, err := apprise.ParseOptions(json.RawMessage(`{"config_key": "` + strings.Repeat("k", 128) + `", "tag": "` + strings.Repeat("t", 256) + `"}`))
	require.NoError(t, err, "the limits themselves are allowed")
}

func TestSecretRoundTripAndRedaction(t *testing.T) {
	t.Parallel()

	const url1, auth = "tgram://CANARYbottoken/12345", "Basic Q0FOQVJZYXV0aA=="
	s := apprise.Secret{URLs: []string{url1, "mailto://u:CANARYpw@example.com?to=a@x.org,b@y.org"}, Authorization: auth}

	again, err := apprise.ParseSecret(s.Encode())
	require.NoError(t, err)
	require.Equal(t, s, again)

	marshalled, err := json.Marshal(s)
	require.NoError(t, err)
	var sb strings.Builder
	slog.New(slog.NewJSONHandler(&sb, nil)).Info("x", "secret", s)
	for _, shown := range []string{s.String(), fmt.Sprintf("%v %+v %#v %s", s, s, s, s), string(marshalled), sb.String()} {
		require.NotContains(t, shown, "CANARY")
	}

	zero, err := apprise.ParseSecret("")
	require.NoError(t, err)
	require.True(t, zero.IsZero())
}

func TestParseSecretRefusalsDoNotEcho(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct{ in, field string }{
		{`tgram://CANARYbot/1`, "secret"},
		{`{"urls": "tgram://CANARYbot/1"}`, "secret"},
		{`{"urls": ["tgram://CANARYbot/1"], "extra": "CANARY"}`, "secret"},
		{`{"urls": ["CANARYnoscheme"]}`, "secret.urls"},
		{`{"urls": ["tgram://CANARY bot/1"]}`, "secret.urls"},
		{`{"authorization": "Bearer CANARY\r\nX-Evil: 1"}`, "secret.authorization"},
		{`{"urls": []} {"CANARY": 1}`, "secret"},
	} {
		_, err := apprise.ParseSecret(tc.in)
		require.ErrorIs(t, err, notifytype.ErrInvalidArgument, tc.in)
		e, _ := notifytype.AsError(err)
		require.Equal(t, tc.field, e.Field, tc.in)
		require.NotContains(t, err.Error(), "CANARY")
	}
}

func TestCheckSchemes(t *testing.T) {
	t.Parallel()

	allowed := apprise.DefaultAllowedSchemes
	require.NoError(t, apprise.CheckSchemes(nil, allowed))
	require.NoError(t, apprise.CheckSchemes([]string{"tgram://bot/chat", "ntfys://topic", "mailto://u:p@x.org"}, allowed))

	for _, scheme := range []string{"json", "jsons", "xml", "xmls", "form", "forms", "windows", "dbus", "gnome", "macosx", "syslog"} {
		err := apprise.CheckSchemes([]string{"tgram://ok/1", strings.ToUpper(scheme) + "://CANARY.example.net/hook?token=CANARY"}, allowed)
		require.ErrorIs(t, err, notifytype.ErrForbiddenScheme, scheme)
		e, _ := notifytype.AsError(err)
		require.Equal(t, scheme, e.Scheme)
		require.NotContains(t, err.Error(), "CANARY")
	}

	err := apprise.CheckSchemes([]string{"CANARY-no-scheme"}, allowed)
	require.ErrorIs(t, err, notifytype.ErrInvalidArgument)
	e, _ := notifytype.AsError(err)
	require.Equal(t, "secret.urls", e.Field)
	require.NotContains(t, err.Error(), "CANARY")

	require.NoError(t, apprise.CheckSchemes([]string{"json://hook.example.net"}, append(slices.Clone(allowed), "json")), "an operator may allow json")
}
