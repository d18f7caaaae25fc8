package gotify_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/gotify"
)

func TestParseOptionsDefaults(t *testing.T) {
	t.Parallel()

	want := map[notifytype.Severity]int{"low": 2, "normal": 5, "high": 8}
	for _, raw := range []string{"", "null", " ", "{}", `{"priorities": null}`, `{"priorities": {}}`} {
		o, err := gotify.ParseOptions(json.RawMessage(raw))
		require.NoError(t, err, raw)
		require.Equal(t, want, o.Priorities, raw)
	}
	require.Equal(t, want, gotify.DefaultOptions().Priorities)
}

func TestParseOptionsPartialMapFilled(t *testing.T) {
	t.Parallel()

	o, err := gotify.ParseOptions(json.RawMessage(`{"priorities": {"high": 10, "low": 0}}`))
	require.NoError(t, err)
	require.Equal(t, map[notifytype.Severity]int{"low": 0, "normal": 5, "high": 10}, o.Priorities)
	require.Equal(t, 10, o.Priority(notifytype.SeverityHigh))
	require.Equal(t, 0, o.Priority(notifytype.SeverityLow))
	require.Equal(t, 5, o.Priority("bogus"), "an unknown severity gets the normal default")
	require.Equal(t, 8, gotify.Options{}.Priority(notifytype.SeverityHigh), "a zero Options still answers defaults")
}

func TestParseOptionsRefusals(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct{ raw, field string }{
		{`[]`, "options"},
		{`"x"`, "options"},
		{`{"priority": {}}`, "options.priority"},
		{`{"priorities": {"high": 8}, "extra": 1}`, "options.extra"},
		{`{"priorities": []}`, "options.priorities"},
		{`{"priorities": {"urgent": 9}}`, "options.priorities.urgent"},
		{`{"priorities": {"high": 11}}`, "options.priorities.high"},
		{`{"priorities": {"high": -1}}`, "options.priorities.high"},
		{`{"priorities": {"high": 5.5}}`, "options.priorities.high"},
		{`{"priorities": {"high": "5"}}`, "options.priorities.high"},
		{`{"priorities": {"normal": null}}`, "options.priorities.normal"},
	} {
		_, err := gotify.ParseOptions(json.RawMessage(tc.raw))
		require.ErrorIs(t, err, notifytype.ErrInvalidArgument, tc.raw)
		e, ok := notifytype.AsError(err)
		require.True(t, ok)
		require.Equal(t, tc.field, e.Field, tc.raw)
	}
}

func TestOptionsRoundTrip(t *testing.T) {
	t.Parallel()

	o, err := gotify.ParseOptions(json.RawMessage(`{"priorities": {"high": 9}}`))
	require.NoError(t, err)
	b, err := json.Marshal(o)
	require.NoError(t, err)
	again, err := gotify.ParseOptions(b)
	require.NoError(t, err)
	require.Equal(t, o, again)
}
