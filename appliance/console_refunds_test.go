package appliance_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Ensure that the console shows a receipt's refunds and lets an author
// refund a call to its own agent (from the receipt page, or by receipt id
// from the authors' page) and the operator any call, each form with its
// CSRF token; that a payer who is not the author gets no form and is
// refused as the API refuses it; and that a form without its token is
// refused and changes nothing.
func TestConsole_Refunds(t *testing.T) {
	ta := newHostedApp(t)
	ann, bob := ta.signup("ann"), ta.signup("bob")
	if err := ta.app.RegisterVersion(context.Background(), forkManifest(t, "ann", "0.05", "", "")); err != nil {
		t.Fatal(err)
	}
	for _, who := range []account{ann, bob} {
		who.createMandate("echo", map[string]any{"budget": map[string]any{"total": "1.00"}, "allow": map[string]any{"agents": []string{"ann/*"}}})
	}
	call := func(who account) string {
		out := who.human.must(http.StatusOK, "POST", "/v0/calls", map[string]any{"mandate": who.handle + "/echo", "agent": "ann/echo", "input": map[string]any{"text": "hi"}})
		return str(out["receipt"].(map[string]any)["id"])
	}
	bobs, anns := call(bob), call(ann)
	ab, bb := signIn(t, ta, ann.humanKey), signIn(t, ta, bob.humanKey)
	form := `<form method="post" action="/console/refunds"`
	// The author sees the form on a receipt it can read (its own call);
	// a payer who is not the author sees the refunds and no form.
	if _, body := ab.get("/console/receipts/" + anns); !strings.Contains(body, form) || !strings.Contains(body, `name="receipt" value="`+anns+`"`) {
		t.Errorf("ann's receipt page has no refund form:\n%s", body)
	}
	if _, body := bb.get("/console/receipts/" + bobs); strings.Contains(body, form) || !strings.Contains(body, "No refunds.") {
		t.Errorf("bob's receipt page offers a refund, or lists one:\n%s", body)
	}
	// By receipt id, from the authors' page.
	if _, body := ab.get("/console/authors"); !strings.Contains(body, form) || !strings.Contains(body, `id="refund-receipt"`) {
		t.Errorf("the authors' page has no refund form")
	}
	if resp, _ := ab.post("/console/refunds", url.Values{"receipt": {bobs}, "amount": {"0.02"}, "csrf": {"forged"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a refund form without its token: %d, want 403", resp.StatusCode)
	}
	if rs, _ := bob.human.must(http.StatusOK, "GET", "/v0/receipts/"+bobs, nil)["refunds"].([]any); len(rs) != 0 {
		t.Fatalf("the refused form refunded: %v", rs)
	}
	resp, body := ab.post("/console/refunds", url.Values{"receipt": {bobs}, "amount": {"0.02"}, "reason": {"the wrong company"}})
	if resp.StatusCode != http.StatusCreated || !strings.Contains(body, `data-refund="`+bobs+`/000001"`) || !strings.Contains(body, "0.02 given back of "+bobs+" in all") {
		t.Fatalf("ann's refund: %d\n%s", resp.StatusCode, body)
	}
	// The page leads back where ann can go: bob's receipt is bob's to read.
	if !strings.Contains(body, `<a href="/console/authors" data-back>`) || strings.Contains(body, `href="/console/receipts/`+bobs+`"`) {
		t.Errorf("ann's refund of bob's call leads back to a page ann cannot read:\n%s", body)
	}
	if resp, _ := ab.get("/console/authors"); resp.StatusCode != http.StatusOK {
		t.Errorf("the page ann's refund leads back to: %d", resp.StatusCode)
	}
	if resp, body := bb.post("/console/refunds", url.Values{"receipt": {bobs}}); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "not_found") {
		t.Errorf("bob refunding ann's agent's call: %d\n%s", resp.StatusCode, body)
	}
	if _, body := bb.get("/console/receipts/" + bobs); !strings.Contains(body, `data-refund="`+bobs+`/000001"`) || !strings.Contains(body, "the wrong company") {
		t.Errorf("bob's receipt page does not list the refund:\n%s", body)
	}
	// The operator refunds the rest, from the operator's page.
	op := signIn(t, ta, testAdminKey)
	if _, body := op.get("/console/operator"); !strings.Contains(body, form) {
		t.Errorf("the operator's page has no refund form")
	}
	resp, body = op.post("/console/refunds", url.Values{"receipt": {bobs}, "reason": {"goodwill"}})
	if resp.StatusCode != http.StatusCreated || !strings.Contains(body, "0.05 given back of "+bobs+" in all") {
		t.Fatalf("the operator's refund: %d\n%s", resp.StatusCode, body)
	}
	if !strings.Contains(body, `<a href="/console/operator" data-back>`) {
		t.Errorf("the operator's refund does not lead back to the operator's page:\n%s", body)
	}
	if resp, body := op.post("/console/refunds", url.Values{"receipt": {bobs}}); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "refund_exceeds_receipt") {
		t.Errorf("a refund of a receipt refunded in full: %d\n%s", resp.StatusCode, body)
	}
	if got := bob.balance(); got != "5.00" {
		t.Errorf("bob's balance after the full refund: %s", got)
	}
	// Refunded in full, ann's own call offers no form any more.
	if _, body := ab.post("/console/refunds", url.Values{"receipt": {anns}}); !strings.Contains(body, `<a href="/console/receipts/`+anns+`" data-back>`) {
		t.Errorf("ann's refund of her own call does not lead back to its receipt:\n%s", body)
	}
	if _, body := ab.get("/console/receipts/" + anns); strings.Contains(body, form) || !strings.Contains(body, `data-refund="`+anns+`/000001"`) {
		t.Errorf("ann's receipt refunded in full:\n%s", body)
	}
}
