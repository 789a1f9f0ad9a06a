package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// Ensure that a restart closes the calls that were in flight as failed with
// gateway_restarted, never billed, with their holds and reservations
// released; a delegated call that had finished stays paid and counts
// against the mandate; and the old process's late settlements, once its
// handlers return, fail instead of touching the file.
func TestEngine_Recover(t *testing.T) {
	started, release := make(chan string, 8), make(chan struct{})
	h := testHandlers()
	h["hang"] = blockingHandler(started, release)
	te := newEngine(t, allAgents, h, mainMandate)

	type outcome struct {
		res *gateway.CallResult
		err error
	}
	outcomes := make(chan outcome, 4)
	calls := []gateway.CallInput{
		{Mandate: "alice/main", Agent: "acme/hang"},
		{Mandate: "alice/main", Agent: "acme/hang"},
		{Mandate: "alice/main", Agent: "acme/hang"},
		{Mandate: "alice/main", Agent: "acme/orch", Input: script(scriptCall{Agent: "acme/echo"}, scriptCall{Agent: "acme/hang"})},
	}
	for _, in := range calls {
		go func() {
			res, err := te.eng.Call(context.Background(), in)
			outcomes <- outcome{res, err}
		}()
	}
	var hanging []string
	for range 4 {
		hanging = append(hanging, wait(t, started, "a call to start"))
	}
	if n := len(te.holds(t)); n != 5 {
		t.Fatalf("%d holds while calls run, want 5", n)
	}
	// 3 × 0.05, and the orchestrator's 1.10 less the 0.10 its first child took.
	if a := te.account(t, "alice"); a.Held != eur("1.15") || a.Balance != eur("99.90") {
		t.Errorf("alice while calls run %+v, want 1.15 held of 99.90", a)
	}

	old := te.restart(t)
	closed, err := te.eng.Recover(context.Background())
	if err != nil || closed != 5 {
		t.Fatalf("Recover: closed %d, %v; want 5", closed, err)
	}

	var orch, echo, child *holon.Receipt
	for _, id := range hanging {
		r := te.receipt(t, id)
		wantReceipt(t, r, holon.StatusFailed, holon.CodeGatewayRestarted, false, "0")
		if r.Parent != nil {
			child = r
			orch = te.receipt(t, *r.Parent)
		}
	}
	if orch == nil {
		t.Fatal("no hanging call was the orchestrator's child")
	}
	wantReceipt(t, orch, holon.StatusFailed, holon.CodeGatewayRestarted, false, "0")
	if len(orch.Children) != 2 || orch.Children[1] != child.ID {
		t.Fatalf("orchestrator children %v", orch.Children)
	}
	echo = te.receipt(t, orch.Children[0])
	wantReceipt(t, echo, holon.StatusSucceeded, "", true, "0.10")
	if _, ok := te.entry(t, "settle:"+echo.ID); !ok {
		t.Error("the finished child's settlement is gone")
	}
	if orch.Cost.Downstream != eur("0.10") || orch.Cost.Total != eur("0.10") {
		t.Errorf("orchestrator cost %+v, want the finished child's 0.10", orch.Cost)
	}
	if st := te.mandate(t, "alice/main"); st.Spent != eur("0.10") || st.Reserved != 0 {
		t.Errorf("mandate spent %s reserved %s, want 0.10 and 0", st.Spent, st.Reserved)
	}
	if st := te.mandate(t, *orch.SubMandate); st.Spent != eur("0.10") || st.Reserved != 0 {
		t.Errorf("sub-mandate spent %s reserved %s, want 0.10 and 0", st.Spent, st.Reserved)
	}
	if a := te.account(t, "alice"); a.Balance != eur("99.90") || a.Held != 0 {
		t.Errorf("alice after recovery %+v, want 99.90 and nothing held", a)
	}
	if n, err := te.eng.Recover(context.Background()); err != nil || n != 0 {
		t.Errorf("second Recover: %d, %v", n, err)
	}

	// The old process's handlers return now: its settlements must fail.
	page, err := te.eng.Receipts("", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	for range calls {
		o := wait(t, outcomes, "an old call to return")
		if !errors.Is(o.err, holon.ErrClosed) {
			t.Errorf("an old call returned %+v, %v; want kv.ErrClosed", o.res, o.err)
		}
	}
	after, err := te.eng.Receipts("", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after, page) {
		t.Errorf("receipts changed after the old calls returned:\n%+v\nwas\n%+v", after.Receipts, page.Receipts)
	}
	if _, err := old.Call(context.Background(), gateway.CallInput{Mandate: "alice/main", Agent: "acme/echo", Input: json.RawMessage(`{}`)}); err == nil {
		t.Error("the old engine still takes calls")
	}
}

// Ensure that a restart with a nested delegated run in flight (orch → orch2
// → a finished echo and a hanging call) passes the finished grandchild's
// cost up the tree: orch2's downstream is the echo's 0.10, and orch's
// downstream is orch2's total, so the tree still adds up (the cleanup
// checks every parent's downstream against its children).
func TestEngine_Recover_Nested(t *testing.T) {
	started, release := make(chan string, 2), make(chan struct{})
	defer close(release)
	h := testHandlers()
	h["hang"] = blockingHandler(started, release)
	te := newEngine(t, allAgents, h, mainMandate)
	go te.eng.Call(context.Background(), gateway.CallInput{Mandate: "alice/main", Agent: "acme/orch",
		Input: script(scriptCall{Agent: "acme/orch2", Input: script(scriptCall{Agent: "acme/echo"}, scriptCall{Agent: "acme/hang"})})})
	hanging := wait(t, started, "the grandchild to start")
	te.restart(t)
	if n, err := te.eng.Recover(context.Background()); err != nil || n != 3 {
		t.Fatalf("Recover: closed %d, %v; want 3", n, err)
	}
	grand := te.receipt(t, hanging)
	mid := te.receipt(t, *grand.Parent)
	root := te.receipt(t, *mid.Parent)
	if mid.Cost.Downstream != eur("0.10") || mid.Cost.Total != eur("0.10") {
		t.Errorf("orch2 cost %+v, want the echo's 0.10", mid.Cost)
	}
	if root.Cost.Downstream != eur("0.10") || root.Cost.Total != eur("0.10") {
		t.Errorf("orch cost %+v, want orch2's total 0.10", root.Cost)
	}
	if st := te.mandate(t, "alice/main"); st.Spent != eur("0.10") || st.Reserved != 0 {
		t.Errorf("mandate spent %s reserved %s, want 0.10 and 0", st.Spent, st.Reserved)
	}
}
