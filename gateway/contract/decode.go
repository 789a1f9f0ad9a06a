package contract

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	"holon.dev/holon"
)

// maxDocumentSize bounds a manifest or mandate, so a parser is never handed
// an unbounded document.
const maxDocumentSize = 1 << 20

// maxMappingKeys bounds each mapping of a document: yaml.v3 looks for
// duplicate keys in quadratic time, so 40,000 keys in one mapping would
// take seconds to decode.
const maxMappingKeys = 1000

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	timeType        = reflect.TypeFor[time.Time]()
)

// decodeDocument reads a YAML document, or the same document as JSON (JSON is
// YAML), into v, a pointer to a struct whose fields carry json tags. Before
// anything is decoded it walks the tree against v's type, so an unknown field,
// a duplicate key, a value of the wrong shape or a scalar that its type
// refuses (an amount with seven decimals) is reported with its field path.
//
// A field that does not fit is reported and left out, and the rest is
// decoded; then validate checks the document's rules on what could be
// decoded, and its errors are added, but for those about a field that was
// left out ("required" would be misleading). Nothing is validated when
// nothing could be decoded.
func decodeDocument(b []byte, v any, validate func() error) fieldErrors {
	var fe fieldErrors
	if len(b) > maxDocumentSize {
		fe.add("", "document is %d bytes, at most %d", len(b), maxDocumentSize)
		return fe
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case err == io.EOF:
		fe.add("", "empty document")
		return fe
	case err != nil:
		fe.add("", "not valid YAML or JSON: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		return fe
	}
	// yaml.Unmarshal would read the first document and drop the rest unseen.
	var next yaml.Node
	if err := dec.Decode(&next); err != io.EOF && (err != nil || !emptyDocument(&next)) {
		fe.add("", "want one document, found another after \"---\"")
		return fe
	}
	if emptyDocument(&doc) {
		fe.add("", "empty document")
		return fe
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		fe.add("", "want a mapping of fields at the top level")
		return fe
	}
	var pruned []string
	checkNode(root, reflect.TypeOf(v).Elem(), "", &fe, &pruned)
	if err := root.Decode(v); err != nil {
		// checkNode refuses every value that Decode would refuse; this is a last resort.
		fe.add("", "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		return fe
	}
	return mergeFieldErrors(fe, pruned, validate())
}

// emptyDocument reports a document with no content, or only a bare null.
func emptyDocument(doc *yaml.Node) bool {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return true
	}
	n := doc.Content[0]
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null" && n.Value == "" && n.Style == 0
}

// mergeFieldErrors adds the rule errors of err to the shape errors already
// found, leaving out those about a field that was left out of the decoded
// value (pruned), or below it: "required" would be misleading.
func mergeFieldErrors(shape fieldErrors, pruned []string, err error) fieldErrors {
	var e *holon.Error
	if !errors.As(err, &e) {
		return shape
	}
	left := make(map[string]bool, len(pruned))
	for _, p := range pruned {
		left[p] = true
	}
	out := shape
	for _, f := range e.Fields {
		if !underPruned(f.Path, left) {
			out = append(out, f)
		}
	}
	return out
}

// underPruned reports whether path, or a path above it, was left out.
func underPruned(path string, left map[string]bool) bool {
	for {
		if left[path] {
			return true
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			return false
		}
		path = path[:i]
	}
}

// checkNode reports every place where the YAML tree n does not fit type t,
// and prunes the misfits below n, adding the path of each to pruned. It
// returns false when n itself is unusable (wrong shape, refused scalar): its
// parent then leaves it out.
func checkNode(n *yaml.Node, t reflect.Type, path string, fe *fieldErrors, pruned *[]string) bool {
	bad := func(format string, args ...any) bool {
		fe.add(path, format, args...)
		return false
	}
	if n.Kind == yaml.AliasNode {
		return bad("YAML aliases are not allowed")
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		if !decodes(n, reflect.TypeFor[any]()) {
			return bad("want null")
		}
		return true // null is absent; required fields are checked by the rules
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	scalar := t == timeType || reflect.PointerTo(t).Implements(textUnmarshaler) ||
		t.Kind() == reflect.String || t.Kind() == reflect.Bool || t.Kind() == reflect.Int || t.Kind() == reflect.Int64
	if n.Kind == yaml.ScalarNode && scalar {
		if n.Tag == "!!binary" {
			// Decode would base64-decode it into bytes that need not be text.
			return bad("want a string, not !!binary")
		}
		if r, ok := unsafeChar(n.Value); ok {
			return bad("character %U is not allowed in a document (YAML reads it only escaped)", r)
		}
	}
	if t == timeType {
		if n.Kind != yaml.ScalarNode {
			return bad("want a time such as 2027-01-01T00:00:00Z")
		}
		if _, err := time.Parse(time.RFC3339, n.Value); err != nil || !decodes(n, t) {
			return bad("want an RFC 3339 time such as 2027-01-01T00:00:00Z, got %q", n.Value)
		}
		return true
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		if n.Kind != yaml.ScalarNode {
			return bad("want a string")
		}
		u := reflect.New(t).Interface().(encoding.TextUnmarshaler)
		if err := u.UnmarshalText([]byte(n.Value)); err != nil {
			return bad("%s", err)
		}
		if !decodes(n, t) {
			return bad("want a string")
		}
		return true
	}
	switch t.Kind() {
	case reflect.Interface:
		before := len(*fe)
		checkAny(n, path, fe)
		return len(*fe) == before
	case reflect.Struct:
		if n.Kind != yaml.MappingNode || n.Tag != "!!map" {
			return bad("want a mapping")
		}
		if len(n.Content)/2 > maxMappingKeys {
			return bad("more than %d keys", maxMappingKeys)
		}
		fields := structFields(t)
		pruneMapping(n, path, fe, pruned, func(key string) (reflect.Type, bool) {
			f, ok := fields[key]
			if !ok {
				fe.add(join(path, key), "unknown field (known: %s)", knownFields(fields))
			}
			return f.Type, ok
		})
	case reflect.Map:
		if n.Kind != yaml.MappingNode || n.Tag != "!!map" {
			return bad("want a mapping")
		}
		if len(n.Content)/2 > maxMappingKeys {
			return bad("more than %d keys", maxMappingKeys)
		}
		pruneMapping(n, path, fe, pruned, func(string) (reflect.Type, bool) { return t.Elem(), true })
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode || n.Tag != "!!seq" {
			return bad("want a list")
		}
		kept := n.Content[:0:0]
		for i, el := range n.Content {
			if checkNode(el, t.Elem(), index(path, i), fe, pruned) {
				kept = append(kept, el)
			} else {
				*pruned = append(*pruned, index(path, i))
			}
		}
		n.Content = kept
	case reflect.String:
		if n.Kind != yaml.ScalarNode || !decodes(n, t) {
			return bad("want a string")
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || !decodes(n, t) {
			return bad("want true or false")
		}
	case reflect.Int, reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			return bad("want a whole number")
		}
		if !decodes(n, t) {
			return bad("want a whole number, and %s is too large", n.Value)
		}
	default:
		return bad("unsupported field type %s", t)
	}
	return true
}

// decodes reports whether yaml.v3 decodes the scalar n into a value of type
// t: checkNode refuses what Decode would refuse, so that the refusal names
// its field and the rest of the document is still decoded.
func decodes(n *yaml.Node, t reflect.Type) bool {
	return n.Decode(reflect.New(t).Interface()) == nil
}

// pruneMapping checks each value of the mapping n against the type fieldType
// gives for its key, and leaves out duplicate keys, unknown keys and values
// that do not fit.
func pruneMapping(n *yaml.Node, path string, fe *fieldErrors, pruned *[]string, fieldType func(key string) (reflect.Type, bool)) {
	seen := map[string]bool{}
	kept := n.Content[:0:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		p := join(path, k.Value)
		switch {
		case k.Kind == yaml.AliasNode:
			fe.add(p, "YAML aliases are not allowed")
			continue
		case k.Kind == yaml.ScalarNode && k.Tag == "!!merge":
			fe.add(p, "YAML merge keys are not allowed")
			continue
		case k.Kind != yaml.ScalarNode:
			fe.add(p, "keys must be strings")
			continue
		case seen[k.Value]:
			fe.add(p, "duplicate key")
			continue
		}
		seen[k.Value] = true
		t, ok := fieldType(k.Value)
		if !ok {
			continue
		}
		if checkNode(val, t, p, fe, pruned) {
			kept = append(kept, k, val)
		} else {
			*pruned = append(*pruned, p)
		}
	}
	n.Content = kept
}

// checkAny checks free-form values (JSON Schemas, examples): they must be
// plain JSON, with string keys and no aliases.
func checkAny(n *yaml.Node, path string, fe *fieldErrors) {
	switch n.Kind {
	case yaml.AliasNode:
		fe.add(path, "YAML aliases are not allowed")
	case yaml.MappingNode:
		if n.Tag != "!!map" {
			fe.add(path, "value of type %s is not JSON", n.Tag)
			return
		}
		if len(n.Content)/2 > maxMappingKeys {
			fe.add(path, "more than %d keys", maxMappingKeys)
			return
		}
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
			if r, ok := unsafeChar(k.Value); ok {
				fe.add(p, "character %U is not allowed in a document (YAML reads it only escaped)", r)
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
		if n.Tag != "!!seq" {
			fe.add(path, "value of type %s is not JSON", n.Tag)
			return
		}
		for i, el := range n.Content {
			checkAny(el, index(path, i), fe)
		}
	case yaml.ScalarNode:
		var v any
		switch n.Tag {
		case "!!str", "!!int", "!!float", "!!bool", "!!null":
			if r, ok := unsafeChar(n.Value); ok {
				fe.add(path, "character %U is not allowed in a document (YAML reads it only escaped)", r)
			} else if err := n.Decode(&v); err != nil {
				fe.add(path, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
			} else if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
				fe.add(path, "%s is not a JSON number (JSON has no infinity or NaN)", n.Value)
			} else if ok && f == 0 && math.Signbit(f) {
				// JSON has one zero: written back, -0.0 would read as the integer 0.
				n.Value, n.Tag, n.Style = "0", "!!int", 0
			}
		case "!!timestamp":
			fe.add(path, "%s is a YAML timestamp, not JSON: quote it to keep it a string", n.Value)
		default:
			fe.add(path, "value of type %s is not JSON", n.Tag)
		}
	}
}

// unsafeChar finds a character that YAML reads only escaped but JSON writes
// bare (DEL, the C1 controls, U+FFFE and U+FFFF): a document holding one
// could not be written out as JSON and read back.
func unsafeChar(s string) (rune, bool) {
	for _, r := range s {
		if (r >= 0x7F && r <= 0x9F) || r == 0xFFFE || r == 0xFFFF {
			return r, true
		}
	}
	return 0, false
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
