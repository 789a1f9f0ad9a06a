package webui

import (
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/journal"
)

// Ensure that a budget bar is drawn in per mille that add up to 1000,
// from integer micro-units.
func TestBar_PerMille(t *testing.T) {
	a := journal.MustParseAmount
	for _, c := range []struct {
		spent, reserved, remaining string
		want                       bar
	}{
		{"0", "0", "50.00", bar{Remaining: 1000}},
		{"0.192", "0", "49.808", bar{Spent: 3, Remaining: 997, SpentX: 3, ReservedX: 3}},
		{"1.00", "3.10", "0.90", bar{Spent: 200, Reserved: 620, Remaining: 180, SpentX: 200, ReservedX: 820}},
		{"5.00", "0", "0", bar{Spent: 1000, SpentX: 1000, ReservedX: 1000}},
		{"0", "0", "0", bar{Remaining: 1000}},
	} {
		got := newBar(a(c.spent), a(c.reserved), a(c.remaining))
		if got != c.want {
			t.Errorf("bar(%s, %s, %s) = %+v, want %+v", c.spent, c.reserved, c.remaining, got, c.want)
		}
		if got.Spent+got.Reserved+got.Remaining != 1000 {
			t.Errorf("bar(%s, %s, %s) does not fill the bar: %+v", c.spent, c.reserved, c.remaining, got)
		}
	}
}

// Ensure that the server's field paths find the form field they belong to.
func TestFieldOf(t *testing.T) {
	for path, want := range map[string]string{
		"budget.total": "budget.total", "budget": "budget.total", "allow.agents[1]": "allow.agents",
		"delegation.max_depth": "delegation.max_depth", "data.regions[0]": "data.regions",
		"fx": "", "": "", "require.certified": "",
	} {
		if got := fieldOf(path); got != want {
			t.Errorf("fieldOf(%q) = %q, want %q", path, got, want)
		}
	}
}

// Ensure that a refused mandate's errors land beside their fields the one
// way both forms show them (the new-mandate page and the connect page):
// several on one field joined, the path left out beside its own field,
// kept beside the field of a part of it, and the rest under "".
func TestFieldErrors(t *testing.T) {
	ae := &APIError{Status: 422, Err: &holon.Error{Code: "invalid_mandate", Msg: "the mandate is invalid", Fields: []holon.FieldError{
		{Path: "budget.total", Msg: "must be positive"}, {Path: "budget", Msg: "per_call exceeds total"},
		{Path: "allow.agents[1]", Msg: "not a pattern"}, {Path: "allow.agents[2]", Msg: "empty"}, {Path: "fx", Msg: "unknown"},
	}}}
	got := fieldErrors(ae)
	want := map[string]string{"budget.total": "must be positive; per_call exceeds total",
		"allow.agents": "allow.agents[1]: not a pattern; allow.agents[2]: empty", "": "fx: unknown"}
	if len(got) != len(want) {
		t.Errorf("fieldErrors: %q, want %q", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("fieldErrors[%q] = %q, want %q", k, got[k], v)
		}
	}
	got = fieldErrors(&APIError{Status: 409, Err: &holon.Error{Code: "mandate_exists", Msg: "ann/x exists"}})
	if len(got) != 1 || got["id"] != "ann/x exists" {
		t.Errorf("mandate_exists: %q, want it beside id", got)
	}
}

// Ensure that a sign-in only ever returns to a path of this gateway.
func TestLocalPath(t *testing.T) {
	for next, want := range map[string]string{
		"/console/receipts": "/console/receipts", "/oauth/authorize?x=1": "/oauth/authorize?x=1",
		"//evil.example/": "", "https://evil.example/": "", "/\\evil.example": "", "": "",
		"javascript:alert(1)": "", "/console/\r\nSet-Cookie: x": "",
		// Browsers drop tabs and newlines inside a URL and control
		// characters at its ends: each of these is //evil.example to them.
		"/\t/evil.example/": "", "/\x01/evil.example": "", "/\x1f/evil.example": "", "/\x7f/evil.example": "",
		"/\x00/evil.example": "", "/console/\t": "", "/\n/evil.example": "",
		// Escaped, the same bytes stay in the path.
		"/%09/evil.example/": "/%09/evil.example/", "/console/files?q=a%2Fb": "/console/files?q=a%2Fb",
	} {
		if got := localPath(next); got != want {
			t.Errorf("localPath(%q) = %q, want %q", next, got, want)
		}
	}
}

// Ensure that signed amounts read and print exactly.
func TestMoney_Text(t *testing.T) {
	for in, want := range map[string]string{"-5.00": "-5.00", "4.808": "4.808", "0": "0.00", "-0.0035": "-0.0035"} {
		var m wire.Money
		if err := m.UnmarshalText([]byte(in)); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if m.String() != want {
			t.Errorf("%s reads as %s, want %s", in, m, want)
		}
	}
	var m wire.Money
	if err := m.UnmarshalText([]byte("--1")); err == nil {
		t.Error("--1 was accepted")
	}
}
