package appliance_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Ensure that the operator's console credits an account, yanks an agent
// version and disables an account, each logged with its reason, and that
// a human's console grants an approval so that the agent re-submits.
func TestConsole_OperatorAndGrant(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	op := signIn(t, ta, testAdminKey)
	resp, body := op.get("/console/operator")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-account="ann"`) || !strings.Contains(body, "Holds open") {
		t.Fatalf("operator page: %d", resp.StatusCode)
	}
	if resp, _ := op.post("/console/operator/credit", url.Values{"account": {"ann"}, "amount": {"1.50"}, "reason": {"pilot"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("credit: %d", resp.StatusCode)
	}
	if me := ann.human.must(http.StatusOK, "GET", "/v0/me", nil); me["balance"].(map[string]any)["balance"] != "6.50" {
		t.Errorf("ann after the credit: %v", me["balance"])
	}
	if resp, body := op.post("/console/operator/credit", url.Values{"account": {"ann"}, "amount": {"-1"}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a negative credit: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := op.post("/console/operator/yank", url.Values{"ref": {"test-lab/echo@1.0.0"}, "reason": {"leaks inputs"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("yank: %d", resp.StatusCode)
	}
	if status, out := ta.anonymous().do("GET", "/v0/agents/test-lab/echo@1.0.0", nil); status != http.StatusNotFound || errorCode(out) != "not_found" {
		t.Errorf("the yanked version: %d %v, want 404", status, out)
	}
	_, body = op.get("/console/operator")
	for _, want := range []string{"credit", "pilot", "test-lab/echo@1.0.0", "leaks inputs"} {
		if !strings.Contains(body, want) {
			t.Errorf("the moderation log lacks %q", want)
		}
	}
	// An operator action without a reason is refused with the API's message.
	if resp, _ := op.post("/console/operator/disable", url.Values{"handle": {"ann"}, "reason": {""}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("disable without a reason: %d, want 400", resp.StatusCode)
	}
	// The operator never decides approvals; the human grants one.
	ann.createMandate("lab", map[string]any{
		"budget":   map[string]any{"total": "1.00"},
		"approval": map[string]any{"above": "0.01"},
		"allow":    map[string]any{"agents": []string{"test-lab/*"}},
	})
	agent, _ := ann.newAgentKey("ann/lab")
	out := agent.must(http.StatusAccepted, "POST", "/v0/calls", map[string]any{"agent": "test-lab/echo@1.1.0", "input": map[string]any{"text": "hi"}})
	id := out["approval"].(map[string]any)["id"].(string)
	if resp, _ := op.post("/console/approvals/"+id, url.Values{"decision": {"run"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the operator approving: %d, want 403", resp.StatusCode)
	}
	hb := signIn(t, ta, ann.humanKey)
	resp, body = hb.post("/console/approvals/"+id, url.Values{"decision": {"grant"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `re-submit the call with <code>"approval": "`+id+`"</code>`) {
		t.Fatalf("grant: %d\n%s", resp.StatusCode, body)
	}
	out = agent.must(http.StatusOK, "POST", "/v0/calls", map[string]any{"agent": "test-lab/echo@1.1.0", "input": map[string]any{"text": "hi"}, "approval": id})
	if r := out["receipt"].(map[string]any); r["status"] != "succeeded" || r["billed"] != true {
		t.Errorf("the re-submitted call: %v", r)
	}
}
