package gateway_test

import (
	"errors"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/canonical"
)

// Ensure that CheckJSON and DecodeJSON turn the strict reader's plain
// errors into invalid_request errors whose message starts with what was
// read, and that the error still carries the byte offset.
func TestCheckJSON_CodedWithOffset(t *testing.T) {
	check := func(name string, err error, msg string, offset int) {
		t.Helper()
		var ge *holon.Error
		if !errors.As(err, &ge) || ge.Code != holon.CodeInvalidRequest || ge.Msg != msg {
			t.Errorf("%s: %v, want invalid_request %q", name, err, msg)
		}
		var ce *canonical.Error
		if offset >= 0 && (!errors.As(err, &ce) || ce.Offset != offset) {
			t.Errorf("%s: %v does not carry offset %d", name, err, offset)
		}
	}
	check("CheckJSON", gateway.CheckJSON([]byte(`{"a":1,"a":2}`), "input"), `input: duplicate key "a" at byte 7`, 7)

	var v struct {
		Name string `json:"name"`
	}
	check("DecodeJSON, field name", gateway.DecodeJSON([]byte(`{"Name":"x"}`), &v, "body"),
		`body: unknown field "Name" (field names are case-sensitive: "name") at byte 1`, 1)
	err := gateway.DecodeJSON([]byte(`{"name":1}`), &v, "body")
	var ge *holon.Error
	if !errors.As(err, &ge) || ge.Code != holon.CodeInvalidRequest || !strings.HasPrefix(ge.Msg, "body: json: cannot unmarshal number") {
		t.Errorf("DecodeJSON, value: %v, want invalid_request from encoding/json", err)
	}
	if err := gateway.CheckJSON([]byte(`{"a":[1,{"b":null}]}`), "input"); err != nil {
		t.Errorf("CheckJSON refused strict JSON: %v", err)
	}
	if err := gateway.DecodeJSON([]byte(`{"name":"x"}`), &v, "body"); err != nil || v.Name != "x" {
		t.Errorf("DecodeJSON: %v, %+v", err, v)
	}
}
