package appliance_test

import (
	"bytes"
	"net/http"
	"testing"
)

// The principals of the scope matrix, in the order of each row's
// expectations. Account A is "ann", account B "bob".
const (
	pNone = iota
	pHumanA
	pAgentA
	pAdmin
	pHumanB
	pAgentB
	nPrincipals
)

var principalNames = [nPrincipals]string{"none", "human-a", "agent-a", "admin", "human-b", "agent-b"}

// runOrder puts ann's human key last, so that a row that changes state
// (deciding an approval, revoking a key) is refused to everyone else
// before its owner does it.
var runOrder = []int{pNone, pAgentA, pAdmin, pHumanB, pAgentB, pHumanA}

// Ensure that every endpoint answers every kind of principal exactly as
// gateway.md §7's principals table and "Extra endpoints" table say: none
// reads the catalogue and signs up; a human key acts on its own account;
// an agent key acts under its one mandate and never decides; the admin key
// tops up credit, sees balances and moderates, and never calls or decides;
// and another account's resource is 404, never 403, whatever the key.
func TestScope_Matrix(t *testing.T) {
	ta := newHostedApp(t)
	ann, bob := ta.signup("ann"), ta.signup("bob")
	ta.signup("cat")
	// ann/held asks for approval of every paid call; ann's agent key is
	// bound to it, and a second key is there to be revoked.
	ann.createMandate("held", map[string]any{"budget": map[string]any{"total": "2.00"}, "approval": map[string]any{"above": "0"},
		"allow": map[string]any{"agents": []string{"holon-labs/*"}}})
	agentA, _ := ann.newAgentKey("ann/held")
	_, doomed := ann.newAgentKey("ann/held")
	sandboxReceipt := str(ann.human.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox"))["receipt"].(map[string]any)["id"])
	held := ann.human.must(http.StatusAccepted, "POST", "/v0/calls", lookup("ann/held"))
	heldReceipt := str(held["receipt"].(map[string]any)["id"])
	approval := str(held["approval"].(map[string]any)["id"])
	toDecide := str(ann.human.must(http.StatusAccepted, "POST", "/v0/calls", lookup("ann/held"))["approval"].(map[string]any)["id"])
	bob.agent.must(http.StatusOK, "POST", "/v0/calls", lookup(""))

	clients := [nPrincipals]client{ta.anonymous(), ann.human, agentA, ta.admin(), bob.human, bob.agent}
	handles := [nPrincipals]string{"none", "ann", "ann", "admin", "bob", "bob"}
	type row struct {
		method, path string
		body         func(p int) any
		want         [nPrincipals]int
	}
	fixed := func(b any) func(int) any { return func(int) any { return b } }
	reason := map[string]any{"reason": "scope matrix"}
	rows := []row{
		{"GET", "/healthz", nil, [6]int{200, 200, 200, 200, 200, 200}},
		{"GET", "/v0/agents", nil, [6]int{200, 200, 200, 200, 200, 200}},
		{"GET", "/v0/agents?mandate=ann/held", nil, [6]int{401, 200, 200, 404, 404, 404}},
		{"GET", "/v0/agents/holon-labs/company-lookup", nil, [6]int{200, 200, 200, 200, 200, 200}},
		{"POST", "/v0/calls", fixed(lookup("ann/held")), [6]int{401, 202, 202, 403, 404, 404}},
		{"POST", "/v0/calls", fixed(lookup("ann/sandbox")), [6]int{401, 200, 404, 403, 404, 404}},
		{"GET", "/v0/approvals", nil, [6]int{401, 200, 200, 403, 200, 200}},
		{"GET", "/v0/approvals?mandate=ann/held", nil, [6]int{401, 200, 200, 403, 404, 404}},
		{"GET", "/v0/approvals/" + approval, nil, [6]int{401, 200, 200, 403, 404, 404}},
		{"POST", "/v0/approvals/" + toDecide, fixed(map[string]any{"decision": "reject"}), [6]int{401, 200, 403, 403, 404, 403}},
		{"GET", "/v0/receipts", nil, [6]int{401, 200, 200, 403, 200, 200}},
		{"GET", "/v0/receipts?mandate=ann/held", nil, [6]int{401, 200, 200, 403, 404, 404}},
		{"GET", "/v0/receipts/" + heldReceipt, nil, [6]int{401, 200, 200, 403, 404, 404}},
		{"GET", "/v0/receipts/" + sandboxReceipt, nil, [6]int{401, 200, 404, 403, 404, 404}},
		{"GET", "/v0/mandates/ann/held", nil, [6]int{401, 200, 200, 403, 404, 404}},
		{"GET", "/v0/mandates/ann/sandbox", nil, [6]int{401, 200, 404, 403, 404, 404}},
		{"GET", "/v0/mandates", nil, [6]int{401, 200, 403, 403, 200, 403}},
		{"POST", "/v0/mandates", func(p int) any {
			return map[string]any{"id": "m-" + principalNames[p], "grantee": handles[p] + "/bot", "budget": map[string]any{"total": "1.00"}}
		}, [6]int{401, 201, 403, 403, 201, 403}},
		{"GET", "/v0/accounts", nil, [6]int{401, 200, 403, 200, 200, 403}},
		{"GET", "/v0/me", nil, [6]int{401, 200, 200, 403, 200, 200}},
		{"POST", "/v0/keys", fixed(map[string]any{"mandate": "ann/held"}), [6]int{401, 201, 403, 403, 404, 403}},
		{"DELETE", "/v0/keys/" + doomed, nil, [6]int{401, 200, 403, 403, 404, 403}},
		{"POST", "/v0/signup", func(p int) any {
			return map[string]any{"handle": "s-" + principalNames[p], "email": principalNames[p] + "@example.net"}
		}, [6]int{201, 201, 201, 201, 201, 201}},
		{"POST", "/v0/admin/credit", fixed(map[string]any{"account": "ann", "amount": "1.00", "reason": "scope matrix"}), [6]int{401, 403, 403, 200, 403, 403}},
		{"POST", "/v0/admin/accounts/cat/disable", fixed(reason), [6]int{401, 403, 403, 200, 403, 403}},
		{"POST", "/v0/admin/agents/test-lab/echo@1.1.0/yank", fixed(reason), [6]int{401, 403, 403, 200, 403, 403}},
		{"GET", "/v0/admin/accounts", nil, [6]int{401, 403, 403, 200, 403, 403}},
		{"GET", "/v0/admin/log", nil, [6]int{401, 403, 403, 200, 403, 403}},
		{"GET", "/v0/admin/backup", nil, [6]int{401, 403, 403, 200, 403, 403}},
	}
	wantCode := map[int]string{401: "unauthenticated", 403: "forbidden", 404: "not_found"}
	for _, rw := range rows {
		for _, p := range runOrder {
			var body []byte
			if rw.body != nil {
				body = mustJSON(t, rw.body(p))
			}
			status, _, b := clients[p].raw(rw.method, rw.path, body)
			if status != rw.want[p] {
				t.Errorf("%s %s as %s: %d, want %d: %s", rw.method, rw.path, principalNames[p], status, rw.want[p], b)
				continue
			}
			if code := wantCode[status]; code != "" && !bytes.Contains(b, []byte(`"code":"`+code+`"`)) {
				t.Errorf("%s %s as %s: %d without code %s: %s", rw.method, rw.path, principalNames[p], status, code, b)
			}
			// What bob's keys are shown never includes ann's resources.
			if (p == pHumanB || p == pAgentB) && status < 300 && (bytes.Contains(b, []byte("ann/")) || bytes.Contains(b, []byte(`"ann"`))) {
				t.Errorf("%s %s as %s shows ann's resources: %s", rw.method, rw.path, principalNames[p], b)
			}
			// And ann's agent key sees nothing of ann/sandbox.
			if p == pAgentA && status < 300 && bytes.Contains(b, []byte("ann/sandbox")) && rw.path != "/v0/agents" {
				t.Errorf("%s %s as agent-a shows ann/sandbox: %s", rw.method, rw.path, b)
			}
		}
	}

	// Naming another account's approval in a call is a 404, like naming
	// one that does not exist, and says nothing of its mandate.
	for _, id := range []string{approval, "a999"} {
		body := lookup("bob/sandbox")
		body["approval"] = id
		status, _, b := bob.human.raw("POST", "/v0/calls", mustJSON(t, body))
		if status != http.StatusNotFound || bytes.Contains(b, []byte("ann")) {
			t.Errorf("bob's call with approval %s: %d %s, want 404 saying nothing of ann", id, status, b)
		}
	}

	// A human sees its own balance only; the operator sees every balance.
	accts := ann.human.must(http.StatusOK, "GET", "/v0/accounts", nil)["accounts"].([]any)
	if len(accts) != 1 || accts[0].(map[string]any)["account"] != "ann" {
		t.Errorf("ann's GET /v0/accounts: %v, want ann only", accts)
	}
	all := ta.admin().must(http.StatusOK, "GET", "/v0/accounts", nil)["accounts"].([]any)
	seen := map[any]bool{}
	for _, a := range all {
		seen[a.(map[string]any)["account"]] = true
	}
	if !seen["ann"] || !seen["bob"] || !seen["holon"] {
		t.Errorf("admin's GET /v0/accounts misses accounts: %v", all)
	}
}
