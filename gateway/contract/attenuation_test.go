package contract_test

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// parentMandate sets every field that attenuation compares.
const parentMandate = `
id: alice/parent
issuer: alice
grantee: alice/assistant
currency: EUR
expires: 2027-01-01T00:00:00Z
budget: {total: "50.00", per_call: "5.00"}
approval: {above: "1.00"}
allow:
  agents: ["ns/a@^1.2", "holon-labs/*"]
  capabilities: ["a.*", "search.web"]
  published: false
deny: {agents: ["shady/*"], capabilities: ["x.y"]}
require: {license: open, evaluated: true, min_success_rate: "0.90"}
data: {retention: 24h, regions: [eu, us], training: false}
fx: {USD: "0.92"}
delegation: {max_depth: 2}
`

// childMandate is within parentMandate, with 20.00 left, in every field.
const childMandate = `
id: alice/parent.r1
parent: alice/parent
issuer: alice/assistant
grantee: holon-labs/orchestrate@1.0.0
currency: EUR
expires: 2027-01-01T00:00:00Z
budget: {total: "10.00", per_call: "5.00"}
approval: {above: "1.00"}
allow:
  agents: ["ns/a@^1.2", "holon-labs/*"]
  capabilities: ["a.b", "search.web"]
  published: false
deny: {agents: ["shady/*"], capabilities: ["x.y"]}
require: {license: open, evaluated: true, min_success_rate: "0.90"}
data: {retention: 24h, regions: [eu, us], training: false}
fx: {USD: "0.92"}
delegation: {max_depth: 1}
`

// Ensure that CheckAttenuation returns exactly the fields in which a child
// widens its parent, and nil for a child within it.
func TestCheckAttenuation(t *testing.T) {
	for _, tt := range []struct {
		name   string
		parent string // overrides of parentMandate
		child  string // overrides of childMandate
		left   string // what the parent has left; 20.00 when ""
		want   []string
	}{
		{name: "equal in every field", child: `{budget: {total: "20.00"}, allow: {capabilities: ["a.*", "search.web"]}, delegation: {max_depth: 1}}`},
		{name: "narrower in every field", child: `
budget: {total: "1.00", per_call: "0.50"}
approval: {above: "0"}
allow: {agents: ["ns/a@~1.2.3"], capabilities: ["a.b.c"]}
deny: {agents: ["shady/*", "evil/*"], capabilities: ["x.*"]}
require: {min_success_rate: "0.95"}
data: {retention: none, regions: [eu]}
delegation: {max_depth: 0}
expires: 2026-12-31T23:59:59Z`},

		{name: "issuer", child: `issuer: bob`, want: []string{"issuer"}},
		{name: "currency", child: `currency: GBP`, want: []string{"currency"}},
		{name: "fx rate changed", child: `fx: {USD: "0.91"}`, want: []string{"fx"}},
		{name: "fx rate added", child: `fx: {GBP: "1.17"}`, want: []string{"fx"}},
		{name: "fx removed", child: `fx: null`, want: []string{"fx"}},

		{name: "budget.total above what is left", child: `budget: {total: "20.000001"}`, want: []string{"budget.total"}},
		{name: "budget.total equal to what is left", child: `budget: {total: "20.00"}`},
		{name: "budget.total within the parent's total but above what is left", child: `budget: {total: "10.00"}`, left: "9.99",
			want: []string{"budget.total"}},
		{name: "budget.per_call higher", child: `budget: {per_call: "5.01"}`, want: []string{"budget.per_call"}},
		{name: "budget.per_call removed", child: `budget: {per_call: null}`, want: []string{"budget.per_call"}},
		{name: "budget.per_call under a parent without one", parent: `budget: {per_call: null}`, child: `budget: {per_call: "99.00"}`},

		// Windows: a child never allows more in a window than its parent has left in it.
		{name: "window: a total within what the parent's window has left", parent: `budget: {window: day, per_window: "10.00"}`,
			child: `budget: {total: "8.00"}`, left: "8.00"},
		{name: "window: a total above what the parent's window has left", parent: `budget: {total: null, window: day, per_window: "10.00"}`,
			child: `budget: {total: "8.01"}`, left: "8.00", want: []string{"budget.total"}},
		{name: "window: renews with the parent, within it", parent: `budget: {total: null, window: day, per_window: "10.00", timezone: Europe/Paris}`,
			child: `budget: {total: null, window: day, per_window: "5.00", timezone: Europe/Paris}`, left: "8.00"},
		{name: "window: renews with the parent, above its per_window", parent: `budget: {total: null, window: day, per_window: "10.00"}`,
			child: `budget: {total: null, window: day, per_window: "10.01"}`, left: "20.00", want: []string{"budget.per_window"}},
		{name: "window: renews with the parent, above what its window has left", parent: `budget: {total: null, window: day, per_window: "10.00"}`,
			child: `budget: {total: null, window: day, per_window: "6.00"}`, left: "5.99", want: []string{"budget.per_window"}},
		{name: "window: no total under a parent with one", parent: `budget: {window: day, per_window: "10.00"}`,
			child: `budget: {total: null, window: day, per_window: "1.00"}`, want: []string{"budget.total"}},
		{name: "window: no total under a parent that does not renew", child: `budget: {total: null, window: day, per_window: "1.00"}`,
			want: []string{"budget.total"}},
		{name: "window: no total, another time zone", parent: `budget: {total: null, window: day, per_window: "10.00", timezone: Europe/Paris}`,
			child: `budget: {total: null, window: day, per_window: "1.00", timezone: America/New_York}`, want: []string{"budget.total"}},
		{name: "window: no total, another kind of window", parent: `budget: {total: null, window: day, per_window: "10.00"}`,
			child: `budget: {total: null, window: week, per_window: "1.00"}`, want: []string{"budget.total"}},
		{name: "window: a total bounds a child whose windows differ", parent: `budget: {total: null, window: month, per_window: "10.00"}`,
			child: `budget: {total: "2.00", window: day, per_window: "1.00"}`, left: "2.00"},

		{name: "allow.agents ^1 under ^1.2", child: `allow: {agents: ["ns/a@^1"]}`, want: []string{"allow.agents"}},
		{name: "allow.agents ^1.2 under ^1", parent: `allow: {agents: ["ns/a@^1"]}`, child: `allow: {agents: ["ns/a@^1.2"]}`},
		{name: "allow.agents any version under ^1.2", child: `allow: {agents: ["ns/a"]}`, want: []string{"allow.agents"}},
		{name: "allow.agents a namespace under one agent", child: `allow: {agents: ["ns/*"]}`, want: []string{"allow.agents"}},
		{name: "allow.agents one agent under a namespace", child: `allow: {agents: ["holon-labs/sec-company@^1"]}`},
		{name: "allow.agents another agent", child: `allow: {agents: ["ns/b@^1.2"]}`, want: []string{"allow.agents"}},
		{name: "allow.agents everything", child: `allow: {agents: ["*"]}`, want: []string{"allow.agents"}},
		{name: "allow.capabilities a.b under a.*", child: `allow: {capabilities: ["a.b"]}`},
		{name: "allow.capabilities a.* under a.b", parent: `allow: {capabilities: ["a.b"]}`, child: `allow: {capabilities: ["a.*"]}`,
			want: []string{"allow.capabilities"}},
		{name: "allow.capabilities search.* under search.web", child: `allow: {capabilities: ["search.*"]}`,
			want: []string{"allow.capabilities"}},
		{name: "allow.capabilities everything", child: `allow: {capabilities: ["*"]}`, want: []string{"allow.capabilities"}},
		{name: "allow.published true under false", child: `allow: {published: true}`, want: []string{"allow.published"}},
		{name: "allow.published false under true", parent: `allow: {published: true}`},
		{name: "allow.published true under true", parent: `allow: {published: true}`, child: `allow: {published: true}`},

		{name: "deny.agents missing the parent's", child: `deny: {agents: ["evil/*"]}`, want: []string{"deny.agents"}},
		{name: "deny.agents narrower than the parent's", child: `deny: {agents: ["shady/one"]}`, want: []string{"deny.agents"}},
		{name: "deny.capabilities missing the parent's", child: `deny: {capabilities: []}`, want: []string{"deny.capabilities"}},
		{name: "deny.capabilities replaced by another", child: `deny: {capabilities: ["z.z"]}`, want: []string{"deny.capabilities"}},
		{name: "deny removed", child: `deny: null`, want: []string{"deny.agents", "deny.capabilities"}},

		{name: "require.license any under open", child: `require: {license: any}`, want: []string{"require.license"}},
		{name: "require.evaluated dropped", child: `require: {evaluated: false}`, want: []string{"require.evaluated"}},
		{name: "require.min_success_rate lower", child: `require: {min_success_rate: "0.89"}`, want: []string{"require.min_success_rate"}},
		{name: "require.min_success_rate removed", child: `require: {min_success_rate: null}`, want: []string{"require.min_success_rate"}},
		{name: "require removed", child: `require: null`,
			want: []string{"require.license", "require.evaluated", "require.min_success_rate"}},

		{name: "data.retention longer", child: `data: {retention: 25h}`, want: []string{"data.retention"}},
		{name: "data.retention equal in other units", child: `data: {retention: 1d}`},
		{name: "data.retention removed", child: `data: {retention: null}`, want: []string{"data.retention"}},
		{name: "data.regions outside", child: `data: {regions: [eu, asia]}`, want: []string{"data.regions"}},
		{name: "data.regions removed", child: `data: {regions: null}`, want: []string{"data.regions"}},
		{name: "data.training allowed", child: `data: {training: true}`, want: []string{"data.training"}},
		{name: "data.training removed", child: `data: {training: null}`, want: []string{"data.training"}},
		{name: "data removed", child: `data: null`, want: []string{"data.retention", "data.regions", "data.training"}},

		{name: "approval.above raised", child: `approval: {above: "1.01"}`, want: []string{"approval.above"}},
		{name: "approval.above removed", child: `approval: {above: null}`, want: []string{"approval.above"}},
		{name: "approval removed", child: `approval: null`, want: []string{"approval.above"}},
		{name: "approval under a parent without one", parent: `approval: null`, child: `approval: null`},

		{name: "delegation.max_depth equal", child: `delegation: {max_depth: 2}`, want: []string{"delegation.max_depth"}},
		{name: "delegation.max_depth higher", child: `delegation: {max_depth: 3}`, want: []string{"delegation.max_depth"}},
		{name: "delegation.max_depth defaulted to the parent's", child: `delegation: null`, want: []string{"delegation.max_depth"}},
		{name: "delegation.max_depth -1 under 0", parent: `delegation: {max_depth: 0}`, child: `delegation: {max_depth: -1}`},

		{name: "expires later", child: `expires: 2027-01-01T00:00:01Z`, want: []string{"expires"}},
		{name: "expires removed", child: `expires: null`, want: []string{"expires"}},
		{name: "expires under a parent that never expires", parent: `expires: null`, child: `expires: 2030-01-01T00:00:00Z`},

		{name: "several fields at once", child: `
issuer: bob
budget: {total: "20.01", per_call: null}
allow: {agents: ["*"], published: true}
deny: {capabilities: null}
require: {evaluated: false}
data: {regions: [asia], training: true}
approval: null
delegation: {max_depth: 2}
expires: null`, want: []string{
			"issuer", "budget.total", "budget.per_call", "allow.agents", "allow.published", "deny.capabilities",
			"require.evaluated", "data.regions", "data.training", "approval.above", "delegation.max_depth", "expires",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent := parseMandateDoc(t, overlay(t, parentMandate, tt.parent))
			child := parseMandateDoc(t, overlay(t, childMandate, tt.child))
			left := "20.00"
			if tt.left != "" {
				left = tt.left
			}
			got := contract.CheckAttenuation(child, parent, amountOf(t, left))
			if tt.want == nil {
				if got != nil {
					t.Fatalf("got %q, want nil", got)
				}
				return
			}
			got, want := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}

// orchestrator is an agent that delegates: a capability and a named agent,
// paid through passthrough up to 3.00 EUR.
const orchestrator = `
id: holon-labs/pipeline
version: 0.4.0
capabilities: [extraction.invoice]
calls:
  - {capability: extraction.table, max_cost: "0.05"}
  - {agent: "holon-labs/sec-company@^1", max_cost: "0.02"}
downstream: {mode: passthrough, cap: "3.00"}
`

// Ensure that DeriveSubMandate builds the sub-mandate of gateway.md §3 and
// that it never widens its parent.
func TestDeriveSubMandate(t *testing.T) {
	parent := readMandate(t, "mandates/bookkeeping-q4.yaml")
	a := readManifest(t, "manifests/invoice-pipeline.yaml")
	sub, err := contract.DeriveSubMandate(parent, a, "r4", nil, amountOf(t, "50.00"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		field     string
		got, want any
	}{
		{"id", sub.ID, "alice/bookkeeping-q4.r4"},
		{"parent", sub.Parent, "alice/bookkeeping-q4"},
		{"issuer", sub.Issuer, "alice/assistant"},
		{"grantee", sub.Grantee, "holon-labs/invoice-pipeline@0.4.0"},
		{"currency", sub.Currency, "EUR"},
		{"budget.total", sub.Total().String(), "3.00"},
		{"allow.agents", sub.Allow.Agents, []string{"holon-labs/sec-company@^1"}},
		{"allow.capabilities", sub.Allow.Capabilities, []string{"extraction.table"}},
		{"deny", *sub.Deny, *parent.Deny},
		{"require", *sub.Require, *parent.Require},
		{"data", *sub.Data, *parent.Data},
		{"approval.above", sub.Approval.Above.String(), "1.00"},
		{"fx", sub.FX, map[string]journal.Rate{"USD": journal.MustParseRate("0.92")}},
		{"delegation.max_depth", sub.MaxDepth(), 1},
		{"expires", sub.Expires.Equal(*parent.Expires), true},
		{"revoked", sub.Revoked, false},
	} {
		if !reflect.DeepEqual(f.got, f.want) {
			t.Errorf("%s = %v, want %v", f.field, f.got, f.want)
		}
	}
	if wide := contract.CheckAttenuation(sub, parent, amountOf(t, "50.00")); wide != nil {
		t.Errorf("the sub-mandate widens its parent in %q", wide)
	}
	// The sub-mandate is a copy: changing it leaves the parent as it was.
	sub.FX["GBP"] = journal.One
	if !maps.Equal(parent.FX, map[string]journal.Rate{"USD": journal.MustParseRate("0.92")}) {
		t.Errorf("parent fx changed through the sub-mandate: %v", parent.FX)
	}
}

// Ensure that the sub-mandate's budget is downstream.cap (passthrough) or the
// agent's own worst case (included), converted with fx and rounded up; with
// max_cost, what it leaves after the agent's own worst case, never less than
// zero (passthrough), or at most max_cost (included); and that max_depth is
// the parent's less one.
func TestDeriveSubMandate_Budget(t *testing.T) {
	for _, tt := range []struct {
		name    string
		parent  string // overrides of baseMandate
		agent   string // overrides of orchestrator
		maxCost string
		left    string // what the parent has left; 50.00 when ""
		total   string
		depth   int
	}{
		{name: "passthrough: the cap", total: "3.00", depth: 1},
		{name: "passthrough: the cap in USD at 0.92", parent: `fx: {USD: "0.92"}`, agent: `pricing: {currency: USD}`,
			total: "2.76", depth: 1},
		{name: "passthrough: the cap rounds up", parent: `fx: {USD: "0.92"}`,
			agent: `{pricing: {currency: USD}, downstream: {cap: "3.000001"}}`, total: "2.760001", depth: 1},
		{name: "included: the agent's own price", agent: `{pricing: {amount: "0.50"}, downstream: {mode: included, cap: null}}`,
			total: "0.50", depth: 1},
		{name: "included: the agent's own worst case, converted", parent: `fx: {USD: "0.92"}`,
			agent: `{pricing: {model: per_unit, amount: "0.01", unit: page, max: "2.00", currency: USD}, downstream: {mode: included, cap: null}}`,
			total: "1.84", depth: 1},
		{name: "max_cost leaves less than the cap", maxCost: "1.00", total: "0.90", depth: 1},
		{name: "max_cost leaves more than the cap", maxCost: "5.00", total: "3.00", depth: 1},
		{name: "max_cost leaves exactly the cap", maxCost: "3.10", total: "3.00", depth: 1},
		{name: "max_cost equal to the own price leaves nothing", maxCost: "0.10", total: "0.00", depth: 1},
		{name: "max_cost below the own price leaves nothing", maxCost: "0.05", total: "0.00", depth: 1},
		{name: "max_cost after a converted own price", parent: `fx: {USD: "0.92"}`, agent: `pricing: {currency: USD}`,
			maxCost: "1.00", total: "0.908", depth: 1},
		{name: "included: max_cost caps the agent's own price", agent: `{pricing: {model: per_unit, amount: "0.01", unit: page, max: "3.00"}, downstream: {mode: included, cap: null}}`,
			maxCost: "0.20", left: "1.00", total: "0.20", depth: 1},
		{name: "included: max_cost above the agent's own price", agent: `{pricing: {amount: "0.50"}, downstream: {mode: included, cap: null}}`,
			maxCost: "2.00", total: "0.50", depth: 1},
		{name: "max_depth 2 gives 1", parent: `delegation: {max_depth: 2}`, total: "3.00", depth: 1},
		{name: "max_depth 0 gives -1", parent: `delegation: {max_depth: 0}`, total: "3.00", depth: -1},
		{name: "max_depth 5 gives 4", parent: `delegation: {max_depth: 5}`, total: "3.00", depth: 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent := overlayMandate(t, tt.parent)
			a := overlayManifest(t, string(overlay(t, orchestrator, tt.agent)))
			left := amountOf(t, "50.00")
			if tt.left != "" {
				left = amountOf(t, tt.left)
			}
			sub, err := contract.DeriveSubMandate(parent, a, "r9", amountPtr(t, tt.maxCost), left)
			if err != nil {
				t.Fatal(err)
			}
			if got := sub.Total().String(); got != tt.total {
				t.Errorf("budget.total = %s, want %s", got, tt.total)
			}
			if got := sub.MaxDepth(); got != tt.depth {
				t.Errorf("max_depth = %d, want %d", got, tt.depth)
			}
			if wide := contract.CheckAttenuation(sub, parent, left); wide != nil {
				t.Errorf("the sub-mandate widens its parent in %q", wide)
			}
		})
	}
}

// Ensure that DeriveSubMandate refuses, with gateway_error, a sub-mandate
// that would widen its parent, and with not_declared an agent without calls.
func TestDeriveSubMandate_Refused(t *testing.T) {
	for _, tt := range []struct {
		name   string
		parent string // overrides of baseMandate
		agent  string // overrides of orchestrator
		left   string
		code   string
	}{
		{name: "a declared capability outside allow.capabilities", parent: `allow: {agents: ["holon-labs/*"], capabilities: ["search.*"]}`,
			code: holon.CodeGatewayError},
		{name: "a declared agent outside allow.agents", parent: `allow: {agents: ["acme/*"], capabilities: ["extraction.*"]}`,
			code: holon.CodeGatewayError},
		{name: "a declared range wider than the allowed one", parent: `allow: {agents: ["holon-labs/sec-company@^1.2"], capabilities: ["extraction.*"]}`,
			code: holon.CodeGatewayError},
		{name: "the cap above what the parent has left", left: "2.99", code: holon.CodeGatewayError},
		{name: "no fx rate for the agent's currency", agent: `pricing: {currency: USD}`, code: holon.CodeGatewayError},
		{name: "no calls", agent: `{calls: null, downstream: null}`, code: holon.CodeNotDeclared},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent := overlayMandate(t, tt.parent)
			a := overlayManifest(t, string(overlay(t, orchestrator, tt.agent)))
			left := "50.00"
			if tt.left != "" {
				left = tt.left
			}
			sub, err := contract.DeriveSubMandate(parent, a, "r9", nil, amountOf(t, left))
			if err == nil {
				t.Fatalf("derived %+v, want %s", sub, tt.code)
			}
			if got := holon.ErrorCode(err); got != tt.code {
				t.Errorf("code %s (%v), want %s", got, err, tt.code)
			}
		})
	}
}

// Ensure that a downstream call fits a declared calls entry only when it
// names the capability or the agent (in range) and its worst case is within
// that entry's max_cost; not_declared otherwise.
func TestManifest_Slot(t *testing.T) {
	orch := overlayManifest(t, string(overlay(t, orchestrator, `
calls:
  - {capability: extraction.table, max_cost: "0.05"}
  - {capability: "search.*", max_cost: "0.20"}
  - {agent: "holon-labs/sec-company@^1", max_cost: "0.02"}
  - {agent: "acme/geo@^1", max_cost: "0.02"}
  - {agent: "acme/geo", max_cost: "0.30"}
`)))
	agent := func(id, version, caps string) *contract.Manifest {
		return overlayManifest(t, "{id: "+id+", version: "+version+", capabilities: "+caps+"}")
	}
	table := agent("acme/extract", "1.2.0", "[extraction.table]")
	search := agent("acme/search", "2.0.0", "[search.web, extraction.table]")
	sec1 := agent("holon-labs/sec-company", "1.3.0", "[finance.filings]")
	sec2 := agent("holon-labs/sec-company", "2.0.0", "[finance.filings]")
	geo := agent("acme/geo", "1.0.0", "[geo.lookup]")
	for _, tt := range []struct {
		name       string
		b          *contract.Manifest
		capability string
		worst      string
		slot       string // the entry's max_cost; "" for not_declared
	}{
		{name: "capability, within max_cost", b: table, capability: "extraction.table", worst: "0.05", slot: "0.05"},
		{name: "capability, above max_cost", b: table, capability: "extraction.table", worst: "0.050001"},
		{name: "capability under a prefix entry", b: search, capability: "search.web", worst: "0.20", slot: "0.20"},
		{name: "capability not declared", b: table, capability: "extraction.invoice", worst: "0.01"},
		{name: "capability the agent does not have", b: sec1, capability: "extraction.table", worst: "0.01"},
		{name: "agent in range", b: sec1, worst: "0.02", slot: "0.02"},
		{name: "agent in range, above max_cost", b: sec1, worst: "0.021"},
		{name: "agent out of range", b: sec2, worst: "0.01"},
		{name: "agent not declared", b: table, worst: "0.01"},
		{name: "agent: the first entry with room", b: geo, worst: "0.10", slot: "0.30"},
		{name: "agent: the first entry that fits", b: geo, worst: "0.01", slot: "0.02"},
		{name: "agent named by a declared capability", b: search, capability: "", worst: "0.01"},
		{name: "capability of an agent declared by name", b: geo, capability: "geo.lookup", worst: "0.01"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := orch.Slot(tt.b, tt.capability, amountOf(t, tt.worst))
			if tt.slot == "" {
				if code := holon.ErrorCode(err); err == nil || code != holon.CodeNotDeclared {
					t.Fatalf("got %s, %v; want not_declared", got, err)
				}
				if !strings.Contains(err.Error(), orch.Ref()) {
					t.Errorf("the error %q does not name the orchestrator", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tt.slot {
				t.Errorf("slot max_cost %s, want %s", got, tt.slot)
			}
		})
	}
}
