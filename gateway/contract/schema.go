package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/wasilibs/go-re2"
)

// Schema is a compiled JSON Schema (draft 2020-12) whose every pattern runs
// on RE2, so no author-written expression takes more than linear time.
type Schema struct {
	s *jsonschema.Schema
}

// schemaURL is where a compiled schema claims to live: a relative $ref
// resolves against it and reaches the refusing loader, never the disk.
const schemaURL = "holon:///schema.json"

const draft202012 = "https://json-schema.org/draft/2020-12/schema"

// errRemoteRef is what every $ref outside the schema itself gets.
var errRemoteRef = errors.New("remote $ref refused: a schema must be self-contained (use $defs and \"#/$defs/...\")")

type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) { return nil, errRemoteRef }

func re2Engine(s string) (jsonschema.Regexp, error) {
	// Go's regexp/syntax parses the RE2 syntax: refusing here what it
	// refuses gives the same verdict without the Wasm RE2 logging every
	// parse error to stderr.
	if _, err := syntax.Parse(s, syntax.Perl); err != nil {
		return nil, err
	}
	re, err := re2.Compile(s)
	if err != nil {
		return nil, err
	}
	return re, nil
}

// CompileSchema compiles a JSON Schema given as decoded JSON (or YAML) values.
// It refuses a schema that declares another draft, or that refers to anything
// outside itself.
func CompileSchema(doc any) (*Schema, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("not a JSON value: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not a JSON value: %w", err)
	}
	switch v.(type) {
	case bool:
	case map[string]any:
		if err := checkSchemaCost(v); err != nil {
			return nil, err
		}
		if err := checkDraft(v, ""); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("a JSON Schema is an object (or true/false)")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	c.UseRegexpEngine(re2Engine)
	if err := c.AddResource(schemaURL, v); err != nil {
		return nil, err
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, schemaCompileError(err)
	}
	return &Schema{s: s}, nil
}

// Bounds that keep compiling a schema cheap, whoever wrote it: the
// compiler's time grows faster than linearly with the number and the nesting
// of subschemas (10,000 subschemas take about half a second, a chain of
// 5,000 nested ones over a minute), and RE2 compiles each repetition of a
// large class such as \pL into its own piece of program (\pL{100} takes
// about 0.2 s; the estimate below puts it at 65,900).
const (
	maxSchemaDepth  = 64     // nesting of JSON values
	maxSchemaValues = 10_000 // JSON values, all levels together
	maxPatternCost  = 20_000 // estimated program size, all patterns together
)

// checkSchemaCost refuses a schema beyond the bounds above before the
// compiler sees it.
func checkSchemaCost(doc any) error {
	values, cost := 0, 0
	var walk func(v any, depth int, ptr string) error
	walk = func(v any, depth int, ptr string) error {
		values++
		switch {
		case depth > maxSchemaDepth:
			return fmt.Errorf("at %s: nested deeper than %d levels", ptr, maxSchemaDepth)
		case values > maxSchemaValues:
			return fmt.Errorf("more than %d values: split it, or use $defs and $ref", maxSchemaValues)
		}
		switch v := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(v) {
				p := ptr + "/" + k
				if k == "pattern" {
					if s, ok := v[k].(string); ok {
						cost += patternCost(s)
					}
				}
				if pp, ok := v[k].(map[string]any); ok && k == "patternProperties" {
					for re := range pp {
						cost += patternCost(re)
					}
				}
				if cost > maxPatternCost {
					return fmt.Errorf("at %s: the patterns are too large to compile (more than %d states): "+
						"repeat a large class such as \\pL with + or *, and bound the length with minLength and maxLength", p, maxPatternCost)
				}
				if err := walk(v[k], depth+1, p); err != nil {
					return err
				}
			}
		case []any:
			for i, el := range v {
				if err := walk(el, depth+1, fmt.Sprintf("%s/%d", ptr, i)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(doc, 0, "")
}

// patternCost estimates the size of the program RE2 compiles a pattern to:
// a class costs its number of ranges, and a repetition multiplies. A pattern
// that does not parse costs 1: RE2 refuses it with its own message.
func patternCost(pattern string) int {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 1
	}
	var cost func(re *syntax.Regexp) int
	cost = func(re *syntax.Regexp) int {
		c := 1
		switch re.Op {
		case syntax.OpLiteral:
			c = len(re.Rune)
		case syntax.OpCharClass:
			c = max(1, len(re.Rune)/2)
		case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
			c = 8 // every length of UTF-8 sequence
		case syntax.OpRepeat:
			n := max(re.Min, re.Max)
			if re.Max == -1 {
				n = re.Min + 1
			}
			return min(cost(re.Sub[0])*max(n, 1), maxPatternCost+1)
		}
		for _, sub := range re.Sub {
			c = min(c+cost(sub), maxPatternCost+1)
		}
		return c
	}
	return cost(re)
}

// Where a draft 2020-12 schema holds subschemas (as the compiler walks them,
// older keywords included): a map of them, a list of them, or one.
var (
	subschemaMaps  = []string{"$defs", "definitions", "properties", "patternProperties", "dependentSchemas", "dependencies"}
	subschemaLists = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	subschemaOnes  = []string{"not", "if", "then", "else", "items", "additionalItems", "additionalProperties",
		"propertyNames", "contains", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
)

// checkDraft refuses a $schema other than draft 2020-12 anywhere in the
// schema: the compiler would compile an embedded resource ($id with
// $schema) by the rules of the draft it names.
func checkDraft(v any, ptr string) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if d, ok := obj["$schema"]; ok {
		if s, _ := d.(string); strings.TrimSuffix(s, "#") != draft202012 {
			at := ""
			if ptr != "" {
				at = " at " + ptr
			}
			return fmt.Errorf("$schema %v%s: only draft 2020-12 (%s) is supported", d, at, draft202012)
		}
	}
	for _, k := range subschemaMaps {
		m, _ := obj[k].(map[string]any)
		for _, name := range sortedKeys(m) {
			if err := checkDraft(m[name], ptr+"/"+k+"/"+name); err != nil {
				return err
			}
		}
	}
	for _, k := range subschemaLists {
		l, _ := obj[k].([]any)
		for i, el := range l {
			if err := checkDraft(el, fmt.Sprintf("%s/%s/%d", ptr, k, i)); err != nil {
				return err
			}
		}
	}
	for _, k := range subschemaOnes {
		if err := checkDraft(obj[k], ptr+"/"+k); err != nil {
			return err
		}
	}
	return nil
}

// schemaCompileError shortens the compiler's message and keeps the refusal
// of remote references recognisable. The compiler's errors do not unwrap,
// so each kind is taken apart by its type.
func schemaCompileError(err error) error {
	var le *jsonschema.LoadURLError
	if errors.As(err, &le) && errors.Is(le.Err, errRemoteRef) {
		return fmt.Errorf("$ref %s: %w", le.URL, errRemoteRef)
	}
	var se *jsonschema.SchemaValidationError
	if errors.As(err, &se) {
		var ve *jsonschema.ValidationError
		if errors.As(se.Err, &ve) {
			return fmt.Errorf("not a valid JSON Schema: %s", flattenValidation(ve))
		}
	}
	msg := err.Error()
	msg = strings.ReplaceAll(msg, schemaURL, "")
	return errors.New(msg)
}

// Validate checks a decoded JSON value (from encoding/json or YAML) against
// the schema. The error lists each failing place as "at /path: reason".
func (s *Schema) Validate(v any) error {
	v, err := normalizeJSON(v)
	if err != nil {
		return err
	}
	return s.ValidateDecoded(v)
}

// ValidateDecoded checks a value already in the validator's form, as
// encoding/json decodes JSON with UseNumber (canonical.Value's form):
// Validate without its round trip through JSON, which gives such a value
// back unchanged.
func (s *Schema) ValidateDecoded(v any) error {
	if err := s.s.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return errors.New(flattenValidation(ve))
		}
		return err
	}
	return nil
}

// ValidateJSON checks raw JSON against the schema.
func (s *Schema) ValidateJSON(b []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return s.ValidateDecoded(v)
}

// normalizeJSON turns values decoded by YAML or by encoding/json into the
// form the validator expects (json.Number for numbers).
func normalizeJSON(v any) (any, error) {
	switch v.(type) {
	case nil, string, bool, json.Number:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("not a JSON value: %w", err)
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// flattenValidation lists the leaf causes of a validation error (not the
// "allOf failed" above them), each with the instance location, at most five
// of them.
func flattenValidation(ve *jsonschema.ValidationError) string {
	// The validator visits properties in map order: collect the causes,
	// then sort them, so the same input always gets the same message.
	var parts []string
	var walk func(u jsonschema.OutputUnit)
	walk = func(u jsonschema.OutputUnit) {
		if len(parts) == 100 {
			return
		}
		if len(u.Errors) == 0 {
			if u.Error != nil {
				loc := u.InstanceLocation
				if loc == "" {
					loc = "/"
				}
				parts = append(parts, fmt.Sprintf("at %s: %s", loc, u.Error))
			}
			return
		}
		for _, c := range u.Errors {
			walk(c)
		}
	}
	walk(*ve.DetailedOutput())
	if len(parts) == 0 {
		return ve.Error()
	}
	sort.Strings(parts)
	parts = slices.Compact(parts)
	if len(parts) > 5 {
		parts = parts[:5]
	}
	return strings.Join(parts, "; ")
}
