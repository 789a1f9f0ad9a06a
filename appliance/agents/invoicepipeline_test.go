package agents_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// demoInvoice is the three-line invoice of the run in spec/gateway.md §4.
const demoInvoice = "ACME Corp\nWidget, 2, 3.00\nGadget, 1, 12.00\nService hour, 4, 25.00\n"

// Ensure that invoice-pipeline replays the delegated run of spec/gateway.md
// §4: worst case 3.10; exactly one extraction.table call on the lines after
// the issuer and one holon-labs/company-lookup@^1 call on the issuer, in that
// order; and a bill of 0.192 EUR, own 0.10 (holon 0.01, holon-labs 0.09) and
// downstream 0.092 (0.012 for three rows, 0.08 for the lookup).
func TestInvoicePipeline_DemoRun(t *testing.T) {
	m := manifest(t, "holon-labs/invoice-pipeline")
	if w := m.WorstCase(); w != journal.MustParseAmount("3.10") {
		t.Errorf("worst case %s, want 3.10 (above a 1.00 approval threshold)", w)
	}

	d := newDelegator(t)
	res := d.run(m, textInput(t, demoInvoice))
	wantOutput(t, res, `{
		"issuer":{"name":"ACME Corp","found":true,"country":"US","registration":"Delaware 4471023"},
		"lines":[
			{"description":"Widget","quantity":2,"unit_price":"3.00","amount":"6.00"},
			{"description":"Gadget","quantity":1,"unit_price":"12.00","amount":"12.00"},
			{"description":"Service hour","quantity":4,"unit_price":"25.00","amount":"100.00"}],
		"total":"118.00"}`)

	calls := d.Calls()
	wantCalls(t, calls, "extraction.table", "holon-labs/company-lookup@^1")
	if got := calls[0].Agent; got != "holon-labs/text-tables@1.0.0" {
		t.Errorf("extraction.table ran %s, want holon-labs/text-tables@1.0.0", got)
	}
	if got, want := string(calls[0].Input), `{"text":"Widget, 2, 3.00\nGadget, 1, 12.00\nService hour, 4, 25.00\n"}`; got != want {
		t.Errorf("extraction.table input %s, want %s", got, want)
	}
	if got, want := string(calls[1].Input), `{"name":"ACME Corp"}`; got != want {
		t.Errorf("company-lookup input %s, want %s", got, want)
	}

	var downstream journal.Amount
	for i, want := range []string{"0.012", "0.08"} {
		if b := calls[i].Bill; !b.Billed || b.Price != journal.MustParseAmount(want) {
			t.Errorf("call %d (%s): bill %+v, want %s", i, calls[i].Agent, b, want)
		}
		downstream += calls[i].Bill.Price
	}
	own := contract.DecideBilling(m, res.Outcome, nil, journal.One)
	total, err := own.Price.Add(downstream)
	if err != nil {
		t.Fatal(err)
	}
	if own.Price.String() != "0.10" || downstream.String() != "0.092" || total.String() != "0.192" {
		t.Errorf("own %s + downstream %s = %s, want 0.10 + 0.092 = 0.192", own.Price, downstream, total)
	}
	if total > m.WorstCase() || downstream > *m.Downstream.Cap {
		t.Errorf("total %s or downstream %s beyond the worst case %s or the cap %s", total, downstream, m.WorstCase(), m.Downstream.Cap)
	}
	splits, err := journal.Split(own.Price, m.NS(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []journal.Share{{To: "holon", Amount: journal.MustParseAmount("0.01")}, {To: "holon-labs", Amount: journal.MustParseAmount("0.09")}}
	if !slices.Equal(splits, want) {
		t.Errorf("splits %v, want %v", splits, want)
	}
}

// Ensure that invoice-pipeline computes amounts exactly in micro-units, and
// reads descriptions with commas, an issuer the register does not know and
// an issuer after blank lines.
func TestInvoicePipeline(t *testing.T) {
	m := manifest(t, "holon-labs/invoice-pipeline")
	for _, tt := range []struct {
		name, text, want string
	}{
		{
			name: "micro-units add up exactly",
			text: "Globex GmbH\nBolt, 3, 0.000001\nNut, 1000000, 0.000001\nPin, 7, 0.1\n",
			want: `{"issuer":{"name":"Globex GmbH","found":true,"country":"DE","registration":"HRB 208731 B"},
				"lines":[
					{"description":"Bolt","quantity":3,"unit_price":"0.000001","amount":"0.000003"},
					{"description":"Nut","quantity":1000000,"unit_price":"0.000001","amount":"1.00"},
					{"description":"Pin","quantity":7,"unit_price":"0.10","amount":"0.70"}],
				"total":"1.700003"}`,
		},
		{
			name: "a description with commas and a quantity of zero",
			text: "\n\n  acme corp  \nSupport, premium, yearly, 0, 1200\n",
			want: `{"issuer":{"name":"ACME Corp","found":true,"country":"US","registration":"Delaware 4471023"},
				"lines":[{"description":"Support, premium, yearly","quantity":0,"unit_price":"1200.00","amount":"0.00"}],
				"total":"0.00"}`,
		},
		{
			name: "an unknown issuer is not found, as the invoice writes it",
			text: "Nobody Ltd\r\nConsulting, 2, 150.50\r\n",
			want: `{"issuer":{"name":"Nobody Ltd","found":false},
				"lines":[{"description":"Consulting","quantity":2,"unit_price":"150.50","amount":"301.00"}],
				"total":"301.00"}`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := newDelegator(t)
			wantOutput(t, d.run(m, textInput(t, tt.text)), tt.want)
			wantCalls(t, d.Calls(), "extraction.table", "holon-labs/company-lookup@^1")
		})
	}
}

// Ensure that invoice-pipeline fails with its declared, unbilled errors, and
// makes only the calls it needs: no table call without lines, no lookup for
// an invoice it cannot read.
func TestInvoicePipeline_Errors(t *testing.T) {
	m := manifest(t, "holon-labs/invoice-pipeline")
	denied := gateway.CallOutcome{Status: holon.StatusDenied, Error: holon.CodeOverBudget, Message: "the sub-mandate's budget is spent"}
	noRows := gateway.CallOutcome{OK: true, Status: holon.StatusSucceeded, Output: json.RawMessage(`{"rows":[]}`)}
	for _, tt := range []struct {
		name, text string
		fail       string               // the target the double answers in place of its agent
		answer     *gateway.CallOutcome // that answer; denied when nil
		code       string
		message    string
		calls      []string
	}{
		{name: "the issuer alone", text: "ACME Corp\n\n", code: "no_table_found", message: "no lines"},
		{name: "no table in the lines", text: "ACME Corp\nThank you for your business.\n",
			code: "no_table_found", message: "no_table_found", calls: []string{"extraction.table"}},
		{name: "the table call denied", text: demoInvoice, fail: "extraction.table",
			code: "no_table_found", message: "denied (over_budget)", calls: []string{"extraction.table"}},
		{name: "a table of no rows", text: demoInvoice, fail: "extraction.table", answer: &noRows,
			code: "no_table_found", message: "no rows", calls: []string{"extraction.table"}},
		{name: "a row of two cells", text: "ACME Corp\nTotal, 118.00\n",
			code: "invalid_line", message: "row 1: 2 cells", calls: []string{"extraction.table"}},
		{name: "a quantity that is not whole", text: "ACME Corp\nWidget, 2, 3.00\nGadget, 1.5, 12.00\n",
			code: "invalid_line", message: `row 2: quantity "1.5"`, calls: []string{"extraction.table"}},
		{name: "a negative quantity", text: "ACME Corp\nRefund, -1, 3.00\n",
			code: "invalid_line", message: `quantity "-1"`, calls: []string{"extraction.table"}},
		{name: "a price with a currency sign", text: "ACME Corp\nWidget, 2, €3.00\n",
			code: "invalid_line", message: "row 1: unit price", calls: []string{"extraction.table"}},
		{name: "a price with seven decimals", text: "ACME Corp\nWidget, 2, 0.0000001\n",
			code: "invalid_line", message: "at most 6 decimals", calls: []string{"extraction.table"}},
		{name: "no description", text: "ACME Corp\n, 2, 3.00\n",
			code: "invalid_line", message: "no description", calls: []string{"extraction.table"}},
		{name: "an amount beyond any", text: "ACME Corp\nWidget, 9223372036854775807, 2.00\n",
			code: "invalid_line", message: "row 1", calls: []string{"extraction.table"}},
		{name: "a total beyond any", text: "ACME Corp\nA, 1, 9000000000000\nB, 1, 9000000000000\n",
			code: "invalid_line", message: "row 2", calls: []string{"extraction.table"}},
		{name: "the lookup denied", text: demoInvoice, fail: "holon-labs/company-lookup@^1",
			code: "lookup_failed", message: "denied (over_budget)", calls: []string{"extraction.table", "holon-labs/company-lookup@^1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := newDelegator(t)
			answer := denied
			if tt.answer != nil {
				answer = *tt.answer
			}
			d.fail = func(target gateway.Target) (gateway.CallOutcome, bool) {
				return answer, tt.fail != "" && targetName(target) == tt.fail
			}
			res := d.run(m, textInput(t, tt.text))
			wantError(t, res, tt.code)
			if !strings.Contains(res.Message, tt.message) {
				t.Errorf("message %q does not mention %q", res.Message, tt.message)
			}
			if bill := contract.DecideBilling(m, res.Outcome, nil, journal.One); bill.Billed {
				t.Errorf("billed %+v", bill)
			}
			wantCalls(t, d.Calls(), tt.calls...)
		})
	}
}

// Ensure that invoice-pipeline fails as a crash (agent_error, never billed)
// when an implementer of extraction.table answers in another shape.
func TestInvoicePipeline_ForeignTable(t *testing.T) {
	m := manifest(t, "holon-labs/invoice-pipeline")
	d := newDelegator(t)
	d.fail = func(target gateway.Target) (gateway.CallOutcome, bool) {
		return gateway.CallOutcome{OK: true, Status: holon.StatusSucceeded, Output: json.RawMessage(`{"rows":"Widget"}`)},
			target.Capability == "extraction.table"
	}
	res := d.run(m, textInput(t, demoInvoice))
	if res.Outcome.Kind != contract.OutcomeCrash {
		t.Fatalf("outcome %v %q (%s), want a crash", res.Outcome.Kind, res.Outcome.Code, res.Message)
	}
	wantCalls(t, d.Calls(), "extraction.table")
}

// Ensure that invoice-pipeline, run without a delegator (as an agent that
// declared no calls would be), reports that its table call was refused.
func TestInvoicePipeline_NoDelegator(t *testing.T) {
	m := manifest(t, "holon-labs/invoice-pipeline")
	res := devRuntime().Run(t.Context(), &gateway.Invocation{Manifest: m, Input: json.RawMessage(textInput(t, demoInvoice)), Receipt: "r1"})
	wantError(t, res, "no_table_found")
	if !strings.Contains(res.Message, holon.CodeNotDeclared) {
		t.Errorf("message %q does not mention %s", res.Message, holon.CodeNotDeclared)
	}
}

// targetName is a target's capability or agent reference.
func targetName(t gateway.Target) string {
	if t.Capability != "" {
		return t.Capability
	}
	return t.Agent
}

// wantCalls checks the downstream calls, in order, by target.
func wantCalls(t *testing.T, calls []delegatedCall, want ...string) {
	t.Helper()
	var got []string
	for _, c := range calls {
		got = append(got, targetName(c.Target))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
}
