package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
	switch obj := v.(type) {
	case bool:
	case map[string]any:
		if d, ok := obj["$schema"]; ok {
			if s, _ := d.(string); strings.TrimSuffix(s, "#") != draft202012 {
				return nil, fmt.Errorf("$schema %v: only draft 2020-12 (%s) is supported", d, draft202012)
			}
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

// schemaCompileError shortens the compiler's message and keeps the refusal
// of remote references recognisable.
func schemaCompileError(err error) error {
	if errors.Is(err, errRemoteRef) {
		var le *jsonschema.LoadURLError
		if errors.As(err, &le) {
			return fmt.Errorf("$ref %s: %w", le.URL, errRemoteRef)
		}
		return errRemoteRef
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
	return s.Validate(v)
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

// flattenValidation lists the leaf causes of a validation error, each with
// the instance location, at most five of them.
func flattenValidation(ve *jsonschema.ValidationError) string {
	out := ve.BasicOutput()
	var parts []string
	for _, u := range out.Errors {
		if u.Error == nil {
			continue
		}
		msg := u.Error.String()
		if strings.HasPrefix(msg, "validation failed") {
			continue
		}
		loc := u.InstanceLocation
		if loc == "" {
			loc = "/"
		}
		parts = append(parts, fmt.Sprintf("at %s: %s", loc, msg))
		if len(parts) == 5 {
			break
		}
	}
	if len(parts) == 0 {
		return ve.Error()
	}
	return strings.Join(parts, "; ")
}
