package contract_test

import (
	"os"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// baseAgent is a valid manifest that the admission, attenuation and billing
// tests overlay with the fields each case is about.
const baseAgent = `
id: acme/extract
version: 1.2.0
summary: Extracts tables.
license: proprietary
capabilities: [extraction.table]
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev}
`

// baseMandate is a valid root mandate that allows everything, up to 50.00 EUR.
const baseMandate = `
id: alice/test
issuer: alice
grantee: alice/assistant
currency: EUR
budget: {total: "50.00"}
allow: {agents: ["*"], capabilities: ["*"]}
`

// overlay merges overrides, a YAML mapping, into base: mappings merge key by
// key, any other value replaces the base's, and null removes the key.
func overlay(tb testing.TB, base, overrides string) []byte {
	tb.Helper()
	var b, o map[string]any
	if err := yaml.Unmarshal([]byte(base), &b); err != nil {
		tb.Fatalf("base: %v", err)
	}
	if err := yaml.Unmarshal([]byte(overrides), &o); err != nil {
		tb.Fatalf("overrides: %v\n%s", err, overrides)
	}
	mergeYAML(b, o)
	out, err := yaml.Marshal(b)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func mergeYAML(dst, src map[string]any) {
	for k, v := range src {
		sub, isMap := v.(map[string]any)
		cur, curIsMap := dst[k].(map[string]any)
		switch {
		case v == nil:
			delete(dst, k)
		case isMap && curIsMap:
			mergeYAML(cur, sub)
		default:
			dst[k] = v
		}
	}
}

// overlayManifest parses baseAgent overlaid with overrides, or fails the test.
func overlayManifest(tb testing.TB, overrides string) *contract.Manifest {
	tb.Helper()
	doc := overlay(tb, baseAgent, overrides)
	a, err := contract.ParseManifest(doc)
	if err != nil {
		tb.Fatalf("manifest: %v\n%s", err, doc)
	}
	return a
}

// overlayMandate parses baseMandate overlaid with overrides, or fails the test.
func overlayMandate(tb testing.TB, overrides string) *contract.Mandate {
	tb.Helper()
	return parseMandateDoc(tb, overlay(tb, baseMandate, overrides))
}

func parseMandateDoc(tb testing.TB, doc []byte) *contract.Mandate {
	tb.Helper()
	// Test documents may describe derived sub-mandates (with a parent),
	// which only the gateway's own reader accepts.
	m, err := contract.ParseStoredMandate(doc)
	if err != nil {
		tb.Fatalf("mandate: %v\n%s", err, doc)
	}
	return m
}

// readManifest parses a manifest under testdata/, or fails the test.
func readManifest(tb testing.TB, path string) *contract.Manifest {
	tb.Helper()
	b, err := os.ReadFile("../../testdata/" + path)
	if err != nil {
		tb.Fatal(err)
	}
	a, err := contract.ParseManifest(b)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return a
}

// readMandate parses a mandate under testdata/, or fails the test.
func readMandate(tb testing.TB, path string) *contract.Mandate {
	tb.Helper()
	b, err := os.ReadFile("../../testdata/" + path)
	if err != nil {
		tb.Fatal(err)
	}
	return parseMandateDoc(tb, b)
}

// amountOf parses a decimal string, or fails the test.
func amountOf(tb testing.TB, s string) journal.Amount {
	tb.Helper()
	a, err := journal.ParseAmount(s)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// amountPtr is amountOf for optional amounts: nil for "".
func amountPtr(tb testing.TB, s string) *journal.Amount {
	tb.Helper()
	if s == "" {
		return nil
	}
	a := amountOf(tb, s)
	return &a
}

// admissionNow is the time of every call that does not set its own.
var admissionNow = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// admission is one call to admit: a mandate (overrides of baseMandate, or m),
// an agent (overrides of baseAgent, then edit), what the platform knows, the
// budget state and the request; and what admission must decide.
type admission struct {
	name     string
	mandate  string
	m        *contract.Mandate
	agent    string
	edit     func(*contract.Manifest)
	facts    contract.AgentFacts
	spent    string
	reserved string
	maxCost  string
	req      contract.CallRequest

	verdict contract.Verdict
	reason  string
	worst   string // W, checked on allow, approve and approval_required
}

func (c admission) inputs(tb testing.TB) (*contract.Mandate, *contract.Manifest, contract.BudgetState, contract.CallRequest) {
	tb.Helper()
	m := c.m
	if m == nil {
		m = overlayMandate(tb, c.mandate)
	}
	a := overlayManifest(tb, c.agent)
	if c.edit != nil {
		c.edit(a)
	}
	var budget contract.BudgetState
	if c.spent != "" {
		budget.Spent = amountOf(tb, c.spent)
	}
	if c.reserved != "" {
		budget.Reserved = amountOf(tb, c.reserved)
	}
	req := c.req
	if req.Now.IsZero() {
		req.Now = admissionNow
	}
	req.MaxCost = amountPtr(tb, c.maxCost)
	return m, a, budget, req
}

func (c admission) check(tb testing.TB) contract.Decision {
	tb.Helper()
	m, a, budget, req := c.inputs(tb)
	return contract.CheckCall(m, a, c.facts, budget, req)
}

// expect compares a decision with the case's verdict, reason and W.
func (c admission) expect(tb testing.TB, d contract.Decision) {
	tb.Helper()
	if d.Verdict != c.verdict || d.Reason != c.reason {
		tb.Fatalf("got %s %q (%s), want %s %q", d.Verdict, d.Reason, d.Msg, c.verdict, c.reason)
	}
	if d.Verdict == contract.VerdictDeny && d.Msg == "" {
		tb.Errorf("deny %s without a message", d.Reason)
	}
	if c.verdict != contract.VerdictDeny || c.reason == holon.CodeApprovalRequired {
		if got := d.WorstCase.String(); got != c.worst {
			tb.Errorf("W = %s, want %s", got, c.worst)
		}
	}
}

// deriveFor derives the sub-mandate under which acme/orchestrate (passthrough,
// cap 1.00 EUR, calling acme/extract@^1) delegates, from baseMandate overlaid
// with parent.
func deriveFor(tb testing.TB, parent string) *contract.Mandate {
	tb.Helper()
	p := overlayMandate(tb, parent)
	orch := overlayManifest(tb, `
id: acme/orchestrate
version: 1.0.0
capabilities: [extraction.invoice]
calls: [{agent: "acme/extract@^1", max_cost: "0.50"}]
downstream: {mode: passthrough, cap: "1.00"}
`)
	sub, err := contract.DeriveSubMandate(p, orch, "r1", nil, p.Total())
	if err != nil {
		tb.Fatalf("derive: %v", err)
	}
	return sub
}

// Ensure that every row of mandate.md §3 is reached with its exact verdict
// and reason code.
func TestCheckCall(t *testing.T) {
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	depthZero := deriveFor(t, `delegation: {max_depth: 0}`)
	depthOne := deriveFor(t, `delegation: {max_depth: 1}`)
	allow, approve, deny := contract.VerdictAllow, contract.VerdictApprove, contract.VerdictDeny
	published := contract.AgentFacts{Published: true}
	capCall := contract.CallRequest{Capability: "extraction.table"}
	for _, c := range []admission{
		// 1. mandate_inactive
		{name: "revoked", mandate: `revoked: true`, verdict: deny, reason: holon.CodeMandateInactive},
		{name: "expires at now", mandate: `expires: 2026-06-01T12:00:00Z`, req: contract.CallRequest{Now: at},
			verdict: deny, reason: holon.CodeMandateInactive},
		{name: "expired before now", mandate: `expires: 2026-06-01T12:00:00Z`, req: contract.CallRequest{Now: at.Add(time.Second)},
			verdict: deny, reason: holon.CodeMandateInactive},
		{name: "expires after now", mandate: `expires: 2026-06-01T12:00:00Z`, req: contract.CallRequest{Now: at.Add(-time.Second)},
			verdict: allow, worst: "0.10"},

		// 2. denied_by_mandate
		{name: "agent matches deny.agents", mandate: `deny: {agents: ["acme/*"]}`,
			verdict: deny, reason: holon.CodeDeniedByMandate},
		{name: "agent version in a denied range", mandate: `deny: {agents: ["acme/extract@<2"]}`,
			verdict: deny, reason: holon.CodeDeniedByMandate},
		{name: "agent version outside a denied range", mandate: `deny: {agents: ["acme/extract@>=2"]}`,
			verdict: allow, worst: "0.10"},
		{name: "another capability of the agent is denied", mandate: `deny: {capabilities: ["scraping.*"]}`,
			agent: `capabilities: [extraction.table, scraping.web]`, req: capCall,
			verdict: deny, reason: holon.CodeDeniedByMandate},

		// 3. not_allowed
		{name: "by name, not in allow.agents", mandate: `allow: {agents: ["holon-labs/*"]}`,
			verdict: deny, reason: holon.CodeNotAllowed},
		{name: "by name, the capability allowed is not enough", mandate: `allow: {agents: ["holon-labs/*"], capabilities: ["extraction.*"]}`,
			verdict: deny, reason: holon.CodeNotAllowed},
		{name: "by capability, capability not allowed", mandate: `allow: {agents: null, capabilities: ["search.*"]}`, req: capCall,
			verdict: deny, reason: holon.CodeNotAllowed},
		{name: "by capability, allowed", mandate: `allow: {agents: null, capabilities: ["extraction.*"]}`, req: capCall,
			verdict: allow, worst: "0.10"},
		{name: "by capability, another account's published agent", mandate: `allow: {agents: null, capabilities: ["extraction.*"]}`,
			facts: published, req: capCall, verdict: deny, reason: holon.CodeNotAllowed},
		{name: "by capability, another account's published agent, also in allow.agents", mandate: `allow: {agents: ["acme/*"], capabilities: ["extraction.*"]}`,
			facts: published, req: capCall, verdict: deny, reason: holon.CodeNotAllowed},
		{name: "by capability, published agent with allow.published", mandate: `allow: {agents: null, capabilities: ["extraction.*"], published: true}`,
			facts: published, req: capCall, verdict: allow, worst: "0.10"},
		{name: "by capability, published agent of the mandate's issuer", mandate: `allow: {agents: null, capabilities: ["extraction.*"]}`,
			agent: `id: alice/extract`, facts: published, req: capCall, verdict: allow, worst: "0.10"},
		{name: "by capability, published agent of the root account", mandate: `allow: {agents: null, capabilities: ["extraction.*"]}`,
			facts: published, req: contract.CallRequest{Capability: "extraction.table", Account: "acme"}, verdict: allow, worst: "0.10"},
		{name: "by name, published agent without allow.published", mandate: `allow: {agents: ["acme/extract@^1"]}`,
			facts: published, verdict: allow, worst: "0.10"},

		// 4. requirement_not_met
		{name: "open required, agent proprietary", mandate: `require: {license: open}`,
			verdict: deny, reason: holon.CodeRequirementNotMet},
		{name: "open required, OSI license without source", mandate: `require: {license: open}`,
			agent: `{license: MIT, source: {repository: "https://github.com/acme/extract", commit: 4f1c2a9e}}`,
			edit:  func(a *contract.Manifest) { a.Source = nil }, verdict: deny, reason: holon.CodeRequirementNotMet},
		{name: "open required, OSI license with source", mandate: `require: {license: open}`,
			agent:   `{license: MIT, source: {repository: "https://github.com/acme/extract", commit: 4f1c2a9e}}`,
			verdict: allow, worst: "0.10"},
		{name: "evaluated required, not evaluated", mandate: `require: {evaluated: true}`,
			verdict: deny, reason: holon.CodeRequirementNotMet},
		{name: "evaluated required, evaluated", mandate: `require: {evaluated: true}`,
			facts: contract.AgentFacts{Evaluated: true}, verdict: allow, worst: "0.10"},
		{name: "success rate below, 20 runs", mandate: `require: {min_success_rate: "0.90"}`,
			facts: contract.AgentFacts{Runs: 20, Succeeded: 17}, verdict: deny, reason: holon.CodeRequirementNotMet},
		{name: "success rate just below, 1000 runs", mandate: `require: {min_success_rate: "0.90"}`,
			facts: contract.AgentFacts{Runs: 1000, Succeeded: 899}, verdict: deny, reason: holon.CodeRequirementNotMet},
		{name: "success rate exactly at the minimum", mandate: `require: {min_success_rate: "0.90"}`,
			facts: contract.AgentFacts{Runs: 20, Succeeded: 18}, verdict: allow, worst: "0.10"},
		{name: "success rate not applied under 20 runs", mandate: `require: {min_success_rate: "0.90"}`,
			facts: contract.AgentFacts{Runs: 19, Succeeded: 0}, verdict: allow, worst: "0.10"},

		// 5. data_policy
		{name: "retention longer", mandate: `data: {retention: 24h}`, agent: `data: {retention: 30d}`,
			verdict: deny, reason: holon.CodeDataPolicy},
		{name: "retention equal", mandate: `data: {retention: 24h}`, agent: `data: {retention: 1d}`,
			verdict: allow, worst: "0.10"},
		{name: "retention none under none", mandate: `data: {retention: none}`, agent: `data: {retention: none}`,
			verdict: allow, worst: "0.10"},
		{name: "retention not attested", mandate: `data: {retention: 30d}`, agent: `data: {regions: [eu], training: false}`,
			verdict: deny, reason: holon.CodeDataPolicy},
		{name: "no data policy at all", mandate: `data: {retention: 30d}`,
			verdict: deny, reason: holon.CodeDataPolicy},
		{name: "region outside", mandate: `data: {regions: [eu]}`, agent: `data: {regions: [eu, us]}`,
			verdict: deny, reason: holon.CodeDataPolicy},
		{name: "regions a subset", mandate: `data: {regions: [eu, us]}`, agent: `data: {regions: [us]}`,
			verdict: allow, worst: "0.10"},
		{name: "regions not attested", mandate: `data: {regions: [eu]}`, agent: `data: {retention: none}`,
			verdict: deny, reason: holon.CodeDataPolicy},
		{name: "trains when refused", mandate: `data: {training: false}`, agent: `data: {training: true}`,
			verdict: deny, reason: holon.CodeDataPolicy},
		{name: "training not attested when refused", mandate: `data: {training: false}`, agent: `data: {retention: none}`,
			verdict: deny, reason: holon.CodeDataPolicy},
		{name: "no training when refused", mandate: `data: {training: false}`, agent: `data: {training: false}`,
			verdict: allow, worst: "0.10"},
		{name: "training allowed", mandate: `data: {training: true}`, agent: `data: {training: true}`,
			verdict: allow, worst: "0.10"},

		// 6. no_fx_rate
		{name: "no rate for the agent's currency", agent: `pricing: {currency: USD}`,
			verdict: deny, reason: holon.CodeNoFxRate},
		{name: "a rate for another currency only", mandate: `fx: {GBP: "1.17"}`, agent: `pricing: {currency: USD}`,
			verdict: deny, reason: holon.CodeNoFxRate},
		{name: "a free agent that names no currency", agent: `pricing: {model: free, amount: null, currency: null}`,
			verdict: allow, worst: "0.00"},

		// 7. below_fixed_price
		{name: "per_run above max_cost", maxCost: "0.09",
			verdict: deny, reason: holon.CodeBelowFixedPrice},
		{name: "per_run converted above max_cost", mandate: `fx: {USD: "0.92"}`, agent: `pricing: {currency: USD}`, maxCost: "0.091",
			verdict: deny, reason: holon.CodeBelowFixedPrice},
		{name: "per_run converted equal to max_cost", mandate: `fx: {USD: "0.92"}`, agent: `pricing: {currency: USD}`, maxCost: "0.092",
			verdict: allow, worst: "0.092"},

		// 8. over_per_call
		{name: "W above per_call", mandate: `budget: {per_call: "1.00"}`, agent: `pricing: {amount: "1.000001"}`,
			verdict: deny, reason: holon.CodeOverPerCall},
		{name: "W equal to per_call", mandate: `budget: {per_call: "1.00"}`, agent: `pricing: {amount: "1.00"}`,
			verdict: allow, worst: "1.00"},

		// 9. over_budget
		{name: "spent + reserved + W just above total", mandate: `budget: {total: "10.00"}`, agent: `pricing: {amount: "1.000001"}`,
			spent: "4.00", reserved: "5.00", verdict: deny, reason: holon.CodeOverBudget},
		{name: "spent + reserved + W equal to total", mandate: `budget: {total: "10.00"}`, agent: `pricing: {amount: "1.00"}`,
			spent: "4.00", reserved: "5.00", verdict: allow, worst: "1.00"},

		// 10. delegation_depth
		{name: "delegated beyond max_depth", m: depthZero, req: contract.CallRequest{Delegated: true},
			verdict: deny, reason: holon.CodeDelegationDepth},
		{name: "delegated at max_depth 0", m: depthOne, req: contract.CallRequest{Delegated: true},
			verdict: allow, worst: "0.10"},

		// 11. approval
		{name: "W above approval.above", mandate: `approval: {above: "1.00"}`, agent: `pricing: {amount: "3.10"}`,
			verdict: approve, worst: "3.10"},
		{name: "W above approval.above, delegated", mandate: `approval: {above: "1.00"}`, agent: `pricing: {amount: "3.10"}`,
			req: contract.CallRequest{Delegated: true}, verdict: deny, reason: holon.CodeApprovalRequired, worst: "3.10"},
		{name: "W equal to approval.above", mandate: `approval: {above: "1.00"}`, agent: `pricing: {amount: "1.00"}`,
			verdict: allow, worst: "1.00"},
		{name: "above 0, a paid call", mandate: `approval: {above: "0"}`, agent: `pricing: {amount: "0.000001"}`,
			verdict: approve, worst: "0.000001"},
		{name: "above 0, a free agent", mandate: `approval: {above: "0"}`, agent: `pricing: {model: free, amount: null}`,
			verdict: allow, worst: "0.00"},
		{name: "approval without above", mandate: `approval: {}`, agent: `pricing: {amount: "40.00"}`,
			verdict: allow, worst: "40.00"},

		// allow
		{name: "allow", verdict: allow, worst: "0.10"},
	} {
		t.Run(c.name, func(t *testing.T) { c.expect(t, c.check(t)) })
	}
}

// Ensure that a call to a mandate that does not exist is denied as inactive.
func TestCheckCall_NoMandate(t *testing.T) {
	a := overlayManifest(t, "")
	for name, d := range map[string]contract.Decision{
		"CheckCall":    contract.CheckCall(nil, a, contract.AgentFacts{}, contract.BudgetState{}, contract.CallRequest{Now: admissionNow}),
		"CheckListing": contract.CheckListing(nil, a, contract.AgentFacts{}, contract.CallRequest{Now: admissionNow}),
	} {
		if d.Verdict != contract.VerdictDeny || d.Reason != holon.CodeMandateInactive {
			t.Errorf("%s: got %s %q, want deny mandate_inactive", name, d.Verdict, d.Reason)
		}
	}
}

// Ensure that the checks run in the order of mandate.md §3: for each adjacent
// pair, a call failing both is denied by the earlier, and by the later once
// the earlier failure is lifted.
func TestCheckCall_Order(t *testing.T) {
	delegated := contract.CallRequest{Delegated: true}
	for _, tt := range []struct {
		name          string
		both          admission
		lift          func(*admission) // lifts the earlier failure only
		first, second string
	}{
		{
			name:  "1 mandate_inactive before 2 denied_by_mandate",
			both:  admission{mandate: `{revoked: true, deny: {agents: ["acme/*"]}}`},
			lift:  func(c *admission) { c.mandate = `deny: {agents: ["acme/*"]}` },
			first: holon.CodeMandateInactive, second: holon.CodeDeniedByMandate,
		},
		{
			name:  "2 denied_by_mandate before 3 not_allowed",
			both:  admission{mandate: `{deny: {agents: ["acme/*"]}, allow: {agents: ["holon-labs/*"]}}`},
			lift:  func(c *admission) { c.mandate = `allow: {agents: ["holon-labs/*"]}` },
			first: holon.CodeDeniedByMandate, second: holon.CodeNotAllowed,
		},
		{
			name:  "3 not_allowed before 4 requirement_not_met",
			both:  admission{mandate: `{allow: {agents: ["holon-labs/*"]}, require: {license: open}}`},
			lift:  func(c *admission) { c.mandate = `require: {license: open}` },
			first: holon.CodeNotAllowed, second: holon.CodeRequirementNotMet,
		},
		{
			name:  "4 requirement_not_met before 5 data_policy",
			both:  admission{mandate: `{require: {evaluated: true}, data: {retention: none}}`},
			lift:  func(c *admission) { c.facts.Evaluated = true },
			first: holon.CodeRequirementNotMet, second: holon.CodeDataPolicy,
		},
		{
			name:  "5 data_policy before 6 no_fx_rate",
			both:  admission{mandate: `data: {regions: [eu]}`, agent: `pricing: {currency: USD}`},
			lift:  func(c *admission) { c.agent = `{pricing: {currency: USD}, data: {regions: [eu]}}` },
			first: holon.CodeDataPolicy, second: holon.CodeNoFxRate,
		},
		{
			name:  "6 no_fx_rate before 7 below_fixed_price",
			both:  admission{agent: `pricing: {currency: USD}`, maxCost: "0.01"},
			lift:  func(c *admission) { c.mandate = `fx: {USD: "0.92"}` },
			first: holon.CodeNoFxRate, second: holon.CodeBelowFixedPrice,
		},
		{
			name:  "7 below_fixed_price before 8 over_per_call",
			both:  admission{mandate: `budget: {per_call: "1.00"}`, agent: `pricing: {amount: "2.00"}`, maxCost: "1.50"},
			lift:  func(c *admission) { c.maxCost = "2.00" },
			first: holon.CodeBelowFixedPrice, second: holon.CodeOverPerCall,
		},
		{
			name:  "8 over_per_call before 9 over_budget",
			both:  admission{mandate: `budget: {per_call: "1.00"}`, agent: `pricing: {amount: "2.00"}`, spent: "49.50"},
			lift:  func(c *admission) { c.mandate = "" },
			first: holon.CodeOverPerCall, second: holon.CodeOverBudget,
		},
		{
			name:  "9 over_budget before 10 delegation_depth",
			both:  admission{m: deriveFor(t, `delegation: {max_depth: 0}`), spent: "0.95", req: delegated},
			lift:  func(c *admission) { c.spent = "" },
			first: holon.CodeOverBudget, second: holon.CodeDelegationDepth,
		},
		{
			name:  "10 delegation_depth before 11 approval_required",
			both:  admission{m: deriveFor(t, `{delegation: {max_depth: 0}, approval: {above: "0"}}`), req: delegated},
			lift:  func(c *admission) { c.m = deriveFor(t, `{delegation: {max_depth: 1}, approval: {above: "0"}}`) },
			first: holon.CodeDelegationDepth, second: holon.CodeApprovalRequired,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if d := tt.both.check(t); d.Verdict != contract.VerdictDeny || d.Reason != tt.first {
				t.Errorf("failing both: got %s %q (%s), want deny %q", d.Verdict, d.Reason, d.Msg, tt.first)
			}
			later := tt.both
			tt.lift(&later)
			if d := later.check(t); d.Verdict != contract.VerdictDeny || d.Reason != tt.second {
				t.Errorf("earlier lifted: got %s %q (%s), want deny %q", d.Verdict, d.Reason, d.Msg, tt.second)
			}
		})
	}
}

// Ensure that W is the manifest's worst case converted with fx and rounded
// up, passthrough adding downstream.cap, or max_cost when that is lower.
func TestCheckCall_WorstCase(t *testing.T) {
	const (
		perUnitUSD = `pricing: {model: per_unit, amount: "0.01", unit: page, max: "3.00", currency: USD}`
		perUnitEUR = `pricing: {model: per_unit, amount: "0.01", unit: page, max: "3.00"}`
	)
	allow, approve := contract.VerdictAllow, contract.VerdictApprove
	for _, c := range []admission{
		{name: "same currency", verdict: allow, worst: "0.10"},
		{name: "USD 0.10 at 0.92", mandate: `fx: {USD: "0.92"}`, agent: `pricing: {currency: USD}`,
			verdict: allow, worst: "0.092"},
		{name: "USD 0.000001 at 0.92 rounds up", mandate: `fx: {USD: "0.92"}`, agent: `pricing: {amount: "0.000001", currency: USD}`,
			verdict: allow, worst: "0.000001"},
		{name: "per_unit max 3.00 USD at 0.923456", mandate: `fx: {USD: "0.923456"}`, agent: perUnitUSD,
			verdict: allow, worst: "2.770368"},
		{name: "per_unit max 3.000001 USD at 0.923456 rounds up", mandate: `fx: {USD: "0.923456"}`,
			agent:   `pricing: {model: per_unit, amount: "0.01", unit: page, max: "3.000001", currency: USD}`,
			verdict: allow, worst: "2.770369"},
		{name: "quote max", agent: `pricing: {model: quote, amount: null, max: "0.75"}`,
			verdict: allow, worst: "0.75"},
		{name: "passthrough adds downstream.cap", agent: `
calls: [{capability: extraction.table, max_cost: "0.05"}]
downstream: {mode: passthrough, cap: "3.00"}`, verdict: allow, worst: "3.10"},
		{name: "passthrough in USD at 0.92", mandate: `fx: {USD: "0.92"}`, agent: `
pricing: {currency: USD}
calls: [{capability: extraction.table, max_cost: "0.05"}]
downstream: {mode: passthrough, cap: "3.00"}`, verdict: allow, worst: "2.852"},
		{name: "included adds nothing", agent: `
calls: [{capability: extraction.table, max_cost: "0.05"}]
downstream: {mode: included}`, verdict: allow, worst: "0.10"},
		{name: "per_unit up to 3.00 needs approval above 1.00", mandate: `approval: {above: "1.00"}`, agent: perUnitEUR,
			verdict: approve, worst: "3.00"},
		{name: "max_cost 0.20 replaces W: no approval", mandate: `approval: {above: "1.00"}`, agent: perUnitEUR, maxCost: "0.20",
			verdict: allow, worst: "0.20"},
		{name: "max_cost 0.20 replaces a converted W", mandate: `{approval: {above: "1.00"}, fx: {USD: "0.923456"}}`, agent: perUnitUSD, maxCost: "0.20",
			verdict: allow, worst: "0.20"},
		{name: "max_cost 0.20 replaces W: within per_call", mandate: `budget: {per_call: "0.20"}`, agent: perUnitEUR, maxCost: "0.20",
			verdict: allow, worst: "0.20"},
		{name: "max_cost 0.20 replaces W: within the budget left", mandate: `budget: {total: "1.00"}`, agent: perUnitEUR, maxCost: "0.20",
			spent: "0.80", verdict: allow, worst: "0.20"},
		{name: "max_cost above W does not raise it", mandate: `approval: {above: "1.00"}`, maxCost: "5.00",
			verdict: allow, worst: "0.10"},
		{name: "max_cost below a passthrough W", agent: `
calls: [{capability: extraction.table, max_cost: "0.05"}]
downstream: {mode: passthrough, cap: "3.00"}`, maxCost: "0.50", verdict: allow, worst: "0.50"},
		{name: "a W beyond any amount is bounded by max_cost", mandate: `fx: {USD: "1.1"}`,
			agent:   `pricing: {model: per_unit, amount: "1", unit: page, max: "9000000000000", currency: USD}`,
			maxCost: "0.20", verdict: allow, worst: "0.20"},
		{name: "a W beyond any amount is over budget", mandate: `fx: {USD: "1.1"}`,
			agent:   `pricing: {model: per_unit, amount: "1", unit: page, max: "9000000000000", currency: USD}`,
			verdict: contract.VerdictDeny, reason: holon.CodeOverBudget},
	} {
		t.Run(c.name, func(t *testing.T) { c.expect(t, c.check(t)) })
	}
}

// Ensure that the example documents of the spec admit as written: the
// invoice pipeline's W is 0.10 + 3.00 = 3.10, above approval 1.00.
func TestCheckCall_Example(t *testing.T) {
	m := readMandate(t, "mandates/bookkeeping-q4.yaml")
	a := readManifest(t, "manifests/invoice-pipeline.yaml")
	facts := contract.AgentFacts{Evaluated: true, Runs: 100, Succeeded: 95}
	for _, tt := range []struct {
		name    string
		maxCost string
		verdict contract.Verdict
		worst   string
	}{
		{name: "worst case", verdict: contract.VerdictApprove, worst: "3.10"},
		{name: "max_cost 0.50", maxCost: "0.50", verdict: contract.VerdictAllow, worst: "0.50"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := contract.CheckCall(m, a, facts, contract.BudgetState{},
				contract.CallRequest{Now: admissionNow, MaxCost: amountPtr(t, tt.maxCost)})
			if d.Verdict != tt.verdict || d.Reason != "" || d.WorstCase.String() != tt.worst {
				t.Errorf("got %s %q W %s, want %s W %s", d.Verdict, d.Reason, d.WorstCase, tt.verdict, tt.worst)
			}
		})
	}
}

// Ensure that CheckListing runs checks 1 to 8 and stops there: budget,
// depth and approval do not hide an agent from a listing.
func TestCheckListing(t *testing.T) {
	depthZero := deriveFor(t, `delegation: {max_depth: 0}`)
	allow, approve, deny := contract.VerdictAllow, contract.VerdictApprove, contract.VerdictDeny
	for _, tt := range []struct {
		admission
		call       contract.Verdict
		callReason string
	}{
		{admission: admission{name: "budget exhausted", mandate: `budget: {total: "10.00"}`, spent: "10.00",
			verdict: allow, worst: "0.10"}, call: deny, callReason: holon.CodeOverBudget},
		{admission: admission{name: "over per_call", mandate: `budget: {per_call: "0.05"}`,
			verdict: deny, reason: holon.CodeOverPerCall}, call: deny, callReason: holon.CodeOverPerCall},
		{admission: admission{name: "beyond max_depth", m: depthZero, req: contract.CallRequest{Delegated: true},
			verdict: allow, worst: "0.10"}, call: deny, callReason: holon.CodeDelegationDepth},
		{admission: admission{name: "needs approval", mandate: `approval: {above: "0"}`,
			verdict: allow, worst: "0.10"}, call: approve},
		{admission: admission{name: "revoked", mandate: `revoked: true`,
			verdict: deny, reason: holon.CodeMandateInactive}, call: deny, callReason: holon.CodeMandateInactive},
		{admission: admission{name: "no fx rate", agent: `pricing: {currency: USD}`,
			verdict: deny, reason: holon.CodeNoFxRate}, call: deny, callReason: holon.CodeNoFxRate},
		{admission: admission{name: "converted", mandate: `fx: {USD: "0.92"}`, agent: `pricing: {currency: USD}`,
			verdict: allow, worst: "0.092"}, call: allow},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, a, budget, req := tt.inputs(t)
			tt.expect(t, contract.CheckListing(m, a, tt.facts, req))
			if d := contract.CheckCall(m, a, tt.facts, budget, req); d.Verdict != tt.call || d.Reason != tt.callReason {
				t.Errorf("CheckCall: got %s %q, want %s %q", d.Verdict, d.Reason, tt.call, tt.callReason)
			}
		})
	}
}
