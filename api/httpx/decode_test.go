package httpx_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/notifytype"
)

// TestDecodeJSONRefusesWhatIsNotOneJSONObject: a body declared as anything
// but JSON, or with a second value after the first, is refused naming
// what is wrong, and v is left as a refusal would leave it unused.
func TestDecodeJSONRefusesWhatIsNotOneJSONObject(t *testing.T) {
	t.Parallel()
	type body struct {
		Name string `json:"name"`
	}
	for _, c := range []struct {
		name, contentType, body, field string
	}{
		{"JSON declared as text", "text/plain", `{"name":"a"}`, "Content-Type"},
		{"JSON declared as a form", "application/x-www-form-urlencoded", `{"name":"a"}`, "Content-Type"},
		{"an unparsable type", "application/", `{"name":"a"}`, "Content-Type"},
		{"two objects", "application/json", `{"name":"a"}{"name":"b"}`, "body"},
		{"an object then garbage", "application/json", `{"name":"a"} x`, "body"},
		{"an unknown field", "application/json", `{"nmae":"a"}`, "body"},
		{"malformed", "application/json", `{"name":`, "body"},
	} {
		r := httptest.NewRequest("POST", "/api/v1/sinks", strings.NewReader(c.body))
		r.Header.Set("Content-Type", c.contentType)
		var v body
		err := httpx.DecodeJSON(r, &v)
		e, ok := notifytype.AsError(err)
		require.True(t, ok, "%s: %v", c.name, err)
		require.Equal(t, c.field, e.Field, c.name)
		require.NotContains(t, err.Error(), `"a"`, "%s: the refusal does not echo the body", c.name)
	}
	for _, ct := range []string{"", "application/json", "application/json; charset=utf-8", "application/merge-patch+json"} {
		r := httptest.NewRequest("PATCH", "/api/v1/sinks/1", strings.NewReader("{\"name\":\"a\"}\n"))
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		var v body
		require.NoError(t, httpx.DecodeJSON(r, &v), "Content-Type %q", ct)
		require.Equal(t, "a", v.Name)
	}
}
