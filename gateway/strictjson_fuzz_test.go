package gateway_test

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// FuzzCheckJSON feeds the strict JSON checker every body and answer the
// gateway decodes: it never panics, and what it accepts is valid UTF-8 that
// encoding/json reads as one value (what is validated is what is
// forwarded); what it refuses is an invalid_request.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"a":1e400}`, `"\ud800"`, "\"\xff\"", `{"a":[1,2,{"b":null}]}`, `{} x`, `[[[[[]]]]]`, `-0.0e-5`, `"\u0000"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := gateway.CheckJSON(b, "body")
		if err != nil {
			if holon.ErrorCode(err) != holon.CodeInvalidRequest {
				t.Fatalf("%q refused with %v, want invalid_request", b, err)
			}
			return
		}
		var v any
		if !utf8.Valid(b) || json.Unmarshal(b, &v) != nil {
			t.Fatalf("%q accepted, but it is not valid JSON in UTF-8", b)
		}
	})
}
