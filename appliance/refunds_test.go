package appliance_test

import (
	"net/http"
	"testing"
)

// Ensure that POST /v0/receipts/{id}/refunds gives money back as the
// operator asks, in part then the rest, that GET /v0/receipts/{id} lists
// the refunds, and that refusals have their codes and statuses: a human
// who is not the agent's author (404, as anyone else's receipt), more
// than is left (409 refund_exceeds_receipt), a call not billed (409
// receipt_not_billed), an amount of zero (400).
func TestRefunds_API(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	before := ann.balance()
	out := ann.human.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox"))
	id := str(out["receipt"].(map[string]any)["id"])
	if st, e := ann.human.do("POST", "/v0/receipts/"+id+"/refunds", map[string]any{"amount": "0.01"}); st != http.StatusNotFound {
		t.Errorf("ann refunding holon-labs' receipt: %d %v, want 404", st, e)
	}
	op := ta.admin()
	got := op.must(http.StatusCreated, "POST", "/v0/receipts/"+id+"/refunds", map[string]any{"amount": "0.03", "reason": "the wrong company"})
	if rf := got["refund"].(map[string]any); rf["amount"] != "0.03" || rf["by"] != "operator" || rf["entry"] != "refund:"+id+":1" || got["refunded"] != "0.03" {
		t.Errorf("the refund: %v", got)
	}
	if st, e := op.do("POST", "/v0/receipts/"+id+"/refunds", map[string]any{"amount": "0.06"}); st != http.StatusConflict || code(e) != "refund_exceeds_receipt" {
		t.Errorf("0.06 of the 0.05 left: %d %v", st, e)
	}
	if st, e := op.do("POST", "/v0/receipts/"+id+"/refunds", map[string]any{"amount": "0.00"}); st != http.StatusBadRequest {
		t.Errorf("a refund of 0: %d %v", st, e)
	}
	rest := op.must(http.StatusCreated, "POST", "/v0/receipts/"+id+"/refunds", nil)
	if rest["refund"].(map[string]any)["amount"] != "0.05" || rest["refunded"] != "0.08" {
		t.Errorf("the rest: %v", rest)
	}
	if got := ann.balance(); got != before {
		t.Errorf("ann's balance %s after the full refund, %s before the call", got, before)
	}
	tree := ann.human.must(http.StatusOK, "GET", "/v0/receipts/"+id, nil)
	if rs, _ := tree["refunds"].([]any); len(rs) != 2 {
		t.Errorf("GET /v0/receipts/%s lists refunds %v", id, tree["refunds"])
	}
	if st := ann.human.must(http.StatusOK, "GET", "/v0/mandates/ann/sandbox", nil); st["spent"] != "0.00" {
		t.Errorf("the mandate after the refunds: %v", st)
	}
	// A call denied below its fixed price: a receipt, never billed.
	ann.human.do("POST", "/v0/calls", map[string]any{"mandate": "ann/sandbox", "agent": "holon-labs/company-lookup",
		"input": map[string]any{"name": "x"}, "max_cost": "0.01"})
	failed := ann.human.must(http.StatusOK, "GET", "/v0/receipts?mandate=ann/sandbox", nil)
	for _, r := range failed["receipts"].([]any) {
		rc := r.(map[string]any)
		if rc["billed"] == false {
			if st, e := op.do("POST", "/v0/receipts/"+str(rc["id"])+"/refunds", nil); st != http.StatusConflict || code(e) != "receipt_not_billed" {
				t.Errorf("refund of unbilled %s: %d %v", rc["id"], st, e)
			}
			return
		}
	}
	t.Error("no unbilled receipt to try")
}

func code(answer map[string]any) string {
	e, _ := answer["error"].(map[string]any)
	return str(e["code"])
}
