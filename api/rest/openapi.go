package rest

import (
	"bytes"
	_ "embed"
	"net/http"
	"strings"

	"github.com/switchboard/notify/engine"
)

// OpenAPI is the API's OpenAPI 3.1 document, served at
// /api/v1/openapi.yaml. It documents every route; a test holds the two
// together both ways. Its EventType enum lists the reference host's types;
// the document served lists the types the engine declares
// (Engine.EventKinds) instead.
//
//go:embed openapi.yaml
var OpenAPI []byte

// eventTypeEnum is the EventType schema's enum line in OpenAPI.
const eventTypeEnum = "      enum: [todo.dead_lettered, relay.exhausted, delivery.quarantined, rule.notify, agent.notify, digest]\n"

// openAPIFor is OpenAPI with the EventType enum of the types e declares.
func openAPIFor(e *engine.Engine) []byte {
	var names []string
	for _, k := range e.EventKinds() {
		names = append(names, string(k.Type))
	}
	line := "      enum: [" + strings.Join(names, ", ") + "]\n"
	return bytes.Replace(OpenAPI, []byte("    EventType:\n      type: string\n"+eventTypeEnum),
		[]byte("    EventType:\n      type: string\n"+line), 1)
}

func (s *server) openAPI(w http.ResponseWriter, _ *http.Request, _ engine.Principal) error {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(openAPIFor(s.d.Engine)) // a client gone away is nothing to answer
	return nil
}
