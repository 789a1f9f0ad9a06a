package gateway_test

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// Ensure that a successful call is billed its price, split 10% to the
// platform and the rest to the author, journaled as settle:<receipt> in the
// same amounts, counted against the mandate and measured in the record.
func TestEngine_Call_Succeeded(t *testing.T) {
	te := newEngine(t, []string{agentEcho}, testHandlers(), mainMandate)
	res := te.call(t, gateway.CallInput{Mandate: "alice/main", Agent: "acme/echo", Input: json.RawMessage(`{"x":1}`)})

	r := res.Receipt
	wantReceipt(t, r, holon.StatusSucceeded, "", true, "0.10")
	if string(res.Output) != `{"x":1}` {
		t.Errorf("output %s, want the input back", res.Output)
	}
	if r.Agent == nil || *r.Agent != "acme/echo@1.0.0" || r.Mandate != "alice/main" || r.Caller != "alice/assistant" ||
		r.Payer != "alice" || r.Currency != "EUR" || r.Parent != nil || r.SubMandate != nil || len(r.Children) != 0 {
		t.Errorf("receipt %+v", r)
	}
	if r.WorstCase == nil || *r.WorstCase != eur("0.10") || r.Cost.Downstream != 0 || r.Cost.Total != eur("0.10") {
		t.Errorf("worst case %v, cost %+v", r.WorstCase, r.Cost)
	}
	wantSplits := []journal.Share{{To: "holon", Amount: eur("0.01")}, {To: "acme", Amount: eur("0.09")}}
	if !reflect.DeepEqual(r.Splits, wantSplits) {
		t.Errorf("splits %v, want %v", r.Splits, wantSplits)
	}
	if stored := te.receipt(t, r.ID); !reflect.DeepEqual(stored, r) {
		t.Errorf("stored receipt %+v\nreturned %+v", stored, r)
	}
	row, ok := te.entry(t, "settle:"+r.ID)
	want := map[string]journal.Amount{"alice": -eur("0.10"), "holon": eur("0.01"), "acme": eur("0.09")}
	if !ok || !maps.Equal(lineMap(row.Lines), want) {
		t.Errorf("settle:%s = %v (found %v), want %v", r.ID, row.Lines, ok, want)
	}
	if a := te.account(t, "alice"); a.Balance != eur("99.90") || a.Held != 0 {
		t.Errorf("alice %+v, want 99.90 and nothing held", a)
	}
	if st := te.mandate(t, "alice/main"); st.Spent != eur("0.10") || st.Reserved != 0 || st.Remaining != eur("9.90") {
		t.Errorf("mandate spent %s reserved %s remaining %s", st.Spent, st.Reserved, st.Remaining)
	}
	rec, err := te.eng.Record("acme/echo@1.0.0")
	if err != nil || rec.Runs != 1 || rec.Succeeded != 1 || rec.Billed != eur("0.10") {
		t.Errorf("record %+v, %v", rec, err)
	}
	if _, ok := te.entry(t, "signup:alice"); !ok {
		t.Error("alice's signup credit is not journaled as signup:alice")
	}
}

// lifecycleCase is one call and the receipt it must leave.
type lifecycleCase struct {
	name       string
	mandate    string // a root mandate to store instead of mainMandate
	mandateID  string // the call's mandate, when not the stored one
	credit     string
	agent      string
	capability string
	input      string
	maxCost    string

	status string
	code   string
	billed bool
	own    string
	worst  string // the receipt's worst case, when the case is about it
	check  func(t *testing.T, te *testEngine, res *gateway.CallResult)
}

// Ensure that every status and code the lifecycle can produce comes out of
// the engine, billed or not as gateway.md §2 says: a call that never ran
// (denied, pending approval, rejected input) never reaches its handler and
// reserves nothing; a failed run is never billed unless it is a declared
// billed error under charge_on: attempt; and what is billed is the price,
// per unit or quoted, capped at pricing.max and max_cost, converted at the
// mandate's rate rounded up.
func TestEngine_Call_Lifecycle(t *testing.T) {
	cases := []lifecycleCase{
		{name: "free agent", agent: "acme/free", status: holon.StatusSucceeded, billed: true, own: "0"},
		{name: "by capability", capability: "text.echo", status: holon.StatusSucceeded, billed: true, own: "0.10",
			check: func(t *testing.T, _ *testEngine, res *gateway.CallResult) {
				if a := res.Receipt.Agent; a == nil || *a != "acme/echo@1.0.0" {
					t.Errorf("capability text.echo resolved to %v", a)
				}
			}},
		{name: "unknown mandate", mandateID: "alice/nope", agent: "acme/echo", status: holon.StatusDenied, code: holon.CodeMandateInactive},
		{name: "revoked mandate", mandate: mandateWith("m", "revoked: true"), agent: "acme/echo",
			status: holon.StatusDenied, code: holon.CodeMandateInactive},
		{name: "expired mandate", mandate: mandateWith("m", `expires: "2020-01-01T00:00:00Z"`), agent: "acme/echo",
			status: holon.StatusDenied, code: holon.CodeMandateInactive},
		{name: "denied agent", mandate: mandateWith("m", `deny: {agents: ["acme/echo"]}`), agent: "acme/echo",
			status: holon.StatusDenied, code: holon.CodeDeniedByMandate},
		{name: "not allowed", mandate: mandateWith("m", `allow: {agents: ["acme/units"]}`), agent: "acme/echo",
			status: holon.StatusDenied, code: holon.CodeNotAllowed},
		{name: "data policy", mandate: mandateWith("m", `data: {regions: [eu]}`), agent: "acme/echo",
			status: holon.StatusDenied, code: holon.CodeDataPolicy},
		{name: "no fx rate", mandate: mandateWith("m", "fx: {}"), agent: "acme/usd",
			status: holon.StatusDenied, code: holon.CodeNoFxRate},
		{name: "below fixed price", agent: "acme/echo", maxCost: "0.09",
			status: holon.StatusDenied, code: holon.CodeBelowFixedPrice},
		{name: "over per call", mandate: mandateWith("m", `budget: {total: "10.00", per_call: "0.09"}`), agent: "acme/echo",
			status: holon.StatusDenied, code: holon.CodeOverPerCall},
		{name: "over budget", mandate: mandateWith("m", `budget: {total: "0.09"}`), agent: "acme/echo",
			status: holon.StatusDenied, code: holon.CodeOverBudget},
		{name: "insufficient funds", credit: "0.09", agent: "acme/echo",
			status: holon.StatusDenied, code: holon.CodeInsufficientFunds, worst: "0.10"},
		{name: "unknown agent", agent: "acme/nothing", status: holon.StatusDenied, code: holon.CodeNotFound},
		{name: "unknown capability", capability: "text.nothing", status: holon.StatusDenied, code: holon.CodeNotFound},
		{name: "pending approval", mandate: mandateWith("m", `approval: {above: "0.05"}`), agent: "acme/echo", input: `{"doc":"q4"}`,
			status: holon.StatusPendingApproval, worst: "0.10",
			check: func(t *testing.T, te *testEngine, res *gateway.CallResult) {
				ap := res.Approval
				if ap == nil || res.Receipt.Approval == nil || *res.Receipt.Approval != ap.ID {
					t.Fatalf("approval %+v, receipt names %v", ap, res.Receipt.Approval)
				}
				stored := te.approval(t, ap.ID)
				if stored.Status != holon.ApprovalPending || string(stored.Input) != `{"doc":"q4"}` ||
					stored.Agent != "acme/echo@1.0.0" || stored.WorstCase != eur("0.10") || stored.Mandate != "alice/m" {
					t.Errorf("stored approval %+v", stored)
				}
			}},
		{name: "rejected input", agent: "acme/strict", input: `{"text":3}`,
			status: holon.StatusRejected, code: holon.CodeRejectedInput},
		{name: "declared billed error, charge_on attempt", agent: "acme/declared", input: `{"code":"quota"}`,
			status: holon.StatusFailed, code: "quota", billed: true, own: "0.10"},
		{name: "declared unbilled error, charge_on attempt", agent: "acme/declared", input: `{"code":"bad_doc"}`,
			status: holon.StatusFailed, code: "bad_doc"},
		{name: "declared billed error, charge_on success", agent: "acme/declared-s", input: `{"code":"quota"}`,
			status: holon.StatusFailed, code: "quota"},
		{name: "undeclared error", agent: "acme/declared", input: `{"code":"made_up"}`,
			status: holon.StatusFailed, code: holon.CodeAgentError},
		{name: "crash", agent: "acme/crash", input: `{"mode":"error"}`,
			status: holon.StatusFailed, code: holon.CodeAgentError},
		{name: "panic", agent: "acme/crash", input: `{"mode":"panic"}`,
			status: holon.StatusFailed, code: holon.CodeAgentError},
		{name: "invalid output", agent: "acme/bad-output", input: `{"number":1}`,
			status: holon.StatusFailed, code: holon.CodeInvalidOutput},
		{name: "per unit", agent: "acme/units", input: `{"units":3}`,
			status: holon.StatusSucceeded, billed: true, own: "0.30", worst: "3.00"},
		{name: "per unit capped at max", agent: "acme/units", input: `{"units":1000}`,
			status: holon.StatusSucceeded, billed: true, own: "3.00"},
		{name: "per unit capped at max_cost", agent: "acme/units", input: `{"units":5}`, maxCost: "0.25",
			status: holon.StatusSucceeded, billed: true, own: "0.25", worst: "0.25",
			check: func(t *testing.T, _ *testEngine, res *gateway.CallResult) {
				if string(res.Output) != `{"capped":true,"max_cost":"0.25"}` {
					t.Errorf("the agent saw %s, want max_cost 0.25", res.Output)
				}
			}},
		{name: "no units", agent: "acme/units", input: `{}`, status: holon.StatusFailed, code: holon.CodeInvalidUnits},
		{name: "negative units", agent: "acme/units", input: `{"units":-1}`, status: holon.StatusFailed, code: holon.CodeInvalidUnits},
		{name: "quote", agent: "acme/quote", input: `{"quote":"0.35"}`, status: holon.StatusSucceeded, billed: true, own: "0.35"},
		{name: "quote capped at max", agent: "acme/quote", input: `{"quote":"5"}`, status: holon.StatusSucceeded, billed: true, own: "2.00"},
		{name: "invalid quote", agent: "acme/quote", input: `{"quote":"a lot"}`, status: holon.StatusFailed, code: holon.CodeInvalidQuote},
		{name: "no quote", agent: "acme/quote", input: `{}`, status: holon.StatusFailed, code: holon.CodeInvalidQuote},
		{name: "handler not compiled in", agent: "acme/ghost", status: holon.StatusFailed, code: holon.CodeRuntimeUnavailable},
		{name: "no runner for the kind", agent: "acme/remote", status: holon.StatusFailed, code: holon.CodeRuntimeUnavailable},
		{name: "fx rounded up", agent: "acme/usd", status: holon.StatusSucceeded, billed: true, own: "0.092346", worst: "0.092346",
			check: func(t *testing.T, _ *testEngine, res *gateway.CallResult) {
				// 0.10 USD × 0.923457 = 0.0923457 EUR, rounded up.
				want := []journal.Share{{To: "holon", Amount: eur("0.009234")}, {To: "acme", Amount: eur("0.083112")}}
				if !reflect.DeepEqual(res.Receipt.Splits, want) {
					t.Errorf("splits %v, want %v", res.Receipt.Splits, want)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}

func (c lifecycleCase) run(t *testing.T) {
	mandate := mainMandate
	if c.mandate != "" {
		mandate = c.mandate
	}
	te := openEngine(t, engineConfig{manifests: allAgents, handlers: testHandlers(), mandates: []string{mandate}, credit: c.credit})
	stored, err := contract.ParseMandate([]byte(mandate))
	if err != nil {
		t.Fatal(err)
	}
	id := stored.ID
	if c.mandateID != "" {
		id = c.mandateID
	}
	in := gateway.CallInput{Mandate: id, Agent: c.agent, Capability: c.capability, MaxCost: eurPtr(c.maxCost)}
	if c.input != "" {
		in.Input = json.RawMessage(c.input)
	}
	if c.own == "" {
		c.own = "0"
	}
	res := te.call(t, in)
	r := res.Receipt
	wantReceipt(t, r, c.status, c.code, c.billed, c.own)
	if c.worst != "" && (r.WorstCase == nil || *r.WorstCase != eur(c.worst)) {
		t.Errorf("worst case %v, want %s", r.WorstCase, c.worst)
	}
	if stored := te.receipt(t, r.ID); !reflect.DeepEqual(stored, r) {
		t.Errorf("stored receipt %+v\nreturned %+v", stored, r)
	}
	if r.Mandate != id || r.Cost.Total != r.Cost.Own {
		t.Errorf("receipt mandate %s cost %+v", r.Mandate, r.Cost)
	}
	if c.status != holon.StatusSucceeded && res.Message == "" {
		t.Error("no message says why")
	}
	if c.status == holon.StatusSucceeded && res.Output == nil {
		t.Error("no output")
	}

	ran := 0
	for _, n := range []string{"echo", "crash", "declared", "units", "quote"} {
		ran += te.ran(n)
	}
	wantRan := 1
	switch {
	case c.status != holon.StatusSucceeded && c.status != holon.StatusFailed,
		c.code == holon.CodeRuntimeUnavailable:
		wantRan = 0
	}
	if ran != wantRan {
		t.Errorf("handlers ran %d times, want %d", ran, wantRan)
	}

	credit := te.credit
	if a := te.account(t, "alice"); a.Balance != credit-r.Cost.Own || a.Held != 0 {
		t.Errorf("alice %+v, want %s and nothing held", a, credit-r.Cost.Own)
	}
	if c.mandateID == "" {
		if st := te.mandate(t, id); st.Spent != r.Cost.Own || st.Reserved != 0 {
			t.Errorf("mandate spent %s reserved %s, want %s and 0", st.Spent, st.Reserved, r.Cost.Own)
		}
	}
	if _, ok := te.entry(t, "settle:"+r.ID); ok != (r.Cost.Own > 0) {
		t.Errorf("settle:%s journaled %v, cost.own is %s", r.ID, ok, r.Cost.Own)
	}
	if c.check != nil {
		c.check(t, te, res)
	}
}

// Ensure that a run past its hard timeout fails with timeout and is not
// billed: a handler that watches its context sees it cancelled, and one
// that ignores it cannot hold the call.
func TestEngine_Call_Timeout(t *testing.T) {
	for _, watch := range []bool{true, false} {
		name := map[bool]string{true: "watches ctx", false: "ignores ctx"}[watch]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			observed := make(chan struct{})
			release := make(chan struct{})
			h := testHandlers()
			h["slow"] = func(ctx context.Context, _ json.RawMessage, _ *gateway.Ctx) (any, error) {
				if !watch {
					<-release
					return map[string]any{}, nil
				}
				<-ctx.Done()
				close(observed)
				return nil, ctx.Err()
			}
			te := newEngine(t, []string{agentSlow}, h, mainMandate)
			start := time.Now()
			res := te.call(t, gateway.CallInput{Mandate: "alice/main", Agent: "acme/slow"})
			close(release)
			elapsed := time.Since(start)

			wantReceipt(t, res.Receipt, holon.StatusFailed, holon.CodeTimeout, false, "0")
			if elapsed < time.Second || elapsed > 10*time.Second {
				t.Errorf("the call took %v, want about the 1 s timeout", elapsed)
			}
			if res.Receipt.DurationMS < 1000 {
				t.Errorf("duration_ms %d, want at least 1000", res.Receipt.DurationMS)
			}
			if watch {
				wait(t, observed, "the handler to see its context done")
			}
			if a := te.account(t, "alice"); a.Balance != te.credit || a.Held != 0 {
				t.Errorf("alice %+v", a)
			}
		})
	}
}

// Ensure that a gateway-side error after funds are held releases them
// (gateway.md §7): the call fails with gateway_error, nothing is billed, no
// hold or reservation is left.
func TestEngine_Call_GatewayError(t *testing.T) {
	t.Run("sub-mandate would widen its parent", func(t *testing.T) {
		t.Parallel()
		te := newEngine(t, allAgents, testHandlers(), mainMandate)
		res := te.call(t, gateway.CallInput{Mandate: "alice/main", Agent: "acme/orch-wide", Input: script()})
		wantReceipt(t, res.Receipt, holon.StatusFailed, holon.CodeGatewayError, false, "0")
		if te.ran("script") != 0 {
			t.Error("the orchestrator ran without a valid sub-mandate")
		}
		if res.Receipt.SubMandate != nil {
			t.Errorf("receipt names sub-mandate %s", *res.Receipt.SubMandate)
		}
		if _, err := te.eng.Mandate("alice/main." + res.Receipt.ID); err == nil {
			t.Error("the widening sub-mandate was stored")
		}
		if a := te.account(t, "alice"); a.Balance != te.credit || a.Held != 0 {
			t.Errorf("alice %+v", a)
		}
	})
	t.Run("settlement fails", func(t *testing.T) {
		t.Parallel()
		started, release := make(chan string, 1), make(chan struct{})
		h := testHandlers()
		h["hang"] = blockingHandler(started, release)
		te := newEngine(t, []string{agentHang}, h, mainMandate)
		done := make(chan *gateway.CallResult, 1)
		go func() {
			res, err := te.eng.Call(context.Background(), gateway.CallInput{Mandate: "alice/main", Agent: "acme/hang"})
			if err != nil {
				t.Errorf("Call: %v", err)
			}
			done <- res
		}()
		rid := wait(t, started, "the call to start")
		if a := te.account(t, "alice"); a.Held != eur("0.05") {
			t.Errorf("alice holds %s while the call runs, want 0.05", a.Held)
		}
		// Take the settlement's idempotency key, so that its journal entry
		// is refused at commit.
		key := "settle:" + rid
		te.foreign[key] = true
		if err := te.eng.Credit(context.Background(), key, "bob", eur("1.00")); err != nil {
			t.Fatal(err)
		}
		close(release)
		res := wait(t, done, "the call to end")
		if res == nil {
			t.FailNow()
		}
		wantReceipt(t, res.Receipt, holon.StatusFailed, holon.CodeGatewayError, false, "0")
		if len(res.Output) != 0 {
			t.Errorf("output %s returned for a call that was not billed", res.Output)
		}
		if a := te.account(t, "alice"); a.Balance != te.credit || a.Held != 0 {
			t.Errorf("alice %+v, want %s and nothing held", a, te.credit)
		}
		if st := te.mandate(t, "alice/main"); st.Spent != 0 || st.Reserved != 0 {
			t.Errorf("mandate spent %s reserved %s", st.Spent, st.Reserved)
		}
	})
}

// Ensure that the funds check counts what calls in flight hold: a payer
// whose balance covers a call, but not beside a running one's hold, is
// denied insufficient_funds.
func TestEngine_Call_InsufficientFundsCountsHolds(t *testing.T) {
	started, release := make(chan string, 1), make(chan struct{})
	h := testHandlers()
	h["hang"] = blockingHandler(started, release)
	te := openEngine(t, engineConfig{manifests: allAgents, handlers: h, mandates: []string{mainMandate}, credit: "0.12"})
	done := make(chan *gateway.CallResult, 1)
	go func() {
		res, err := te.eng.Call(context.Background(), gateway.CallInput{Mandate: "alice/main", Agent: "acme/hang"})
		if err != nil {
			t.Errorf("Call: %v", err)
		}
		done <- res
	}()
	wait(t, started, "the first call to start")
	res := te.call(t, gateway.CallInput{Mandate: "alice/main", Agent: "acme/echo"})
	wantReceipt(t, res.Receipt, holon.StatusDenied, holon.CodeInsufficientFunds, false, "0")
	close(release)
	if res := wait(t, done, "the first call to end"); res != nil {
		wantReceipt(t, res.Receipt, holon.StatusSucceeded, "", true, "0.05")
	}
	res = te.call(t, gateway.CallInput{Mandate: "alice/main", Agent: "acme/echo"})
	wantReceipt(t, res.Receipt, holon.StatusDenied, holon.CodeInsufficientFunds, false, "0")
	// 0.07 is left: a 0.05 call still goes through.
	res = te.call(t, gateway.CallInput{Mandate: "alice/main", Agent: "acme/hang"})
	wantReceipt(t, res.Receipt, holon.StatusSucceeded, "", true, "0.05")
}
