package appliance_test

import (
	"bytes"
	"net/http"
	"testing"
)

// This file holds the regression tests of the defects found by trying the
// gateway as a hostile client would (issue DRILLS).

// echoCall is a call to test-lab/echo (0.02 EUR, per run).
func echoCall(text string) map[string]any {
	return map[string]any{"agent": "test-lab/echo", "input": map[string]any{"text": text}}
}

// echoKey creates a mandate of the account's that allows test-lab/echo
// only, and returns an agent key bound to it.
func (a account) echoKey(name, total string) client {
	a.human.ta.t.Helper()
	a.createMandate(name, map[string]any{
		"budget": map[string]any{"total": total, "per_call": "0.10"},
		"allow":  map[string]any{"agents": []string{"test-lab/echo"}},
	})
	c, _ := a.newAgentKey(a.handle + "/" + name)
	return c
}

// Ensure that a body with anything after its closing bracket is refused
// with invalid_request, and that the call it holds is not run.
func TestHosted_TrailingDataRefused(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	echo := ann.echoKey("echo", "1.00")
	for _, body := range []string{
		`{"agent":"test-lab/echo","input":{"text":"a"}}} and then anything`,
		`{"agent":"test-lab/echo","input":{"text":"a"}}]`,
		`{"agent":"test-lab/echo","input":{"text":"a"}} {"agent":"test-lab/echo"}`,
	} {
		status, _, b := echo.raw("POST", "/v0/calls", []byte(body))
		if status != http.StatusBadRequest || !bytes.Contains(b, []byte(`"code":"invalid_request"`)) || !bytes.Contains(b, []byte("trailing")) {
			t.Errorf("%s: %d %s, want 400 invalid_request naming the trailing data", body, status, b)
		}
	}
	if n := ann.human.receiptCount("ann/echo"); n != 0 {
		t.Errorf("%d receipts after refused bodies, want 0", n)
	}
	if bal := ann.balance(); bal != "5.00" {
		t.Errorf("balance %s after refused bodies, want 5.00", bal)
	}
}
