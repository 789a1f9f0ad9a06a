package appliance_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lookupArgs are call_agent's arguments for holon-labs/company-lookup
// (0.08 EUR: held under ann/lab, which asks above 0.05).
func lookupArgs() map[string]any {
	return map[string]any{"agent": "holon-labs/company-lookup", "input": map[string]any{"name": "Globex GmbH"}}
}

// Ensure that for an ask_in_client key and a client that declared
// elicitation, a held call shows the human a form naming the agent
// version, the worst case and the mandate, and that approving it runs
// that one call exactly as POST /v0/approvals/{id} would: it succeeds,
// is billed once, and the approval is used.
func TestMCP_ApprovalInClient_Approve(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	labMandate(ann)
	key, _ := ann.newKey("ann/lab", true)
	forms := &mcpElicits{answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}}
	s := connectMCP(t, ta.srv.URL+"/mcp", key, forms.handle)

	out := s.ok("call_agent", lookupArgs())
	shown := forms.shown()
	if len(shown) != 1 {
		t.Fatalf("%d approval forms shown, want 1", len(shown))
	}
	for _, want := range []string{"holon-labs/company-lookup@1.0.0", "0.08 EUR", "ann/lab", "above 0.05 EUR"} {
		if !strings.Contains(shown[0], want) {
			t.Errorf("the form does not name %q:\n%s", want, shown[0])
		}
	}
	if out["status"] != "succeeded" {
		t.Fatalf("approved call: %v", out)
	}
	unwrapJSON(t, str(out["output"]), "holon-labs/company-lookup@1.0.0")
	ap := obj(out["approval"])
	r := obj(out["receipt"])
	if ap["status"] != "used" || str(ap["run"]) != str(r["id"]) || str(r["approval"]) != str(ap["id"]) || r["billed"] != true {
		t.Errorf("approval %v, receipt %v: want the approval used by this billed run", ap, r)
	}
	if b := ann.balance(); b != "4.92" {
		t.Errorf("balance %s, want 4.92 (one lookup)", b)
	}
	got := ann.human.must(http.StatusOK, "GET", "/v0/approvals/"+str(ap["id"]), nil)
	if got["status"] != "used" || got["input"] != nil {
		t.Errorf("the approval through the API: %v", got)
	}
	if n := len(s.ok("list_approvals", map[string]any{})["approvals"].([]any)); n != 0 {
		t.Errorf("%d open approvals left, want 0", n)
	}
}

// Ensure that rejecting the form (or declining it) rejects the approval:
// the call does not run, nothing is billed, and the client gets the tool
// error approval_rejected; and that cancelling the form leaves the
// approval pending.
func TestMCP_ApprovalInClient_Reject(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	labMandate(ann)
	key, _ := ann.newKey("ann/lab", true)
	for _, answer := range []*mcp.ElicitResult{
		{Action: "accept", Content: map[string]any{"decision": "reject"}},
		{Action: "decline"},
	} {
		forms := &mcpElicits{answer: answer}
		s := connectMCP(t, ta.srv.URL+"/mcp", key, forms.handle)
		msg, out := s.fails("approval_rejected", "call_agent", lookupArgs())
		ap := obj(out["approval"])
		if len(forms.shown()) != 1 || ap["status"] != "rejected" || !strings.Contains(msg, str(ap["id"])) {
			t.Errorf("%s: forms %d, message %q, approval %v", answer.Action, len(forms.shown()), msg, ap)
		}
		if r := obj(out["receipt"]); r["status"] != "pending_approval" || r["billed"] != false {
			t.Errorf("%s: receipt %v", answer.Action, r)
		}
		got := s.ok("get_approval", map[string]any{"id": ap["id"]})
		if obj(got["approval"])["status"] != "rejected" || !strings.Contains(str(got["message"]), "rejected") {
			t.Errorf("%s: get_approval %v", answer.Action, got)
		}
	}
	if b := ann.balance(); b != "5.00" {
		t.Errorf("balance %s after rejected calls, want 5.00", b)
	}
	forms := &mcpElicits{answer: &mcp.ElicitResult{Action: "cancel"}}
	s := connectMCP(t, ta.srv.URL+"/mcp", key, forms.handle)
	out := s.ok("call_agent", lookupArgs())
	if out["status"] != "pending_approval" || obj(out["approval"])["status"] != "pending" {
		t.Errorf("cancelled form: %v, want the approval still pending", out)
	}
	// The human decides it with the API afterwards; deciding it twice
	// is refused.
	id := str(obj(out["approval"])["id"])
	ann.human.must(http.StatusOK, "POST", "/v0/approvals/"+id, map[string]any{"decision": "reject"})
	ann.human.must(http.StatusConflict, "POST", "/v0/approvals/"+id, map[string]any{"decision": "reject"})
}

// Ensure that without an approval form — a key that is not ask_in_client,
// or a client that did not declare elicitation — a held call answers
// pending_approval with the approval's id and asks nobody; that
// list_approvals and get_approval show it; and that once the human grants
// it (run: false), the same call with approval: <id> runs, once.
func TestMCP_ApprovalPending(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	labMandate(ann)
	unattended, _ := ann.newKey("ann/lab", false)
	attended, _ := ann.newKey("ann/lab", true)
	forms := &mcpElicits{answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}}
	for _, tc := range []struct {
		name string
		s    *mcpSession
		why  string
	}{
		{"key not ask_in_client", connectMCP(t, ta.srv.URL+"/mcp", unattended, forms.handle), "ask_in_client"},
		{"client without elicitation", connectMCP(t, ta.srv.URL+"/mcp", attended, nil), "elicitation"},
	} {
		out := tc.s.ok("call_agent", lookupArgs())
		ap := obj(out["approval"])
		if out["status"] != "pending_approval" || ap["status"] != "pending" || !strings.HasPrefix(str(ap["id"]), "a") ||
			ap["agent"] != "holon-labs/company-lookup@1.0.0" || ap["worst_case"] != "0.08" || ap["mandate"] != "ann/lab" {
			t.Errorf("%s: %v, want pending_approval with the approval", tc.name, out)
		}
		if msg := str(out["message"]); !strings.Contains(msg, tc.why) || !strings.Contains(msg, str(ap["id"])) {
			t.Errorf("%s: message %q", tc.name, msg)
		}
		if r := obj(out["receipt"]); r["status"] != "pending_approval" || r["billed"] != false {
			t.Errorf("%s: receipt %v", tc.name, r)
		}
	}
	if n := len(forms.shown()); n != 0 {
		t.Errorf("%d forms shown, want none", n)
	}
	s := connectMCP(t, ta.srv.URL+"/mcp", unattended, nil)
	open := s.ok("list_approvals", map[string]any{})["approvals"].([]any)
	if len(open) != 2 {
		t.Fatalf("list_approvals: %v, want the 2 held calls", open)
	}
	id := str(obj(open[0])["id"])
	got := s.ok("get_approval", map[string]any{"id": id})
	if obj(got["approval"])["status"] != "pending" {
		t.Errorf("get_approval: %v", got)
	}
	// Using it before it is granted is refused.
	withApproval := lookupArgs()
	withApproval["approval"] = id
	s.fails("invalid_approval", "call_agent", withApproval)
	ann.human.must(http.StatusOK, "POST", "/v0/approvals/"+id, map[string]any{"run": false})
	got = s.ok("get_approval", map[string]any{"id": id})
	if obj(got["approval"])["status"] != "granted" || !strings.Contains(str(got["message"]), `approval: "`+id+`"`) {
		t.Errorf("granted: %v", got)
	}
	out := s.ok("call_agent", withApproval)
	if out["status"] != "succeeded" || str(obj(out["receipt"])["approval"]) != id {
		t.Errorf("call with the granted approval: %v", out)
	}
	s.fails("invalid_approval", "call_agent", withApproval)
	if b := ann.balance(); b != "4.92" {
		t.Errorf("balance %s, want 4.92 (one lookup)", b)
	}
	// An approval of another account is unknown here.
	bob := ta.signup("bob")
	bob.createMandate("strict", map[string]any{"budget": map[string]any{"total": "1.00"}, "approval": map[string]any{"above": "0"},
		"allow": map[string]any{"agents": []string{"holon-labs/*"}}})
	held := bob.human.must(http.StatusAccepted, "POST", "/v0/calls", lookup("bob/strict"))
	other := str(held["approval"].(map[string]any)["id"])
	s.fails("not_found", "get_approval", map[string]any{"id": other})
	withApproval["approval"] = other
	s.fails("not_found", "call_agent", withApproval)
}

// Ensure that the dev gateway serves /mcp under the mandate its URL
// names, refuses it without one, and asks in the client: the blog's
// delegated run, approved in the form, bills 0.192.
func TestMCP_DevMode(t *testing.T) {
	ta := newTestApp(t, "", nil)
	if _, err := dialMCP(ta.srv.URL+"/mcp", "", nil); err == nil || !strings.Contains(err.Error(), "Bad Request") {
		t.Errorf("/mcp without ?mandate=: %v, want 400", err)
	}
	status, out := ta.do("POST", "/mcp", map[string]any{})
	if status != http.StatusBadRequest || !strings.Contains(str(out["error"]), "mandate=") {
		t.Errorf("POST /mcp: %d %v, want 400 naming ?mandate=", status, out)
	}
	if _, err := dialMCP(ta.srv.URL+"/mcp?mandate=alice/nope", "", nil); err == nil || !strings.Contains(err.Error(), "Not Found") {
		t.Errorf("/mcp under an unknown mandate: %v, want 404", err)
	}
	forms := &mcpElicits{answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}}
	s := connectMCP(t, ta.srv.URL+"/mcp?mandate=alice/bookkeeping-q4", "", forms.handle)
	out = s.ok("call_agent", map[string]any{"agent": "holon-labs/invoice-pipeline", "input": map[string]any{"text": blogInvoice}})
	if len(forms.shown()) != 1 || !strings.Contains(forms.shown()[0], "3.10 EUR") {
		t.Errorf("forms %q", forms.shown())
	}
	r := obj(out["receipt"])
	if out["status"] != "succeeded" || str(obj(r["cost"])["total"]) != "0.192" || r["mandate"] != "alice/bookkeeping-q4" {
		t.Errorf("the blog run through /mcp: %v", out)
	}
	tree := s.ok("get_receipt", map[string]any{"id": r["id"]})
	if len(tree["children"].([]any)) != 2 {
		t.Errorf("the run's tree has %d children, want 2", len(tree["children"].([]any)))
	}
	b := s.ok("get_budget", map[string]any{})
	if b["spent"] != "0.192" {
		t.Errorf("budget %v", b)
	}
}

// Ensure that when the human decides the approval elsewhere while the form
// is open (POST /v0/approvals/{id}), the form's answer decides nothing
// more: the client gets invalid_approval with the approval as it stands,
// and the call runs once at most.
func TestMCP_ApprovalInClient_DecidedElsewhere(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	labMandate(ann)
	key, _ := ann.newKey("ann/lab", true)
	idRE := regexp.MustCompile(`\(approval (a[0-9]+)\)`)
	s := connectMCP(t, ta.srv.URL+"/mcp", key, func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		m := idRE.FindStringSubmatch(req.Params.Message)
		if m == nil {
			return nil, fmt.Errorf("no approval id in %q", req.Params.Message)
		}
		st, out := ann.human.do("POST", "/v0/approvals/"+m[1], map[string]any{"decision": "reject"})
		if st != http.StatusOK {
			return nil, fmt.Errorf("reject through the API: %d %v", st, out)
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
	})
	_, out := s.fails("invalid_approval", "call_agent", lookupArgs())
	if ap := obj(out["approval"]); ap["status"] != "rejected" {
		t.Errorf("approval %v, want rejected as the human decided", ap)
	}
	if b := ann.balance(); b != "5.00" {
		t.Errorf("balance %s, want 5.00: nothing ran", b)
	}
}
