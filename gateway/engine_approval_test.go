package gateway_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
)

// carefulMandate asks a human for every call whose worst case is above 0.05.
var carefulMandate = mandateWith("careful", `approval: {above: "0.05"}`)

// agentEcho11 is a second release of acme/echo, so that acme/echo resolves
// to it.
var agentEcho11 = agentDoc("acme/echo", "1.1.0", `
capabilities: [text.echo]
interface: {input: {type: object}, output: {type: object}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev}
`)

// recordingEcho is echoHandler that keeps every input it ran on.
type recordingEcho struct {
	mu     sync.Mutex
	inputs []string
}

func (h *recordingEcho) handle(_ context.Context, input json.RawMessage, _ *gateway.Ctx) (any, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inputs = append(h.inputs, string(input))
	return input, nil
}

func (h *recordingEcho) ran() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.inputs...)
}

// approvalEngine is an engine on carefulMandate whose echo records its inputs.
func approvalEngine(t *testing.T, clock *testClock, agents ...string) (*testEngine, *recordingEcho) {
	t.Helper()
	rec := &recordingEcho{}
	h := testHandlers()
	h["echo"] = rec.handle
	te := openEngine(t, engineConfig{manifests: agents, handlers: h, mandates: []string{carefulMandate}, clock: clock})
	return te, rec
}

// hold makes a call that needs approval and returns its pending approval.
func hold(t *testing.T, te *testEngine, in gateway.CallInput) *holon.Approval {
	t.Helper()
	res := te.call(t, in)
	wantReceipt(t, res.Receipt, holon.StatusPendingApproval, "", false, "0")
	if res.Approval == nil || res.Approval.Status != holon.ApprovalPending {
		t.Fatalf("approval %+v, want a pending one", res.Approval)
	}
	if st := te.mandate(t, in.Mandate); st.Reserved != 0 {
		t.Errorf("a held call reserved %s", st.Reserved)
	}
	if a := te.account(t, "alice"); a.Held != 0 {
		t.Errorf("a held call holds %s", a.Held)
	}
	return res.Approval
}

// wantInvalidApproval checks that a call naming an approval is refused.
func wantInvalidApproval(t *testing.T, te *testEngine, in gateway.CallInput) {
	t.Helper()
	res := te.call(t, in)
	wantReceipt(t, res.Receipt, holon.StatusDenied, holon.CodeInvalidApproval, false, "0")
}

// Ensure that approving with {} runs exactly the call that was held, once:
// the same agent version, input and max_cost, its receipt naming the
// approval; the stored input is deleted once used, and the approval cannot
// be decided or used again.
func TestEngine_Approval_ApproveAndRun(t *testing.T) {
	te, rec := approvalEngine(t, nil, agentEcho)
	in := gateway.CallInput{Mandate: "alice/careful", Agent: "acme/echo", Input: json.RawMessage(`{"doc": "q4", "n": 1}`), MaxCost: eurPtr("0.10")}
	ap := hold(t, te, in)
	if len(rec.ran()) != 0 {
		t.Fatal("the held call ran before approval")
	}
	if got := te.approval(t, ap.ID); string(got.Input) != `{"doc":"q4","n":1}` || got.MaxCost == nil || *got.MaxCost != eur("0.10") {
		t.Errorf("stored approval input %s max_cost %v", got.Input, got.MaxCost)
	}

	used, res, err := te.eng.Decide(context.Background(), ap.ID, gateway.ApprovalDecision{})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Receipt
	wantReceipt(t, r, holon.StatusSucceeded, "", true, "0.10")
	if r.Approval == nil || *r.Approval != ap.ID || r.Agent == nil || *r.Agent != ap.Agent || r.WorstCase == nil || *r.WorstCase != eur("0.10") {
		t.Errorf("run receipt approval %v agent %v worst %v", r.Approval, r.Agent, r.WorstCase)
	}
	if got := rec.ran(); len(got) != 1 || got[0] != `{"doc":"q4","n":1}` {
		t.Errorf("the agent ran on %q, want the held input once", got)
	}
	if used.Status != holon.ApprovalUsed || len(used.Input) != 0 || used.Run == nil || *used.Run != r.ID || used.Decided == nil {
		t.Errorf("approval after the run %+v", used)
	}
	if stored := te.approval(t, ap.ID); len(stored.Input) != 0 {
		t.Errorf("the stored input %s outlived its use", stored.Input)
	}

	if _, _, err := te.eng.Decide(context.Background(), ap.ID, gateway.ApprovalDecision{}); holon.ErrorCode(err) != holon.CodeInvalidApproval {
		t.Errorf("second approval: %v, want invalid_approval", err)
	}
	in.Approval = ap.ID
	wantInvalidApproval(t, te, in)
	if n := len(rec.ran()); n != 1 {
		t.Errorf("the agent ran %d times, want once", n)
	}
}

// Ensure that a granted approval ({"run": false}) lets exactly the held call
// through once when it is re-submitted: another input, agent version or
// max_cost is refused without using it up, and a second use is refused.
func TestEngine_Approval_Grant(t *testing.T) {
	te, rec := approvalEngine(t, nil, agentEcho, agentEcho11)
	in := gateway.CallInput{Mandate: "alice/careful", Agent: "acme/echo", Input: json.RawMessage(`{"n":1,"k":"v"}`), MaxCost: eurPtr("0.10")}
	ap := hold(t, te, in)
	if ap.Agent != "acme/echo@1.1.0" {
		t.Fatalf("held for %s, want the highest version", ap.Agent)
	}
	granted, res, err := te.eng.Decide(context.Background(), ap.ID, gateway.ApprovalDecision{NoRun: true})
	if err != nil || res != nil {
		t.Fatalf("grant: %v, ran %v", err, res)
	}
	if granted.Status != holon.ApprovalGranted || string(granted.Input) != `{"n":1,"k":"v"}` {
		t.Errorf("granted approval %+v", granted)
	}
	if len(rec.ran()) != 0 {
		t.Fatal("granting ran the call")
	}

	in.Approval = ap.ID
	for _, c := range []struct {
		name string
		edit func(*gateway.CallInput)
	}{
		{"other input", func(in *gateway.CallInput) { in.Input = json.RawMessage(`{"n":2,"k":"v"}`) }},
		{"other version", func(in *gateway.CallInput) { in.Agent = "acme/echo@1.0.0" }},
		{"other max_cost", func(in *gateway.CallInput) { in.MaxCost = eurPtr("0.20") }},
		{"no max_cost", func(in *gateway.CallInput) { in.MaxCost = nil }},
		{"other mandate", func(in *gateway.CallInput) { in.Mandate = "alice/main" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			other := in
			c.edit(&other)
			if c.name == "other mandate" {
				te.putMandate(t, mainMandate)
			}
			wantInvalidApproval(t, te, other)
		})
	}
	if len(rec.ran()) != 0 {
		t.Fatal("a refused re-submission ran")
	}

	// The same input written another way is the same call (canonical JSON).
	in.Input = json.RawMessage(` { "k" : "v", "n" : 1.0 } `)
	res = te.call(t, in)
	wantReceipt(t, res.Receipt, holon.StatusSucceeded, "", true, "0.10")
	if res.Receipt.Approval == nil || *res.Receipt.Approval != ap.ID {
		t.Errorf("receipt approval %v", res.Receipt.Approval)
	}
	if used := te.approval(t, ap.ID); used.Status != holon.ApprovalUsed || len(used.Input) != 0 {
		t.Errorf("approval after use %+v", used)
	}
	wantInvalidApproval(t, te, in)
	if n := len(rec.ran()); n != 1 {
		t.Errorf("the agent ran %d times, want once", n)
	}
}

// Ensure that an approval is bound to the version it was requested for: a
// newer release that the same range now resolves to is refused.
func TestEngine_Approval_NewVersion(t *testing.T) {
	te, _ := approvalEngine(t, nil, agentEcho)
	in := gateway.CallInput{Mandate: "alice/careful", Agent: "acme/echo@^1", Input: json.RawMessage(`{}`)}
	ap := hold(t, te, in)
	if _, _, err := te.eng.Decide(context.Background(), ap.ID, gateway.ApprovalDecision{NoRun: true}); err != nil {
		t.Fatal(err)
	}
	m, err := contract.ParseManifest([]byte(agentEcho11))
	if err != nil {
		t.Fatal(err)
	}
	if err := te.reg.Add(&gateway.AgentVersion{Manifest: m}); err != nil {
		t.Fatal(err)
	}
	in.Approval = ap.ID
	wantInvalidApproval(t, te, in)
	in.Agent = "acme/echo@1.0.0"
	res := te.call(t, in)
	wantReceipt(t, res.Receipt, holon.StatusSucceeded, "", true, "0.10")
}

// Ensure that a rejected approval forgets its input at once and can never
// be used or decided again.
func TestEngine_Approval_Reject(t *testing.T) {
	te, rec := approvalEngine(t, nil, agentEcho)
	in := gateway.CallInput{Mandate: "alice/careful", Agent: "acme/echo", Input: json.RawMessage(`{"secret":"s"}`)}
	ap := hold(t, te, in)
	rejected, res, err := te.eng.Decide(context.Background(), ap.ID, gateway.ApprovalDecision{Reject: true})
	if err != nil || res != nil {
		t.Fatalf("reject: %v, ran %v", err, res)
	}
	if rejected.Status != holon.ApprovalRejected || len(rejected.Input) != 0 || rejected.Decided == nil {
		t.Errorf("rejected approval %+v", rejected)
	}
	if stored := te.approval(t, ap.ID); len(stored.Input) != 0 {
		t.Errorf("the rejected input %s is still stored", stored.Input)
	}
	for _, d := range []gateway.ApprovalDecision{{}, {NoRun: true}, {Reject: true}} {
		if _, _, err := te.eng.Decide(context.Background(), ap.ID, d); holon.ErrorCode(err) != holon.CodeInvalidApproval {
			t.Errorf("Decide(%+v) after reject: %v, want invalid_approval", d, err)
		}
	}
	in.Approval = ap.ID
	wantInvalidApproval(t, te, in)
	if len(rec.ran()) != 0 {
		t.Error("a rejected call ran")
	}
}

// Ensure that approvals expire after 7 days, pending or granted, and forget
// their input then; an expired approval cannot be decided or used.
func TestEngine_Approval_Expiry(t *testing.T) {
	clock := newTestClock()
	te, rec := approvalEngine(t, clock, agentEcho)
	pending := hold(t, te, gateway.CallInput{Mandate: "alice/careful", Agent: "acme/echo", Input: json.RawMessage(`{"n":1}`)})
	grantedIn := gateway.CallInput{Mandate: "alice/careful", Agent: "acme/echo", Input: json.RawMessage(`{"n":2}`)}
	granted := hold(t, te, grantedIn)
	if _, _, err := te.eng.Decide(context.Background(), granted.ID, gateway.ApprovalDecision{NoRun: true}); err != nil {
		t.Fatal(err)
	}

	clock.Advance(7*24*time.Hour - time.Second)
	if n, err := te.eng.ExpireApprovals(context.Background()); err != nil || n != 0 {
		t.Fatalf("a second before 7 days: expired %d, %v", n, err)
	}
	if ap := te.approval(t, pending.ID); ap.Status != holon.ApprovalPending || len(ap.Input) == 0 {
		t.Errorf("before expiry %+v", ap)
	}

	clock.Advance(time.Second)
	if n, err := te.eng.ExpireApprovals(context.Background()); err != nil || n != 2 {
		t.Fatalf("at 7 days: expired %d, %v; want 2", n, err)
	}
	for _, id := range []string{pending.ID, granted.ID} {
		ap := te.approval(t, id)
		if ap.Status != holon.ApprovalExpired || len(ap.Input) != 0 {
			t.Errorf("%s after expiry: %s, input %s", id, ap.Status, ap.Input)
		}
		if _, _, err := te.eng.Decide(context.Background(), id, gateway.ApprovalDecision{}); holon.ErrorCode(err) != holon.CodeInvalidApproval {
			t.Errorf("Decide(%s) after expiry: %v", id, err)
		}
	}
	grantedIn.Approval = granted.ID
	wantInvalidApproval(t, te, grantedIn)
	if len(rec.ran()) != 0 {
		t.Error("an expired approval ran")
	}
	if n, err := te.eng.ExpireApprovals(context.Background()); err != nil || n != 0 {
		t.Errorf("expired again: %d, %v", n, err)
	}
	if aps, err := te.eng.Approvals(func(*holon.Approval) bool { return true }, 10); err != nil || len(aps) != 2 {
		t.Errorf("Approvals: %d, %v", len(aps), err)
	}
}

// Ensure that an approval reached after its time, before the periodic
// sweep, is already expired when read.
func TestEngine_Approval_ExpiresOnRead(t *testing.T) {
	clock := newTestClock()
	te, _ := approvalEngine(t, clock, agentEcho)
	ap := hold(t, te, gateway.CallInput{Mandate: "alice/careful", Agent: "acme/echo"})
	clock.Advance(gateway.ApprovalTTL)
	if got := te.approval(t, ap.ID); got.Status != holon.ApprovalExpired || len(got.Input) != 0 {
		t.Errorf("read after expiry: %+v", got)
	}
	if _, err := te.eng.Approval(context.Background(), "a999"); holon.ErrorCode(err) != holon.CodeNotFound {
		t.Errorf("unknown approval: %v", err)
	}
}

// Ensure that approving a call made by capability runs it as the held call
// was admitted: under a mandate that allows the capability but not the
// agent by name.
func TestEngine_Approval_CapabilityCall(t *testing.T) {
	te := newEngine(t, []string{agentEcho}, testHandlers(),
		mandateWith("caps", `allow: {capabilities: ["text.*"]}`, `approval: {above: "0.05"}`))
	in := gateway.CallInput{Mandate: "alice/caps", Capability: "text.echo", Input: json.RawMessage(`{}`)}

	// Granted, then re-submitted by the caller: the call is by capability again.
	ap := hold(t, te, in)
	if _, _, err := te.eng.Decide(context.Background(), ap.ID, gateway.ApprovalDecision{NoRun: true}); err != nil {
		t.Fatal(err)
	}
	in.Approval = ap.ID
	wantReceipt(t, te.call(t, in).Receipt, holon.StatusSucceeded, "", true, "0.10")

	in.Approval = ""
	ap = hold(t, te, in)
	_, res, err := te.eng.Decide(context.Background(), ap.ID, gateway.ApprovalDecision{})
	if err != nil {
		t.Fatal(err)
	}
	wantReceipt(t, res.Receipt, holon.StatusSucceeded, "", true, "0.10")
}
