package gateway_test

import (
	"context"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

// refundAgents are a royalty chain, lena/base ← acme/fork ← bob/fork2,
// each paid per run, and a passthrough orchestrator that calls the last.
var refundAgents = []string{
	agentDoc("lena/base", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.035", currency: EUR}
royalties: {forks: "0.15"}
runtime: {kind: dev, tool: echo}
`),
	agentDoc("acme/fork", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.035", currency: EUR}
lineage: {fork_of: lena/base@1.0.0}
royalties: {forks: "0.10"}
runtime: {kind: dev, tool: echo}
`),
	agentDoc("bob/fork2", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.077", currency: USD}
lineage: {fork_of: acme/fork@1.0.0}
runtime: {kind: dev, tool: echo}
`),
	agentDoc("acme/orch-fork", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev, tool: script}
downstream: {mode: passthrough, cap: "1.00"}
calls:
  - {agent: bob/fork2, max_cost: "0.20"}
`),
}

// refundMandate is alice's, renewing 5.00 a day, with a rate for USD.
var refundMandate = mandateWith("refunds", `budget: {total: "10.00", window: day, per_window: "5.00"}`, `allow: {agents: ["*"]}`)

// acmeSpend is acme's own mandate, to spend what it earned.
const acmeSpend = `
id: acme/spend
issuer: acme
grantee: acme/assistant
currency: EUR
budget: {total: "1.00"}
allow: {agents: ["lena/*"]}
`

// balances reads every account's balance.
func (te *testEngine) balances(tb testing.TB) map[string]journal.Amount {
	tb.Helper()
	accts, err := te.eng.Accounts()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]journal.Amount{}
	for name, a := range accts {
		out[name] = a.Balance
	}
	return out
}

// earned is a version's earnings in EUR, own and royalties.
func (te *testEngine) earned(tb testing.TB, ref string) holon.Earned {
	tb.Helper()
	var e holon.Earnings
	if err := te.store.View(func(tx holon.Tx) error {
		var err error
		e, err = tx.Earnings(ref)
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	return e["EUR"]
}

func (te *testEngine) callOK(tb testing.TB, mandate, agent string, input []byte) *holon.Receipt {
	tb.Helper()
	res, err := te.eng.Call(context.Background(), gateway.CallInput{Mandate: mandate, Agent: agent, Input: input})
	if err != nil || res.Receipt.Status != holon.StatusSucceeded {
		tb.Fatalf("call %s: %v %+v %s", agent, err, res.Receipt, res.Message)
	}
	return res.Receipt
}

// Ensure that refunds of a call to the end of a royalty chain, in parts
// then the rest, return every account, the mandate's spent (lifetime and
// window) and every version's earnings to where they were before the
// call, never touching the settle entry; and that a refund past the
// charge is refused.
func TestEngine_Refund_PartsThenRest(t *testing.T) {
	te := newEngine(t, refundAgents, testHandlers(), refundMandate)
	before := te.balances(t)
	r := te.callOK(t, "alice/refunds", "bob/fork2", nil)
	settle := entryLines(t, te, "settle:"+r.ID)
	mid := te.balances(t)
	ctx := context.Background()
	for _, part := range []string{"0.01", "0.000001", "0.03"} {
		a := eur(part)
		rf, err := te.eng.Refund(ctx, gateway.RefundInput{Receipt: r.ID, Amount: &a, Reason: "wrong total", Author: "bob"})
		if err != nil {
			t.Fatalf("refund %s: %v", part, err)
		}
		var parts journal.Amount
		for _, p := range rf.Parts {
			parts += p.Amount
		}
		if rf.Amount != a || parts != a || rf.By != "bob" {
			t.Fatalf("refund %s: %+v", part, rf)
		}
	}
	if st := te.mandate(t, "alice/refunds"); st.Spent != r.Cost.Own-eur("0.040001") || st.Window.Spent != st.Spent {
		t.Fatalf("after partial refunds: spent %s, window %+v", st.Spent, st.Window)
	}
	rest, err := te.eng.Refund(ctx, gateway.RefundInput{Receipt: r.ID, Author: "bob"})
	if err != nil || rest.Amount != r.Cost.Own-eur("0.040001") {
		t.Fatalf("the rest: %+v, %v", rest, err)
	}
	after := te.balances(t)
	for name, b := range before {
		if after[name] != b {
			t.Errorf("%s: %s before the call, %s after its full refund (%s after the call)", name, b, after[name], mid[name])
		}
	}
	for name, b := range after {
		if _, ok := before[name]; !ok && b != 0 {
			t.Errorf("%s: %s after the full refund, no account before", name, b)
		}
	}
	if st := te.mandate(t, "alice/refunds"); st.Spent != 0 || st.Window.Spent != 0 || st.Remaining != eur("5.00") {
		t.Errorf("after the full refund: spent %s, window %+v", st.Spent, st.Window)
	}
	for _, ref := range []string{"bob/fork2@1.0.0", "acme/fork@1.0.0", "lena/base@1.0.0"} {
		if e := te.earned(t, ref); e.Own != 0 || e.Royalties != 0 {
			t.Errorf("%s earns %+v after the full refund", ref, e)
		}
	}
	if got := entryLines(t, te, "settle:"+r.ID); !sameLines(got, settle) {
		t.Errorf("the settle entry changed: %v, was %v", got, settle)
	}
	one := eur("0.000001")
	if _, err := te.eng.Refund(ctx, gateway.RefundInput{Receipt: r.ID, Amount: &one}); holon.ErrorCode(err) != holon.CodeRefundTooLarge {
		t.Errorf("a refund past the charge: %v, want %s", err, holon.CodeRefundTooLarge)
	}
	if rs, err := te.eng.Refunds(r.ID); err != nil || len(rs) != 4 || rs[3].Amount != rest.Amount {
		t.Errorf("Refunds(%s) = %d refunds, %v", r.ID, len(rs), err)
	}
}

// Ensure that a refund of a delegated call paid through passthrough
// takes it off the parent's mandate too, whose spent counted it, and
// that the money checks hold (cleanup) with the parent's receipt as it
// was.
func TestEngine_Refund_DelegatedChild(t *testing.T) {
	te := newEngine(t, refundAgents, testHandlers(), refundMandate)
	root := te.callOK(t, "alice/refunds", "acme/orch-fork", script(scriptCall{Agent: "bob/fork2"}))
	if len(root.Children) != 1 {
		t.Fatalf("children %v", root.Children)
	}
	child := te.receipt(t, root.Children[0])
	spent := te.mandate(t, "alice/refunds").Spent
	if _, err := te.eng.Refund(context.Background(), gateway.RefundInput{Receipt: child.ID}); err != nil {
		t.Fatal(err)
	}
	if st := te.mandate(t, "alice/refunds"); st.Spent != spent-child.Cost.Own || st.Window.Spent != st.Spent {
		t.Errorf("the root mandate after its child's refund: spent %s (was %s), window %+v", st.Spent, spent, st.Window)
	}
	if st := te.mandate(t, *root.SubMandate); st.Spent != 0 {
		t.Errorf("the sub-mandate after the refund: spent %s", st.Spent)
	}
	if got := te.receipt(t, root.ID); got.Cost != root.Cost {
		t.Errorf("the parent's receipt changed: %+v, was %+v", got.Cost, root.Cost)
	}
}

// Ensure that refunds are refused with their codes: a receipt that was
// not billed, another author's receipt (not found, as anyone else's), an
// amount of zero, and an author whose available balance cannot give back
// its part.
func TestEngine_Refund_Refusals(t *testing.T) {
	te := openEngine(t, engineConfig{manifests: append(refundAgents, allAgents...), handlers: testHandlers(), credit: "0.01",
		mandates: []string{refundMandate, acmeSpend}})
	ctx := context.Background()
	if err := te.eng.Credit(ctx, "test:alice", "alice", eur("10.00")); err != nil {
		t.Fatal(err)
	}
	failed, err := te.eng.Call(ctx, gateway.CallInput{Mandate: "alice/refunds", Agent: "acme/crash"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := te.eng.Refund(ctx, gateway.RefundInput{Receipt: failed.Receipt.ID}); holon.ErrorCode(err) != holon.CodeReceiptNotBilled {
		t.Errorf("refund of a failed call: %v", err)
	}
	r := te.callOK(t, "alice/refunds", "acme/fork", nil)
	for _, author := range []string{"bob", "lena", "acme-x"} {
		if _, err := te.eng.Refund(ctx, gateway.RefundInput{Receipt: r.ID, Author: author}); holon.ErrorCode(err) != holon.CodeNotFound {
			t.Errorf("%s refunding acme's receipt: %v, want not_found", author, err)
		}
	}
	zero := journal.Amount(0)
	if _, err := te.eng.Refund(ctx, gateway.RefundInput{Receipt: r.ID, Amount: &zero}); holon.ErrorCode(err) != holon.CodeInvalidRequest {
		t.Errorf("a refund of 0: %v", err)
	}
	if _, err := te.eng.Refund(ctx, gateway.RefundInput{Receipt: "r999999"}); holon.ErrorCode(err) != holon.CodeNotFound {
		t.Errorf("a refund of no receipt: %v", err)
	}
	// acme spends what it earned on a call of its own: it cannot give it back.
	te.callOK(t, "acme/spend", "lena/base", nil)
	if acme := te.account(t, "acme"); acme.Available() >= r.Splits[1].Amount {
		t.Fatalf("acme has %s available, the test wants less than its share %s", acme.Available(), r.Splits[1].Amount)
	}
	if _, err := te.eng.Refund(ctx, gateway.RefundInput{Receipt: r.ID, Author: "acme"}); holon.ErrorCode(err) != holon.CodeInsufficientFunds {
		t.Errorf("a refund acme cannot cover: %v", err)
	}
	if rs, _ := te.eng.Refunds(r.ID); len(rs) != 0 {
		t.Errorf("refused refunds left %d records", len(rs))
	}
}

// entryLines reads a journal entry's lines by key.
func entryLines(tb testing.TB, te *testEngine, key string) []journal.Line {
	tb.Helper()
	var row holon.JournalRow
	if err := te.store.View(func(tx holon.Tx) error {
		var err error
		row, err = tx.EntryByKey(key)
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	return row.Lines
}

func sameLines(a, b []journal.Line) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
