package rest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// The document's EventType enum is the line openAPIFor replaces with the
// engine's declared types: an edit of the document that moves it would
// leave the reference host's six listed for every embedder.
func TestOpenAPIEventTypeEnumIsReplaceable(t *testing.T) {
	require.Equal(t, 1, bytes.Count(OpenAPI, []byte("    EventType:\n      type: string\n"+eventTypeEnum)))
}
