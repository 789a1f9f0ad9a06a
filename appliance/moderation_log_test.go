package appliance_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Ensure that the moderation log reads newest first at any length: with
// more than a page of 1,000 actions, GET /v0/admin/log?order=newest starts
// at the newest and pages back to the oldest without a gap or a repeat,
// the oldest-first order is unchanged, and the operator's console page
// shows the newest action (it fetched the oldest 1,000 and reversed them).
func TestAdminLog_NewestFirst(t *testing.T) {
	ta := newHostedApp(t)
	ta.signup("ann")
	const n = 1_005
	for i := range n {
		ta.admin().must(http.StatusOK, "POST", "/v0/admin/credit", map[string]any{"account": "ann", "amount": "0.01", "reason": fmt.Sprintf("credit %04d", i)})
	}
	reason := func(e any) string { return e.(map[string]any)["reason"].(string) }
	out := ta.admin().must(http.StatusOK, "GET", "/v0/admin/log?order=newest&limit=1000", nil)
	entries := out["entries"].([]any)
	if len(entries) != 1000 || reason(entries[0]) != fmt.Sprintf("credit %04d", n-1) || reason(entries[999]) != fmt.Sprintf("credit %04d", n-1000) {
		t.Fatalf("newest page: %d entries, %q … %q", len(entries), reason(entries[0]), reason(entries[len(entries)-1]))
	}
	seen := len(entries)
	for next := out["next"].(string); next != ""; next = out["next"].(string) {
		out = ta.admin().must(http.StatusOK, "GET", "/v0/admin/log?order=newest&limit=2&before="+next, nil)
		for _, e := range out["entries"].([]any) {
			if want := fmt.Sprintf("credit %04d", n-1-seen); reason(e) != want {
				t.Fatalf("entry %d newest first: %q, want %q", seen, reason(e), want)
			}
			seen++
		}
	}
	if seen != n {
		t.Errorf("paged through %d entries, want %d", seen, n)
	}
	oldest := ta.admin().must(http.StatusOK, "GET", "/v0/admin/log?limit=3", nil)
	if e := oldest["entries"].([]any); len(e) != 3 || reason(e[0]) != "credit 0000" || oldest["next"] != "3" {
		t.Errorf("oldest first: %v", oldest)
	}
	if status, out := ta.admin().do("GET", "/v0/admin/log?order=sideways", nil); status != http.StatusBadRequest {
		t.Errorf("order=sideways: %d %v", status, out)
	}
	op := signIn(t, ta, testAdminKey)
	_, body := op.get("/console/operator")
	if newest := fmt.Sprintf("credit %04d", n-1); !strings.Contains(body, newest) {
		t.Errorf("the operator page does not show the newest action %q", newest)
	}
	if oldest := "credit 0000"; strings.Contains(body, oldest) {
		t.Errorf("the operator page shows the oldest action %q among 1,000 newest", oldest)
	}
}
