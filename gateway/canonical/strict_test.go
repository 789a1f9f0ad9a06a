package canonical_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"holon.dev/holon/gateway/canonical"
)

// Ensure that Check names the byte offset of the problem, as a plain
// *Error, and accepts strict JSON.
func TestCheck_Offsets(t *testing.T) {
	for _, tt := range []struct {
		in     string
		offset int
		msg    string
	}{
		{`{"a":1,"b":2,"a":3}`, 13, `duplicate key "a"`},
		{`[1,]`, 3, "unexpected ']', want a JSON value"},
		{`{"a":1} x`, 8, "unexpected 'x' after the JSON value: trailing data is not accepted"},
		{`{"a":1e400}`, 5, "number 1e400 is out of the range of a double"},
		{"[\"ok\", \"\xff\"]", 8, "invalid UTF-8 in string"},
		{``, 0, "unexpected end of input, want a JSON value"},
	} {
		err := canonical.Check([]byte(tt.in))
		var ce *canonical.Error
		if !errors.As(err, &ce) {
			t.Errorf("Check(%q) = %v, want a *canonical.Error", tt.in, err)
			continue
		}
		if ce.Offset != tt.offset || ce.Msg != tt.msg {
			t.Errorf("Check(%q) = offset %d %q, want offset %d %q", tt.in, ce.Offset, ce.Msg, tt.offset, tt.msg)
		}
	}
	if err := canonical.Check([]byte(` {"a":[1,2,{"b":null}],"c":"\u00e9"} `)); err != nil {
		t.Errorf("Check refused strict JSON: %v", err)
	}
}

type inner struct {
	Depth int `json:"depth"`
}

type outer struct {
	inner
	Name  string           `json:"name"`
	Tags  map[string]inner `json:"tags"`
	List  []inner          `json:"list"`
	Skip  string           `json:"-"`
	Plain int
}

// Ensure that Decode matches field names exactly, refuses unknown fields
// with their offset, looks into embedded structs, maps and slices, and
// leaves value errors to encoding/json.
func TestDecode_FieldNames(t *testing.T) {
	var v outer
	if err := canonical.Decode([]byte(`{"name":"x","depth":2,"tags":{"a":{"depth":3}},"list":[{"depth":4}],"Plain":5}`), &v); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if v.Name != "x" || v.Depth != 2 || v.Tags["a"].Depth != 3 || v.List[0].Depth != 4 || v.Plain != 5 {
		t.Errorf("decoded %+v", v)
	}
	for _, tt := range []struct {
		in     string
		offset int
		msg    string
	}{
		{`{"Name":"x"}`, 1, `unknown field "Name" (field names are case-sensitive: "name")`},
		{`{"name":"x","extra":1}`, 12, `unknown field "extra"`},
		{`{"tags":{"a":{"Depth":1}}}`, 14, `unknown field "Depth" (field names are case-sensitive: "depth")`},
		{`{"list":[{},{"deep":1}]}`, 13, `unknown field "deep"`},
		{`{"Skip":"x"}`, 1, `unknown field "Skip"`},
		{`{"name":"x","name":"y"}`, 12, `duplicate key "name"`},
	} {
		err := canonical.Decode([]byte(tt.in), &outer{})
		var ce *canonical.Error
		if !errors.As(err, &ce) {
			t.Errorf("Decode(%s) = %v, want a *canonical.Error", tt.in, err)
			continue
		}
		if ce.Offset != tt.offset || ce.Msg != tt.msg {
			t.Errorf("Decode(%s) = offset %d %q, want offset %d %q", tt.in, ce.Offset, ce.Msg, tt.offset, tt.msg)
		}
	}
	err := canonical.Decode([]byte(`{"name":1}`), &outer{})
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		t.Errorf("Decode of a number into a string = %T %v, want encoding/json's *UnmarshalTypeError", err, err)
	}
}

// Ensure that Value gives, for strict JSON, exactly the value encoding/json
// decodes with UseNumber (numbers as written, escapes and surrogate pairs
// decoded, empty containers non-nil), and refuses what Check refuses with
// the same error.
func TestValue_AsEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.50`, `1E5`, `-2.5e-3`, `12345678901234567890`,
		`""`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u20ac\ud83d\ude00 é 😀"`, `"\u0000x"`,
		` {"n":1,"s":"x","a":[1,"2",[],{}],"o":{"b":null,"t":true,"f":false},"e":{},"l":[]} `,
		`[[[[{"deep":[1.0]}]]]]`,
	} {
		got, err := canonical.Value([]byte(in))
		if err != nil {
			t.Errorf("Value(%s): %v", in, err)
			continue
		}
		dec := json.NewDecoder(strings.NewReader(in))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("encoding/json on %s: %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Value(%s) = %#v, want %#v", in, got, want)
		}
	}
	for _, in := range []string{`{"a":1,"a":2}`, `[1,]`, `{"a":1e400}`, "\"\xff\"", `"\ud800"`, `1 2`} {
		v, err := canonical.Value([]byte(in))
		if cerr := canonical.Check([]byte(in)); err == nil || v != nil || err.Error() != cerr.Error() {
			t.Errorf("Value(%s) = %v, %v; want nil and Check's error %v", in, v, err, cerr)
		}
	}
}
