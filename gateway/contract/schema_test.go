package contract_test

import (
	"encoding/json"
	"strings"
	"testing"

	"holon.dev/holon/gateway/canonical"
	"holon.dev/holon/gateway/contract"
)

// compileJSON compiles a schema written as JSON.
func compileJSON(tb testing.TB, s string) (*contract.Schema, error) {
	tb.Helper()
	var doc any
	if err := json.Unmarshal([]byte(s), &doc); err != nil {
		tb.Fatalf("schema %s: %v", s, err)
	}
	return contract.CompileSchema(doc)
}

// Ensure that CompileSchema accepts self-contained draft 2020-12 schemas and
// refuses remote references, other drafts and invalid schemas, saying why.
func TestCompileSchema(t *testing.T) {
	for _, tt := range []struct {
		name, schema, wantErr string
	}{
		{"empty", `{}`, ""},
		{"true", `true`, ""},
		{"false", `false`, ""},
		{"draft 2020-12", `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "string"}`, ""},
		{"draft 2020-12 with #", `{"$schema": "https://json-schema.org/draft/2020-12/schema#"}`, ""},
		{"local $ref", `{"$ref": "#/$defs/x", "$defs": {"x": {"type": "string"}}}`, ""},
		{"local $ref by anchor", `{"$ref": "#name", "$defs": {"x": {"$anchor": "name", "type": "string"}}}`, ""},
		{"embedded resource", `{"$ref": "https://example.com/x.json", "$defs": {"x": {"$id": "https://example.com/x.json", "type": "string"}}}`, ""},
		{"recursive $ref", `{"type": "object", "properties": {"child": {"$ref": "#"}}}`, ""},
		{"RE2 pattern", `{"type": "string", "pattern": "^\\p{L}+[0-9]{2,4}$"}`, ""},
		{"RE2 patternProperties", `{"patternProperties": {"^x-[a-z]+$": {"type": "string"}}}`, ""},

		{"not an object", `"string"`, "a JSON Schema is an object (or true/false)"},
		{"a list", `[{"type": "string"}]`, "a JSON Schema is an object"},
		{"remote $ref", `{"$ref": "https://example.com/s.json"}`, "$ref https://example.com/s.json: remote $ref refused"},
		{"http $ref", `{"$ref": "http://127.0.0.1:8080/s.json"}`, "$ref http://127.0.0.1:8080/s.json: remote $ref refused"},
		{"file $ref", `{"$ref": "file:///etc/passwd"}`, "$ref file:///etc/passwd: remote $ref refused"},
		{"absolute path $ref", `{"$ref": "/etc/passwd"}`, "remote $ref refused"},
		{"relative $ref", `{"$ref": "other.json"}`, "remote $ref refused"},
		{"relative $ref from a remote $id", `{"$id": "https://example.com/root.json", "$ref": "other.json"}`,
			"$ref https://example.com/other.json: remote $ref refused"},
		{"nested remote $ref", `{"properties": {"a": {"items": {"$ref": "https://example.com/s.json"}}}}`, "remote $ref refused"},
		{"remote $dynamicRef", `{"$dynamicRef": "https://example.com/s.json#meta"}`, "remote $ref refused"},
		{"missing $def", `{"$ref": "#/$defs/x"}`, `"#/$defs/x" not found`},
		{"draft-07", `{"$schema": "http://json-schema.org/draft-07/schema#"}`, "only draft 2020-12"},
		{"draft 2019-09", `{"$schema": "https://json-schema.org/draft/2019-09/schema"}`, "only draft 2020-12"},
		{"$schema not a string", `{"$schema": 7}`, "only draft 2020-12"},
		{"custom metaschema", `{"$schema": "https://example.com/meta.json"}`, "only draft 2020-12"},
		{"embedded draft-07", `{"$defs": {"x": {"$id": "https://example.com/x.json", "$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}]}}}`,
			"$schema http://json-schema.org/draft-07/schema# at /$defs/x: only draft 2020-12"},
		{"deeply embedded draft-04", `{"properties": {"a": {"anyOf": [{"$id": "https://example.com/a.json", "$schema": "http://json-schema.org/draft-04/schema#"}]}}}`,
			"at /properties/a/anyOf/0: only draft 2020-12"},
		{"unknown type", `{"type": "strin"}`, "at /type: value must be one of"},
		{"negative minLength", `{"minLength": -1}`, "at /minLength: minimum: got -1, want 0"},
		{"required not a list", `{"required": "file"}`, "at /required"},
		{"invalid pattern", `{"pattern": "("}`, "at /pattern: '(' is not valid regex"},
		{"64 levels", strings.Repeat(`{"not": `, 63) + `{}` + strings.Repeat(`}`, 63), ""},
		{"65 levels", strings.Repeat(`{"not": `, 65) + `{}` + strings.Repeat(`}`, 65), "nested deeper than 64 levels"},
		{"10,000 values", `{"enum": [` + strings.Repeat(`1,`, 9997) + `1]}`, ""},
		{"10,001 values", `{"enum": [` + strings.Repeat(`1,`, 9998) + `1]}`, "more than 10000 values"},
		{"large class repeated", `{"pattern": "^\\pL{100}$"}`, "at /pattern: the patterns are too large to compile"},
		{"large class with +", `{"pattern": "^[\\pL\\pN _-]+$", "maxLength": 64}`, ""},
		{"large class repeated in patternProperties", `{"patternProperties": {"\\pL{30}\\pN{30}": {}}}`, "the patterns are too large to compile"},
		{"many patterns", `{"allOf": [` + strings.TrimSuffix(strings.Repeat(`{"pattern": "\\pL{8}"},`, 5), ",") + `]}`,
			"at /allOf/3/pattern: the patterns are too large to compile"},
		{"small class repeated", `{"pattern": "^[a-z0-9]{1,1000}$"}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := compileJSON(t, tt.schema)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("CompileSchema: %v", err)
			case tt.wantErr == "" && s == nil:
				t.Fatal("CompileSchema returned no schema")
			case tt.wantErr != "" && err == nil:
				t.Fatalf("CompileSchema accepted %s", tt.schema)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("CompileSchema error = %q, want it to contain %q", err, tt.wantErr)
			case tt.wantErr != "" && strings.Contains(err.Error(), "holon:///schema.json"):
				t.Errorf("error %q names the internal schema URL", err)
			}
		})
	}
}

// Ensure that the regular expression engine is RE2: a backreference or a
// lookaround, which RE2 does not have, is refused when the schema compiles,
// never met at validation time.
func TestCompileSchema_PatternIsRE2(t *testing.T) {
	for _, tt := range []struct {
		name, schema, wantErr string
	}{
		{"backreference", `{"type": "string", "pattern": "(a)\\1"}`, "at /pattern: '(a)\\\\1' is not valid regex: error parsing regexp: invalid escape sequence"},
		{"lookahead", `{"type": "string", "pattern": "^(?=a)"}`, "at /pattern: '^(?=a)' is not valid regex"},
		{"negative lookahead", `{"type": "string", "pattern": "^(?!a)"}`, "is not valid regex"},
		{"lookbehind", `{"type": "string", "pattern": "(?<=a)b"}`, "is not valid regex"},
		{"possessive", `{"type": "string", "pattern": "a++"}`, "is not valid regex"},
		{"atomic group", `{"type": "string", "pattern": "(?>a)"}`, "is not valid regex"},
		{"nested in properties", `{"properties": {"a": {"pattern": "(a)\\1"}}}`, "at /properties/a/pattern"},
		{"patternProperties lookahead", `{"patternProperties": {"(?!x-)": {}}}`, "'(?!x-)' is not valid regex"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := compileJSON(t, tt.schema)
			if err == nil {
				t.Fatalf("CompileSchema accepted %s", tt.schema)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CompileSchema error = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}

	// Nested quantifiers, exponential for a backtracking engine, are linear on RE2.
	s, err := compileJSON(t, `{"type": "string", "pattern": "^(a+)+$"}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(strings.Repeat("a", 64)); err != nil {
		t.Errorf("Validate(a×64): %v", err)
	}
	if err := s.Validate(strings.Repeat("a", 64) + "!"); err == nil || !strings.Contains(err.Error(), "at /: ") {
		t.Errorf("Validate(a×64 + !) = %v, want a mismatch at /", err)
	}
}

// Ensure that Validate accepts matching values, from encoding/json or from
// YAML, and names each failing place as "at /path".
func TestSchema_Validate(t *testing.T) {
	s, err := compileJSON(t, `{
		"type": "object",
		"required": ["file", "pages"],
		"additionalProperties": false,
		"properties": {
			"file": {"type": "string", "pattern": "^holon://files/"},
			"pages": {"type": "integer", "minimum": 1},
			"lang": {"enum": ["en", "fr"]},
			"tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}}
		},
		"$defs": {"tag": {"type": "string", "maxLength": 3}}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		value   any
		wantErr []string // every part the error must contain; none for a valid value
	}{
		{"valid", map[string]any{"file": "holon://files/a", "pages": 3}, nil},
		{"valid from encoding/json", decodeJSON(t, `{"file": "holon://files/a", "pages": 3, "tags": ["a", "bc"]}`), nil},
		{"valid int from YAML", map[string]any{"file": "holon://files/a", "pages": int(3), "lang": "fr"}, nil},
		{"valid uint64", map[string]any{"file": "holon://files/a", "pages": uint64(1 << 63)}, nil},
		{"valid float that is whole", map[string]any{"file": "holon://files/a", "pages": 2.0}, nil},
		{"missing property", map[string]any{"file": "holon://files/a"}, []string{"at /: missing property 'pages'"}},
		{"wrong type", map[string]any{"file": 7, "pages": 1}, []string{"at /file: got number, want string"}},
		{"pattern", map[string]any{"file": "https://x", "pages": 1}, []string{"at /file: ", "does not match pattern"}},
		{"minimum", map[string]any{"file": "holon://files/a", "pages": 0}, []string{"at /pages: minimum: got 0, want 1"}},
		{"fractional integer", map[string]any{"file": "holon://files/a", "pages": 1.5}, []string{"at /pages: got number, want integer"}},
		{"enum", map[string]any{"file": "holon://files/a", "pages": 1, "lang": "de"}, []string{"at /lang: "}},
		{"through $ref", map[string]any{"file": "holon://files/a", "pages": 1, "tags": []any{"ok", "toolong"}},
			[]string{"at /tags/1: maxLength: got 7, want 3"}},
		{"additional property", map[string]any{"file": "holon://files/a", "pages": 1, "x": true}, []string{"at /: additional properties 'x' not allowed"}},
		{"several places", map[string]any{"file": 1, "pages": "1"}, []string{"at /file: ", "; at /pages: "}},
		{"not an object", "holon://files/a", []string{"at /: got string, want object"}},
		{"null", nil, []string{"at /: got null, want object"}},
		{"not JSON", map[string]any{"file": "holon://files/a", "pages": 1, "c": make(chan int)}, []string{"not a JSON value"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Validate(tt.value)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %v", tt.value)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate error = %q, want it to contain %q", err, w)
				}
			}
		})
	}

	if err := s.ValidateJSON([]byte(`{"file": "holon://files/a", "pages": 1e0}`)); err != nil {
		t.Errorf("ValidateJSON: %v", err)
	}
	if err := s.ValidateJSON([]byte(`{"file": "holon://files/a", "pages": 0}`)); err == nil || !strings.Contains(err.Error(), "at /pages: ") {
		t.Errorf("ValidateJSON = %v, want a failure at /pages", err)
	}
	if err := s.ValidateJSON([]byte(`{"file": `)); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("ValidateJSON of broken JSON = %v, want not JSON", err)
	}
}

// Ensure that at most five failing places are listed.
func TestSchema_Validate_FiveCauses(t *testing.T) {
	s, err := compileJSON(t, `{"type": "array", "items": {"type": "string"}}`)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Validate([]any{1, 2, 3, 4, 5, 6, 7, 8})
	if err == nil {
		t.Fatal("Validate accepted numbers")
	}
	if n := strings.Count(err.Error(), "at /"); n != 5 {
		t.Errorf("error lists %d places, want 5: %s", n, err)
	}
}

// BenchmarkSchema_AdversarialPattern validates the classic catastrophic
// backtracking input for ^(a+)+$: 100,000 "a"s and a "!". A backtracking
// engine never finishes; RE2 takes linear time.
func BenchmarkSchema_AdversarialPattern(b *testing.B) {
	s, err := compileJSON(b, `{"type": "string", "pattern": "^(a+)+$"}`)
	if err != nil {
		b.Fatal(err)
	}
	input := strings.Repeat("a", 100_000) + "!"
	b.SetBytes(int64(len(input)))
	b.ResetTimer()
	for b.Loop() {
		if err := s.Validate(input); err == nil {
			b.Fatal("the pattern matched a string that ends in !")
		}
	}
}

func decodeJSON(tb testing.TB, s string) any {
	tb.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		tb.Fatal(err)
	}
	return v
}

// Ensure that ValidateDecoded, given the value canonical.Value reads from a
// document, answers exactly as ValidateJSON does on the document: the same
// verdict and the same message, numbers compared as written.
func TestSchema_ValidateDecodedAsValidateJSON(t *testing.T) {
	s, err := compileJSON(t, `{"type": "object", "required": ["n", "s"], "additionalProperties": false,
		"properties": {"n": {"type": "integer", "maximum": 10, "multipleOf": 0.5}, "s": {"type": "string", "maxLength": 3, "pattern": "^[a-z]*$"},
			"a": {"type": "array", "items": {"type": ["number", "null"]}, "uniqueItems": true}, "o": {"type": "object", "minProperties": 1}}}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{
		`{"n": 1, "s": "ab"}`, `{"n": 1.0, "s": ""}`, `{"n": 10.000000000000000001, "s": "a"}`, `{"n": 1e1, "s": "é"}`,
		`{"n": 11, "s": "abcd"}`, `{"n": 2.25, "s": "A"}`, `{"s": "a"}`, `{"n": "1", "s": 1}`, `{"n": 1, "s": "a", "x": null}`,
		`{"n": 1, "s": "a", "a": [1, 1.0, null]}`, `{"n": 1, "s": "a", "a": [1, "x", {}]}`, `{"n": 1, "s": "a", "o": {}}`,
		`[]`, `null`, `"x"`, `12345678901234567890`,
	} {
		v, err := canonical.Value([]byte(doc))
		if err != nil {
			t.Fatalf("Value(%s): %v", doc, err)
		}
		got, want := s.ValidateDecoded(v), s.ValidateJSON([]byte(doc))
		if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
			t.Errorf("%s: ValidateDecoded %v, ValidateJSON %v", doc, got, want)
		}
	}
}
