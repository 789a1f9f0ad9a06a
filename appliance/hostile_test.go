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

// Ensure that GET /v0/receipts without mandate= pages through all of a
// human key's receipts: 60 under one mandate give 50, then a next that
// yields the other 10 and no next; and that paging stays exact across
// several mandates.
func TestReceipts_HumanKeyPagesEveryMandate(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	want := map[string]bool{}
	call := func(c client, text string) {
		t.Helper()
		out := c.must(http.StatusOK, "POST", "/v0/calls", echoCall(text))
		want[str(out["receipt"].(map[string]any)["id"])] = true
	}
	first := ann.echoKey("many", "2.00")
	for i := range 60 {
		call(first, str(i))
	}
	// pages lists every receipt by following next, checking order and
	// that no receipt comes twice.
	pages := func(limit string) (sizes []int, seen map[string]bool) {
		t.Helper()
		seen = map[string]bool{}
		path := "/v0/receipts" + limit
		for range 20 {
			out := ann.human.must(http.StatusOK, "GET", path, nil)
			rs, _ := out["receipts"].([]any)
			sizes = append(sizes, len(rs))
			for _, r := range rs {
				id := str(r.(map[string]any)["id"])
				if seen[id] {
					t.Errorf("receipt %s listed twice", id)
				}
				seen[id] = true
			}
			next, _ := out["next"].(string)
			if next == "" {
				return sizes, seen
			}
			sep := "?"
			if limit != "" {
				sep = "&"
			}
			path = "/v0/receipts" + limit + sep + "before=" + next
		}
		t.Fatal("next never ended")
		return nil, nil
	}
	if sizes, seen := pages(""); len(sizes) != 2 || sizes[0] != 50 || sizes[1] != 10 || len(seen) != 60 {
		t.Errorf("one mandate: pages of %v, %d receipts, want [50 10] and 60", sizes, len(seen))
	}
	second := ann.echoKey("second", "1.00")
	for i := range 15 {
		call(second, "second "+str(i))
	}
	for i := range 5 {
		call(first, "again "+str(i))
	}
	sizes, seen := pages("?limit=30")
	if len(sizes) != 3 || sizes[0] != 30 || sizes[1] != 30 || sizes[2] != 20 || len(seen) != 80 {
		t.Errorf("two mandates: pages of %v, %d receipts, want [30 30 20] and 80", sizes, len(seen))
	}
	for id := range want {
		if !seen[id] {
			t.Errorf("receipt %s never listed", id)
		}
	}
}

// Ensure that every request body must be strict JSON (RFC 7493), answered
// 400 invalid_request with what is wrong and where, and nothing stored:
// signup (an email of invalid bytes, a duplicated handle, a field name in
// another case), mandates (a duplicated budget.total) and calls (a
// duplicated input key, 1e400, a lone surrogate), with or without an
// Idempotency-Key.
func TestHosted_BodiesAreStrictJSON(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	echo := ann.echoKey("echo", "1.00")
	refused := func(c client, path, body, msg string) {
		t.Helper()
		status, _, b := c.raw("POST", path, []byte(body))
		if status != http.StatusBadRequest || !bytes.Contains(b, []byte(`"code":"invalid_request"`)) || !bytes.Contains(b, []byte(msg)) {
			t.Errorf("POST %s %q: %d %s, want 400 invalid_request saying %s", path, body, status, b, msg)
		}
	}
	// Twice each: a first one stored would make the second email_taken.
	for range 2 {
		refused(ta.anonymous(), "/v0/signup", "{\"handle\":\"bob\",\"email\":\"\xff\xfe@example.com\"}", "invalid UTF-8 in string at byte 25")
		refused(ta.anonymous(), "/v0/signup", `{"handle":"bob","email":"\udc00@example.com"}`, `lone surrogate \\udc00`)
		refused(ta.anonymous(), "/v0/signup", `{"handle":"eve","handle":"bob","email":"bob@example.com"}`, `duplicate key \"handle\" at byte 16`)
		refused(ta.anonymous(), "/v0/signup", `{"Handle":"bob","email":"bob@example.com"}`, `unknown field \"Handle\" (field names are case-sensitive: \"handle\")`)
	}
	ta.signup("bob") // neither the handle nor the email was taken
	refused(ann.human, "/v0/mandates", `{"id":"big","grantee":"ann/assistant","budget":{"total":"0.10","per_call":"0.10","total":"4.00"}}`, `duplicate key \"total\"`)
	if status, out := ann.human.do("GET", "/v0/mandates/ann/big", nil); status != http.StatusNotFound {
		t.Errorf("the refused mandate exists: %d %v", status, out)
	}
	for _, c := range []client{echo, echo.with("Idempotency-Key", "strict-1")} {
		refused(c, "/v0/calls", `{"agent":"test-lab/echo","input":{"text":"a","text":"b"}}`, `duplicate key \"text\" at byte 45`)
		refused(c, "/v0/calls", `{"agent":"test-lab/echo","input":{"text":"a","n":1e400}}`, `number 1e400 is out of the range of a double`)
		refused(c, "/v0/calls", `{"agent":"test-lab/echo","input":{"text":"\ud800"}}`, `lone surrogate \\ud800`)
		refused(c, "/v0/calls", `{"Agent":"test-lab/echo","input":{"text":"a"}}`, `unknown field \"Agent\"`)
	}
	if n := ann.human.receiptCount("ann/echo"); n != 0 {
		t.Errorf("%d receipts after refused calls, want 0", n)
	}
	if bal := ann.balance(); bal != "5.00" {
		t.Errorf("balance %s after refused calls, want 5.00", bal)
	}
}
