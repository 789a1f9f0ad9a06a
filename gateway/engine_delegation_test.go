package gateway_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

// orchestrate calls an orchestrator with a script and returns its result and
// the outcomes its handler saw.
func orchestrate(t *testing.T, te *testEngine, in gateway.CallInput, calls ...scriptCall) (*gateway.CallResult, scriptOutput) {
	t.Helper()
	in.Input = script(calls...)
	res := te.call(t, in)
	var out scriptOutput
	if res.Output != nil {
		if err := json.Unmarshal(res.Output, &out); err != nil {
			t.Fatalf("output %s: %v", res.Output, err)
		}
	}
	return res, out
}

// children reads a receipt's children, in order.
func (te *testEngine) children(t *testing.T, r *holon.Receipt) []*holon.Receipt {
	t.Helper()
	var out []*holon.Receipt
	for _, id := range r.Children {
		out = append(out, te.receipt(t, id))
	}
	return out
}

// Ensure that under passthrough the caller's payer pays the children out of
// the orchestrator's hold: each child runs under the sub-mandate
// <mandate>.<receipt>, derived as gateway.md §3 says, and has its own
// receipt in the parent's tree; the parent's cost.downstream is the sum of
// its billed children, the mandate's spent includes them; a child outside
// the declared calls, or whose worst case does not fit its entry's
// max_cost, is refused with not_declared.
func TestEngine_Delegation_Passthrough(t *testing.T) {
	te := newEngine(t, allAgents, testHandlers(), mainMandate)
	res, out := orchestrate(t, te, gateway.CallInput{Mandate: "alice/main", Agent: "acme/orch"},
		scriptCall{Agent: "acme/echo", Input: json.RawMessage(`{"x":1}`)},
		scriptCall{Agent: "acme/units", Input: json.RawMessage(`{"units":3}`), MaxCost: "0.50"},
		scriptCall{Agent: "acme/units", Input: json.RawMessage(`{"units":3}`), MaxCost: "0.60"}, // > the entry's 0.50
		scriptCall{Agent: "acme/crash"},                                // not declared
		scriptCall{Agent: "acme/strict", Input: json.RawMessage(`{}`)}, // rejected input
		scriptCall{Capability: "text.echo"},
	)
	p := res.Receipt
	wantReceipt(t, p, holon.StatusSucceeded, "", true, "0.10")
	if p.WorstCase == nil || *p.WorstCase != eur("1.10") {
		t.Errorf("worst case %v, want price + cap = 1.10", p.WorstCase)
	}
	if p.Cost.Downstream != eur("0.50") || p.Cost.Total != eur("0.60") {
		t.Errorf("cost %+v, want downstream 0.50, total 0.60", p.Cost)
	}
	sub := "alice/main." + p.ID
	if p.SubMandate == nil || *p.SubMandate != sub {
		t.Errorf("sub_mandate %v, want %s", p.SubMandate, sub)
	}

	type want struct{ status, code, own string }
	wants := []want{
		{holon.StatusSucceeded, "", "0.10"},
		{holon.StatusSucceeded, "", "0.30"},
		{holon.StatusDenied, holon.CodeNotDeclared, "0"},
		{holon.StatusDenied, holon.CodeNotDeclared, "0"},
		{holon.StatusRejected, holon.CodeRejectedInput, "0"},
		{holon.StatusSucceeded, "", "0.10"},
	}
	kids := te.children(t, p)
	if len(kids) != len(wants) || len(out.Results) != len(wants) {
		t.Fatalf("%d children, %d outcomes, want %d", len(kids), len(out.Results), len(wants))
	}
	for i, c := range kids {
		w := wants[i]
		wantReceipt(t, c, w.status, w.code, w.status == holon.StatusSucceeded, w.own)
		if c.Parent == nil || *c.Parent != p.ID || c.Mandate != sub || c.Payer != "alice" || c.Caller != "acme/orch@1.0.0" {
			t.Errorf("child %d: parent %v mandate %s payer %s caller %s", i, c.Parent, c.Mandate, c.Payer, c.Caller)
		}
		if c.Agent == nil {
			t.Errorf("child %d (%s/%s): the receipt names no agent", i, c.Status, errCode(c))
		}
		o := out.Results[i]
		if o.Receipt != c.ID || o.Status != c.Status || o.Error != errCode(c) || o.OK != (c.Status == holon.StatusSucceeded) {
			t.Errorf("child %d: the orchestrator saw %+v, the receipt says %s %s/%s", i, o, c.ID, c.Status, errCode(c))
		}
	}
	if string(out.Results[0].Output) != `{"x":1}` {
		t.Errorf("the orchestrator got %s from echo", out.Results[0].Output)
	}

	st := te.mandate(t, sub)
	m := st.Mandate
	if m.Issuer != "alice/assistant" || m.Grantee != "acme/orch@1.0.0" || m.Parent != "alice/main" || m.Currency != "EUR" ||
		m.Total() != eur("1.00") || m.MaxDepth() != 1 || len(m.Allow.Capabilities) != 1 || len(m.Allow.Agents) != 5 {
		t.Errorf("sub-mandate %+v", m)
	}
	if st.Spent != eur("0.50") || st.Reserved != 0 {
		t.Errorf("sub-mandate spent %s reserved %s, want 0.50 and 0", st.Spent, st.Reserved)
	}
	if st := te.mandate(t, "alice/main"); st.Spent != eur("0.60") || st.Reserved != 0 {
		t.Errorf("mandate spent %s reserved %s, want 0.60 (children included) and 0", st.Spent, st.Reserved)
	}
	if a := te.account(t, "alice"); a.Balance != eur("99.40") || a.Held != 0 {
		t.Errorf("alice %+v, want 99.40", a)
	}
}

// Ensure that a passthrough orchestrator under another one pays its own
// children out of the hold of the root call: every level's downstream adds
// up, and each mandate's spent counts what was billed below it.
func TestEngine_Delegation_Nested(t *testing.T) {
	te := newEngine(t, allAgents, testHandlers(), mainMandate)
	res, out := orchestrate(t, te, gateway.CallInput{Mandate: "alice/main", Agent: "acme/orch"},
		scriptCall{Agent: "acme/orch2", Input: script(scriptCall{Agent: "acme/echo"})})
	p := res.Receipt
	wantReceipt(t, p, holon.StatusSucceeded, "", true, "0.10")
	if len(out.Results) != 1 || !out.Results[0].OK {
		t.Fatalf("outcomes %+v", out.Results)
	}
	kids := te.children(t, p)
	mid := kids[0]
	wantReceipt(t, mid, holon.StatusSucceeded, "", true, "0.05")
	leaf := te.children(t, mid)[0]
	wantReceipt(t, leaf, holon.StatusSucceeded, "", true, "0.10")
	if mid.Cost.Total != eur("0.15") || p.Cost.Total != eur("0.25") {
		t.Errorf("totals: orch2 %s, orch %s; want 0.15 and 0.25", mid.Cost.Total, p.Cost.Total)
	}
	if leaf.Mandate != "alice/main."+p.ID+"."+mid.ID || leaf.Payer != "alice" {
		t.Errorf("leaf mandate %s payer %s", leaf.Mandate, leaf.Payer)
	}
	if st := te.mandate(t, leaf.Mandate); st.Mandate.MaxDepth() != 0 {
		t.Errorf("the second sub-mandate has max_depth %d, want 0", st.Mandate.MaxDepth())
	}
	if st := te.mandate(t, "alice/main"); st.Spent != eur("0.25") {
		t.Errorf("mandate spent %s, want 0.25", st.Spent)
	}
	if a := te.account(t, "alice"); a.Balance != eur("99.75") {
		t.Errorf("alice %+v, want 99.75", a)
	}
}

// Ensure that the sub-mandate's budget is downstream.cap, or what max_cost
// leaves after the agent's own price: children beyond it are denied
// over_budget, and the payer never pays more than the worst case.
func TestEngine_Delegation_Cap(t *testing.T) {
	echoes := func(n int) []scriptCall {
		var cs []scriptCall
		for range n {
			cs = append(cs, scriptCall{Agent: "acme/echo"})
		}
		return cs
	}
	for _, c := range []struct {
		name, maxCost string
		calls, paid   int
	}{
		{name: "cap", calls: 11, paid: 10},
		{name: "max_cost", maxCost: "0.35", calls: 4, paid: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			te := newEngine(t, allAgents, testHandlers(), mainMandate)
			res, out := orchestrate(t, te, gateway.CallInput{Mandate: "alice/main", Agent: "acme/orch", MaxCost: eurPtr(c.maxCost)}, echoes(c.calls)...)
			p := res.Receipt
			wantReceipt(t, p, holon.StatusSucceeded, "", true, "0.10")
			for i, o := range out.Results {
				if ok := i < c.paid; o.OK != ok || !ok && o.Error != holon.CodeOverBudget {
					t.Errorf("call %d: %+v", i, o)
				}
			}
			downstream := eur("0.10") * journal.Amount(c.paid)
			if p.Cost.Downstream != downstream || p.Cost.Total > *p.WorstCase {
				t.Errorf("cost %+v, worst case %s; want downstream %s", p.Cost, p.WorstCase, downstream)
			}
			if a := te.account(t, "alice"); a.Balance != te.credit-p.Cost.Total {
				t.Errorf("alice %+v", a)
			}
		})
	}
}

// Ensure that under included the orchestrator's author pays the children
// from its own account, with its own hold, and the root payer pays only the
// orchestrator's price.
func TestEngine_Delegation_Included(t *testing.T) {
	te := newEngine(t, allAgents, testHandlers(), mainMandate)
	if err := te.eng.Credit(context.Background(), "admin-credit:acme", "acme", eur("1.00")); err != nil {
		t.Fatal(err)
	}
	res, out := orchestrate(t, te, gateway.CallInput{Mandate: "alice/main", Agent: "acme/orch-inc"},
		scriptCall{Agent: "acme/echo"})
	p := res.Receipt
	wantReceipt(t, p, holon.StatusSucceeded, "", true, "0.50")
	if len(out.Results) != 1 || !out.Results[0].OK {
		t.Fatalf("outcomes %+v", out.Results)
	}
	if p.Cost.Downstream != 0 || p.Cost.Total != eur("0.50") {
		t.Errorf("cost %+v, want the own price only", p.Cost)
	}
	c := te.children(t, p)[0]
	wantReceipt(t, c, holon.StatusSucceeded, "", true, "0.10")
	if c.Payer != "acme" || c.Mandate != "alice/main."+p.ID {
		t.Errorf("child payer %s mandate %s, want acme under the sub-mandate", c.Payer, c.Mandate)
	}
	if st := te.mandate(t, c.Mandate); st.Mandate.Total() != eur("0.50") || st.Spent != eur("0.10") {
		t.Errorf("sub-mandate total %s spent %s, want 0.50 (the own price) and 0.10", st.Mandate.Total(), st.Spent)
	}
	if st := te.mandate(t, "alice/main"); st.Spent != eur("0.50") {
		t.Errorf("mandate spent %s, want 0.50", st.Spent)
	}
	if a := te.account(t, "alice"); a.Balance != eur("99.50") {
		t.Errorf("alice %+v, want 99.50", a)
	}
	// acme: 1.00 − 0.10 for echo + 0.09 back as echo's author + 0.45 for orch-inc.
	if a := te.account(t, "acme"); a.Balance != eur("1.44") || a.Held != 0 {
		t.Errorf("acme %+v, want 1.44", a)
	}

	t.Run("author without funds", func(t *testing.T) {
		te := newEngine(t, allAgents, testHandlers(), mainMandate)
		res, out := orchestrate(t, te, gateway.CallInput{Mandate: "alice/main", Agent: "acme/orch-inc"},
			scriptCall{Agent: "acme/echo"})
		wantReceipt(t, res.Receipt, holon.StatusSucceeded, "", true, "0.50")
		if len(out.Results) != 1 || out.Results[0].Error != holon.CodeInsufficientFunds {
			t.Errorf("outcomes %+v, want insufficient_funds", out.Results)
		}
	})
}

// Ensure that nobody can approve inside a delegated run: a child above the
// inherited approval threshold is denied approval_required, after the root
// call itself was approved and run.
func TestEngine_Delegation_ApprovalRequired(t *testing.T) {
	te := newEngine(t, allAgents, testHandlers(), mandateWith("careful", `approval: {above: "0.05"}`))
	res, _ := orchestrate(t, te, gateway.CallInput{Mandate: "alice/careful", Agent: "acme/orch"}, scriptCall{Agent: "acme/echo"})
	wantReceipt(t, res.Receipt, holon.StatusPendingApproval, "", false, "0")
	_, run, err := te.eng.Decide(context.Background(), res.Approval.ID, gateway.ApprovalDecision{})
	if err != nil {
		t.Fatal(err)
	}
	wantReceipt(t, run.Receipt, holon.StatusSucceeded, "", true, "0.10")
	var out scriptOutput
	if err := json.Unmarshal(run.Output, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 1 || out.Results[0].Error != holon.CodeApprovalRequired {
		t.Fatalf("outcomes %+v, want approval_required", out.Results)
	}
	c := te.children(t, run.Receipt)[0]
	wantReceipt(t, c, holon.StatusDenied, holon.CodeApprovalRequired, false, "0")
	if c.Approval != nil {
		t.Errorf("a delegated call created approval %s", *c.Approval)
	}
	aps, err := te.eng.Approvals(func(*holon.Approval) bool { return true }, 10)
	if err != nil || len(aps) != 1 {
		t.Errorf("approvals %v, %v; want only the root call's", aps, err)
	}
}

// Ensure that delegation stops at delegation.max_depth: with 0, the
// orchestrator runs but its children are denied delegation_depth.
func TestEngine_Delegation_Depth(t *testing.T) {
	te := newEngine(t, allAgents, testHandlers(), mandateWith("flat", "delegation: {max_depth: 0}"))
	res, out := orchestrate(t, te, gateway.CallInput{Mandate: "alice/flat", Agent: "acme/orch"}, scriptCall{Agent: "acme/echo"})
	wantReceipt(t, res.Receipt, holon.StatusSucceeded, "", true, "0.10")
	if len(out.Results) != 1 || out.Results[0].Error != holon.CodeDelegationDepth {
		t.Fatalf("outcomes %+v, want delegation_depth", out.Results)
	}
	wantReceipt(t, te.children(t, res.Receipt)[0], holon.StatusDenied, holon.CodeDelegationDepth, false, "0")
	if te.ran("echo") != 0 {
		t.Error("the child ran")
	}
}

// Ensure that a run is not settled until its downstream calls have: a
// parent that times out while its child still runs stays running until the
// child ends, then fails with timeout, unbilled for its own work, with the
// child's billed cost on its downstream and paid.
func TestEngine_Delegation_ParentTimeoutWaitsForChild(t *testing.T) {
	started, release := make(chan string, 1), make(chan struct{})
	parentDone := make(chan struct{})
	h := testHandlers()
	h["hang"] = blockingHandler(started, release)
	h["orch-timeout"] = func(ctx context.Context, _ json.RawMessage, c *gateway.Ctx) (any, error) {
		go func() { <-ctx.Done(); close(parentDone) }()
		return c.Call(ctx, gateway.Target{Agent: "acme/hang"}, map[string]any{}), nil
	}
	te := newEngine(t, allAgents, h, mainMandate)
	done := make(chan *gateway.CallResult, 1)
	go func() {
		res, err := te.eng.Call(context.Background(), gateway.CallInput{Mandate: "alice/main", Agent: "acme/orch-timeout"})
		if err != nil {
			t.Errorf("Call: %v", err)
		}
		done <- res
	}()
	childID := wait(t, started, "the child to start")
	wait(t, parentDone, "the parent's timeout")
	time.Sleep(100 * time.Millisecond) // room for a parent that would not wait
	select {
	case res := <-done:
		t.Fatalf("the parent settled before its child: %+v", res.Receipt)
	default:
	}
	child := te.receipt(t, childID)
	parent := te.receipt(t, *child.Parent)
	if child.Status != holon.StatusRunning || parent.Status != holon.StatusRunning {
		t.Errorf("while the child runs: parent %s, child %s; want both running", parent.Status, child.Status)
	}
	if n := len(te.holds(t)); n != 2 {
		t.Errorf("%d holds while the child runs, want 2", n)
	}

	close(release)
	res := wait(t, done, "the parent to settle")
	if res == nil {
		t.FailNow()
	}
	p := res.Receipt
	wantReceipt(t, p, holon.StatusFailed, holon.CodeTimeout, false, "0")
	if p.Cost.Downstream != eur("0.05") || p.Cost.Total != eur("0.05") || !reflect.DeepEqual(p.Children, []string{childID}) {
		t.Errorf("parent cost %+v children %v, want the child's 0.05", p.Cost, p.Children)
	}
	wantReceipt(t, te.receipt(t, childID), holon.StatusSucceeded, "", true, "0.05")
	if a := te.account(t, "alice"); a.Balance != eur("99.95") || a.Held != 0 {
		t.Errorf("alice %+v, want 99.95 and nothing held", a)
	}
	if st := te.mandate(t, "alice/main"); st.Spent != eur("0.05") || st.Reserved != 0 {
		t.Errorf("mandate spent %s reserved %s", st.Spent, st.Reserved)
	}
	// The child's run was recorded before the parent's.
	var events []*holon.Event
	if err := te.store.View(func(tx holon.Tx) error {
		var err error
		events, err = tx.Events(0, 10)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[0].Receipt != p.ID || events[1].Receipt != childID {
		t.Errorf("events newest first: %+v, want the parent's then the child's", events)
	}
}

// agentOrchUSD is a passthrough orchestrator priced in USD, whose own price
// and cap each round up by a fraction of a micro-unit in EUR: 0.10 USD is
// 0.0923457 EUR, 0.30 USD is 0.2770371 EUR, and together 0.3693828 EUR.
var agentOrchUSD = agentDoc("acme/orch-usd", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.10", currency: USD}
runtime: {kind: dev, tool: script}
downstream: {mode: passthrough, cap: "0.30"}
calls:
  - {agent: acme/quote, max_cost: "0.31"}
`)

// Ensure that a call never costs its payer more than its worst case, nor
// its mandate more than its total, when converting the own price and the
// cap apart would round up twice: the worst case 0.369383 EUR is reserved,
// and a child that spends the whole cap leaves the orchestrator only the
// rest of it.
func TestEngine_Delegation_NeverAboveWorstCase(t *testing.T) {
	te := newEngine(t, append([]string{agentOrchUSD}, allAgents...), testHandlers(), mandateWith("exact", `budget: {total: "0.369383"}`))
	res, out := orchestrate(t, te, gateway.CallInput{Mandate: "alice/exact", Agent: "acme/orch-usd"},
		// The sub-budget is what W leaves after the own price:
		// 0.369383 − 0.092346 = 0.277037; 0.299999 USD converts to exactly that.
		scriptCall{Agent: "acme/quote", Input: json.RawMessage(`{"quote":"0.277037"}`), MaxCost: "0.299999"})
	p := res.Receipt
	if p.WorstCase == nil || *p.WorstCase != eur("0.369383") {
		t.Fatalf("worst case %v, want 0.369383", p.WorstCase)
	}
	if len(out.Results) != 1 || !out.Results[0].OK {
		t.Fatalf("outcomes %+v", out.Results)
	}
	if st := te.mandate(t, "alice/exact."+p.ID); st.Mandate.Total() != eur("0.277037") {
		t.Errorf("sub-mandate budget %s, want 0.277037", st.Mandate.Total())
	}
	if p.Status != holon.StatusSucceeded || p.Cost.Total != *p.WorstCase {
		t.Errorf("%s: cost %+v above the worst case %s", p.Status, p.Cost, p.WorstCase)
	}
	if st := te.mandate(t, "alice/exact"); st.Spent > st.Mandate.Total() {
		t.Errorf("mandate spent %s of %s", st.Spent, st.Mandate.Total())
	}
	if a := te.account(t, "alice"); te.credit-a.Balance > *p.WorstCase {
		t.Errorf("alice paid %s for a worst case of %s", te.credit-a.Balance, p.WorstCase)
	}
}
