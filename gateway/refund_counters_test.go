package gateway_test

import (
	"context"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

// Ensure that a version's counters follow its refunds: its record bills
// what its runs billed less their refunds (its runs stay counted: they
// ran), its author's earnings go down by the author's parts, and a call
// refunded in full is no longer a paid call while one refunded in part
// still is.
func TestEngine_Refund_PaidCallsAndRecord(t *testing.T) {
	te := newEngine(t, refundAgents, testHandlers(), refundMandate)
	const ref = "bob/fork2@1.0.0"
	first := te.callOK(t, "alice/refunds", "bob/fork2", nil)
	second := te.callOK(t, "alice/refunds", "bob/fork2", nil)
	own := first.Cost.Own + second.Cost.Own
	earned := te.earned(t, ref)
	if earned.PaidCalls != 2 {
		t.Fatalf("before any refund: %+v", earned)
	}
	ctx := context.Background()
	part := eur("0.02")
	rf, err := te.eng.Refund(ctx, gateway.RefundInput{Receipt: first.ID, Amount: &part, Author: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string, paidCalls int64, refunded, bobGave journal.Amount) {
		t.Helper()
		rec, err := te.eng.Record(ref)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Runs != 2 || rec.Succeeded != 2 || rec.Billed != own-refunded {
			t.Errorf("%s: record %+v, want 2 runs, 2 succeeded, %s billed", when, rec, own-refunded)
		}
		e := te.earned(t, ref)
		if e.PaidCalls != paidCalls || e.Own != earned.Own-bobGave {
			t.Errorf("%s: earnings %+v, want %d paid calls and %s own (%s less %s)", when, e, paidCalls, earned.Own-bobGave, earned.Own, bobGave)
		}
	}
	bobPart := func(rs ...string) journal.Amount {
		var n journal.Amount
		for _, id := range rs {
			all, err := te.eng.Refunds(id)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range all {
				for _, p := range r.Parts {
					if p.To == "bob" {
						n += p.Amount
					}
				}
			}
		}
		return n
	}
	if rf.Parts == nil {
		t.Fatal("a refund without parts")
	}
	check("refunded 0.02 of the first call", 2, part, bobPart(first.ID))
	if _, err := te.eng.Refund(ctx, gateway.RefundInput{Receipt: first.ID, Author: "bob"}); err != nil {
		t.Fatal(err)
	}
	check("the first call refunded in full", 1, first.Cost.Own, bobPart(first.ID))
	if _, err := te.eng.Refund(ctx, gateway.RefundInput{Receipt: second.ID}); err != nil {
		t.Fatal(err)
	}
	check("both refunded in full", 0, own, bobPart(first.ID, second.ID))
}

// acmeOwn is acme's mandate over its own agents.
const acmeOwn = `
id: acme/own
issuer: acme
grantee: acme/assistant
currency: EUR
budget: {total: "1.00"}
allow: {agents: ["acme/*"]}
`

// Ensure that a refund of an author's call to its own agent that would
// come all from the author's own share, and so move no money, is refused
// invalid_request with nothing written, and that a larger one goes
// through.
func TestEngine_Refund_OwnShareMovesNothing(t *testing.T) {
	te := openEngine(t, engineConfig{manifests: refundAgents, handlers: testHandlers(), credit: "0.01", mandates: []string{acmeOwn}})
	ctx := context.Background()
	if err := te.eng.Credit(ctx, "test:acme", "acme", eur("1.00")); err != nil {
		t.Fatal(err)
	}
	r := te.callOK(t, "acme/own", "acme/fork", nil)
	one := eur("0.000001")
	if _, err := te.eng.Refund(ctx, gateway.RefundInput{Receipt: r.ID, Amount: &one, Author: "acme"}); holon.ErrorCode(err) != holon.CodeInvalidRequest ||
		!strings.Contains(err.Error(), "move no money") {
		t.Errorf("a refund of acme's own share: %v, want invalid_request", err)
	}
	if rs, _ := te.eng.Refunds(r.ID); len(rs) != 0 {
		t.Errorf("the refused refund left %d records", len(rs))
	}
	if _, err := te.eng.Refund(ctx, gateway.RefundInput{Receipt: r.ID, Author: "acme"}); err != nil {
		t.Errorf("the rest: %v", err)
	}
}
