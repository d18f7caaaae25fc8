package engine

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/switchboard/notify/sinks"
)

// decodeStoredJSON is what decodeContent does without the fast reader.
func decodeStoredJSON(payload []byte) (storedContent, error) {
	var row storedContent
	err := json.Unmarshal(payload, &row)
	return row, err
}

// The fast reader answers only where encoding/json answers the same: any
// bytes it reads, encoding/json reads without an error into an equal value.
func FuzzDecodeStoredFastAgreesWithEncodingJSON(f *testing.F) {
	for _, seed := range []string{
		`{"title":"nightly build","place":"forge","link_path":"/board/todos/12","data":{"cause":"fail at the cap","attempts":"3"}}`,
		`{"title":"t","cause":"exit 1","attempts":3,"attempt_summary":"3 tries","origin_display":"ci","origin_permalink":"https://x/1","artifact_handle":"a"}`,
		`{"lines":["a","b"],"data":{},"summary":"","subject":"s","body":"b\n\"q\""}`,
		`{"lines":[],"data":{"k":"v","k":"w"}}`,
		`{"title":"a\u00e9","place":null}`,
		`{"Title":"case"}`, `{"title":"x","title":"y"}`, `{"attempts":1e2}`, `{"attempts":-0}`,
		`{"attempts":01}`, `{"attempts":9223372036854775808}`, `[]`, `"x"`, `{}`, ` {"title" : "sp" } `,
		`{"title":"\/\b\f\n\r\t"}`, `{"data":{"a":1}}`, `{"lines":[null]}`, "{\"title\":\"\xff\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		fast, ok := decodeStoredFast(payload)
		if !ok {
			return
		}
		slow, err := decodeStoredJSON(payload)
		require.NoError(t, err, "the fast reader read %q, encoding/json refuses it", payload)
		require.Equal(t, slow, fast, "%q", payload)
	})
}

// What the engine stores, the fast reader reads (it is not a fallback that
// never runs), as encoding/json does.
func TestDecodeStoredFastReadsWhatTheEngineStores(t *testing.T) {
	text := rapid.StringMatching(`[ -~àéü€😀\n\t"\\/]{0,40}`)
	rapid.Check(t, func(t *rapid.T) {
		c := sinks.Content{
			Title: text.Draw(t, "title"), Place: text.Draw(t, "place"), Summary: text.Draw(t, "summary"),
			Subject: text.Draw(t, "subject"), LinkPath: text.Draw(t, "link"), Body: text.Draw(t, "body"),
			Lines: rapid.SliceOfN(text, -1, 4).Draw(t, "lines"),
			Data:  rapid.MapOfN(text, text, -1, 4).Draw(t, "data"),
		}
		if len(c.Lines) == 0 {
			c.Lines = nil
		}
		if len(c.Data) == 0 {
			c.Data = nil
		}
		var b []byte
		{
			var buf []byte
			enc := json.NewEncoder(&byteWriter{&buf})
			enc.SetEscapeHTML(false) // as the database's jsonb gives it back: no \u escapes
			require.NoError(t, enc.Encode(c))
			b = bytes.TrimSuffix(buf, []byte("\n")) // Encode ends with a newline, the database does not

		}
		fast, ok := decodeStoredFast(b)
		require.True(t, ok, "the fast reader reads what the engine stores: %s", b)
		slow, err := decodeStoredJSON(b)
		require.NoError(t, err)
		require.Equal(t, slow, fast)
		require.Equal(t, c, fast.Content)
	})
}

type byteWriter struct{ b *[]byte }

func (w *byteWriter) Write(p []byte) (int, error) { *w.b = append(*w.b, p...); return len(p), nil }
