package optjson_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/sinks/internal/optjson"
)

func TestFieldName(t *testing.T) {
	t.Parallel()

	require.Equal(t, "high", optjson.FieldName("high"))
	require.Equal(t, "config_key-2", optjson.FieldName("config_key-2"))
	require.Equal(t, `"hi\x1bgh"`, optjson.FieldName("hi\x1bgh"), "a key with a control character is not shown as a valid one")
	require.Equal(t, `"a.b"`, optjson.FieldName("a.b"))
	require.Equal(t, `""`, optjson.FieldName(""))
	require.Equal(t, `"\u202egnp"`, optjson.FieldName("\u202egnp"))
	long := optjson.FieldName(strings.Repeat("k", 65))
	require.Equal(t, `"`+strings.Repeat("k", 64)+`\u2026"`, long)
}

func TestObject(t *testing.T) {
	t.Parallel()

	for _, null := range []string{"", " ", "null", " null "} {
		obj, err := optjson.Object("options", []byte(null))
		require.NoError(t, err)
		require.Nil(t, obj)
	}
	for _, bad := range []string{"[]", "1", `"x"`, "{", `{"a":1} {}`} {
		_, err := optjson.Object("options", []byte(bad))
		require.ErrorContains(t, err, "invalid_argument: options", bad)
	}
}
