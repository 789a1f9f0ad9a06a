package contract

import (
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Document kinds told apart by DocumentKind.
const (
	KindManifest = "manifest"
	KindMandate  = "mandate"
)

// DocumentKind tells a manifest from a mandate by the fields each must have:
// a manifest has interface, pricing or runtime; a mandate has issuer, grantee
// or budget. It returns "" and the reason when the document is neither.
func DocumentKind(b []byte) (string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return "", fmt.Errorf("not valid YAML or JSON: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return "", errors.New("want a mapping of fields at the top level")
	}
	top := map[string]bool{}
	root := doc.Content[0]
	for i := 0; i < len(root.Content); i += 2 {
		top[root.Content[i].Value] = true
	}
	has := func(keys ...string) bool {
		for _, k := range keys {
			if top[k] {
				return true
			}
		}
		return false
	}
	switch {
	case has("interface", "pricing", "runtime"):
		return KindManifest, nil
	case has("issuer", "grantee", "budget"):
		return KindMandate, nil
	}
	return "", errors.New("neither a manifest (it would have interface, pricing, runtime) nor a mandate (issuer, grantee, budget)")
}
