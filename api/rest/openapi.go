package rest

import (
	_ "embed"
	"net/http"

	"github.com/switchboard/notify/engine"
)

// OpenAPI is the API's OpenAPI 3.1 document, served at
// /api/v1/openapi.yaml. It documents every route; a test holds the two
// together both ways.
//
//go:embed openapi.yaml
var OpenAPI []byte

func (s *server) openAPI(w http.ResponseWriter, _ *http.Request, _ engine.Principal) error {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(OpenAPI) // a client gone away is nothing to answer
	return nil
}
