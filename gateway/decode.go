package gateway

import (
	"encoding"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// maxDocumentSize bounds a manifest or mandate, so a parser is never handed
// an unbounded document.
const maxDocumentSize = 1 << 20

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	timeType        = reflect.TypeFor[time.Time]()
)

// decodeDocument reads a YAML document, or the same document as JSON (JSON is
// YAML), into v, a pointer to a struct whose fields carry json tags. Before
// anything is decoded it walks the tree against v's type, so an unknown field,
// a duplicate key, a value of the wrong shape or a scalar that its type
// refuses (an amount with seven decimals) is reported with its field path.
func decodeDocument(b []byte, v any) fieldErrors {
	var fe fieldErrors
	if len(b) > maxDocumentSize {
		fe.add("", "document is %d bytes, at most %d", len(b), maxDocumentSize)
		return fe
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		fe.add("", "not valid YAML or JSON: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		return fe
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		fe.add("", "empty document")
		return fe
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		fe.add("", "want a mapping of fields at the top level")
		return fe
	}
	checkNode(root, reflect.TypeOf(v).Elem(), "", &fe)
	if len(fe) > 0 {
		return fe
	}
	if err := root.Decode(v); err != nil {
		fe.add("", "%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return fe
}

// checkNode reports every place where the YAML tree n does not fit type t.
func checkNode(n *yaml.Node, t reflect.Type, path string, fe *fieldErrors) {
	if n.Kind == yaml.AliasNode {
		fe.add(path, "YAML aliases are not allowed")
		return
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // null is absent; required fields are checked by the validator
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType {
		if n.Kind != yaml.ScalarNode {
			fe.add(path, "want a time such as 2027-01-01T00:00:00Z")
			return
		}
		if _, err := time.Parse(time.RFC3339, n.Value); err != nil {
			fe.add(path, "want an RFC 3339 time such as 2027-01-01T00:00:00Z, got %q", n.Value)
		}
		return
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		if n.Kind != yaml.ScalarNode {
			fe.add(path, "want a string")
			return
		}
		u := reflect.New(t).Interface().(encoding.TextUnmarshaler)
		if err := u.UnmarshalText([]byte(n.Value)); err != nil {
			fe.add(path, "%s", err)
		}
		return
	}
	switch t.Kind() {
	case reflect.Interface:
		checkAny(n, path, fe)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			fe.add(path, "want a mapping")
			return
		}
		fields := structFields(t)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			if seen[k.Value] {
				fe.add(p, "duplicate key")
				continue
			}
			seen[k.Value] = true
			f, ok := fields[k.Value]
			if !ok {
				fe.add(p, "unknown field (known: %s)", knownFields(fields))
				continue
			}
			checkNode(val, f.Type, p, fe)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			fe.add(path, "want a mapping")
			return
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			if seen[k.Value] {
				fe.add(p, "duplicate key")
				continue
			}
			seen[k.Value] = true
			checkNode(val, t.Elem(), p, fe)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			fe.add(path, "want a list")
			return
		}
		for i, el := range n.Content {
			checkNode(el, t.Elem(), index(path, i), fe)
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			fe.add(path, "want a string")
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			fe.add(path, "want true or false")
		}
	case reflect.Int, reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			fe.add(path, "want a whole number")
		}
	default:
		fe.add(path, "unsupported field type %s", t)
	}
}

// checkAny checks free-form values (JSON Schemas, examples): they must be
// plain JSON, with string keys and no aliases.
func checkAny(n *yaml.Node, path string, fe *fieldErrors) {
	switch n.Kind {
	case yaml.AliasNode:
		fe.add(path, "YAML aliases are not allowed")
	case yaml.MappingNode:
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			p := join(path, k.Value)
			if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "!!int" && k.Tag != "!!float" && k.Tag != "!!bool") {
				fe.add(p, "keys must be strings")
				continue
			}
			if k.Tag != "!!str" {
				fe.add(p, "quote this key: JSON keys are strings")
				continue
			}
			if seen[k.Value] {
				fe.add(p, "duplicate key")
				continue
			}
			seen[k.Value] = true
			checkAny(n.Content[i+1], p, fe)
		}
	case yaml.SequenceNode:
		for i, el := range n.Content {
			checkAny(el, index(path, i), fe)
		}
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str", "!!int", "!!float", "!!bool", "!!null":
		default:
			fe.add(path, "value of type %s is not JSON", n.Tag)
		}
	}
}

type fieldInfo struct {
	Type reflect.Type
}

// structFields maps the json names of t's exported fields to their types.
func structFields(t reflect.Type) map[string]fieldInfo {
	m := map[string]fieldInfo{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = fieldInfo{Type: f.Type}
	}
	return m
}

func knownFields(m map[string]fieldInfo) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// checkTags reports a field whose json and yaml tags differ: yaml.v3 reads
// `yaml` tags and the walk above reads `json` tags, so every document type
// declares both, and a test keeps them in step.
func checkTags(t reflect.Type) error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		j, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		y, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if j != y {
			return fmt.Errorf("%s.%s: json tag %q and yaml tag %q differ", t.Name(), f.Name, j, y)
		}
	}
	return nil
}
