package webui

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"
)

// OpenAPIPath is where the gateway serves its OpenAPI description.
const OpenAPIPath = "/v0/openapi.json"

// openAPIYAML is the OpenAPI 3.1 description of the gateway's HTTP API,
// kept in the manual beside the page that explains it.
//
//go:embed manual/openapi.yaml
var openAPIYAML []byte

// OpenAPI returns the OpenAPI 3.1 description of the HTTP API as JSON.
func OpenAPI() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(openAPIYAML, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	return b, nil
}
