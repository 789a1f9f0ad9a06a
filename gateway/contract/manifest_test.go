package contract_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// baseManifest is a small valid manifest that the table tests edit.
const baseManifest = `
id: acme/extract
version: 1.0.0
summary: Extracts the total of an invoice.
license: MIT
source: { repository: "https://github.com/acme/extract", commit: "4f1c2a9e" }
capabilities: [extraction.invoice]
interface:
  input: { type: object, required: [file], properties: { file: { type: string } } }
  output: { type: object, required: [total], properties: { total: { type: string } } }
  errors:
    no_table_found: { billed: false, description: No table in the document. }
pricing: { model: per_run, amount: "0.10", currency: EUR }
runtime: { kind: mcp, endpoint: "https://agents.acme.example/mcp", tool: extract }
`

// Ensure that the spec's example manifest parses, with every field read.
func TestParseManifest_Valid(t *testing.T) {
	m := mustParseManifest(t, readTestdata(t, "manifests/invoice-pipeline.yaml"))

	if got, want := m.Ref(), "holon-labs/invoice-pipeline@0.4.0"; got != want {
		t.Errorf("Ref() = %q, want %q", got, want)
	}
	// Ref follows the fields, even when they change after parsing.
	c := *m
	c.ID, c.Version = "holon-labs/invoice-pipelin", "e@0.4.0"
	if got, want := c.Ref(), "holon-labs/invoice-pipelin@e@0.4.0"; got != want {
		t.Errorf("Ref() after a change = %q, want %q", got, want)
	}
	c.ID, c.Version = "holon-labs/other", "1.0.0"
	if got, want := c.Ref(), "holon-labs/other@1.0.0"; got != want {
		t.Errorf("Ref() after a change = %q, want %q", got, want)
	}
	if m.NS() != "holon-labs" || m.Name() != "invoice-pipeline" {
		t.Errorf("NS(), Name() = %q, %q", m.NS(), m.Name())
	}
	if v := m.SemVer(); v.Major != 0 || v.Minor != 4 || v.Patch != 0 {
		t.Errorf("SemVer() = %+v, want 0.4.0", v)
	}
	if !slices.Equal(m.Capabilities, []string{"extraction.invoice"}) {
		t.Errorf("Capabilities = %q", m.Capabilities)
	}
	if !m.OpenSource() {
		t.Error("OpenSource() = false for Apache-2.0 with source")
	}
	if m.Pricing.Model != contract.PricingPerRun || m.Pricing.Amount.String() != "0.10" || m.Currency() != "EUR" {
		t.Errorf("Pricing = %+v", m.Pricing)
	}
	if m.ChargeOn() != contract.ChargeOnSuccess {
		t.Errorf("ChargeOn() = %q", m.ChargeOn())
	}
	if r := m.Runtime; r.Kind != contract.RuntimeMCP || r.Endpoint != "https://agents.holon-labs.example/mcp" || r.Tool != "invoice_pipeline" {
		t.Errorf("Runtime = %+v", r)
	}
	if m.Timeout() != 60 {
		t.Errorf("Timeout() = %d, want 60", m.Timeout())
	}
	if len(m.Calls) != 2 || m.Calls[0].Capability != "extraction.table" || m.Calls[0].MaxCost.String() != "0.05" ||
		m.Calls[1].Agent != "holon-labs/sec-company@^1" || m.Calls[1].MaxCost.String() != "0.02" {
		t.Errorf("Calls = %+v", m.Calls)
	}
	if !m.Passthrough() || m.Downstream.Cap.String() != "3.00" {
		t.Errorf("Downstream = %+v", m.Downstream)
	}
	if d := m.Data; d.Retention != "none" || !slices.Equal(d.Regions, []string{"eu"}) || d.Training == nil || *d.Training {
		t.Errorf("Data = %+v", d)
	}
	if m.ForkOf() != "" {
		t.Errorf("ForkOf() = %q, want none", m.ForkOf())
	}
	if m.ForkRate() != journal.MustParseRate("0.15") {
		t.Errorf("ForkRate() = %s, want 0.15", m.ForkRate())
	}
	if declared, billed := m.IsDeclared("no_table_found"); !declared || billed {
		t.Errorf("IsDeclared(no_table_found) = %v, %v", declared, billed)
	}
	if declared, _ := m.IsDeclared("timeout"); declared {
		t.Error("IsDeclared(timeout) = true")
	}
	if err := m.InputSchema().Validate(map[string]any{"file": "holon://files/x"}); err != nil {
		t.Errorf("input schema refuses the example input: %v", err)
	}
	if err := m.OutputSchema().Validate(map[string]any{"total": "1.00"}); err == nil {
		t.Error("output schema accepts an output without currency")
	}
}

// Ensure that every manifest under testdata whose name does not start with
// "invalid-" parses, and every one that does is refused.
func TestParseManifest_Testdata(t *testing.T) {
	files := globTestdata(t, "manifests/*")
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			_, err := contract.ParseManifest(readTestdata(t, "manifests/"+f))
			if strings.HasPrefix(f, "invalid-") {
				assertInvalid(t, err, holon.CodeInvalidManifest)
			} else if err != nil {
				t.Fatalf("ParseManifest: %v", err)
			}
		})
	}
}

// Ensure that the spec's example written as JSON parses to the same manifest.
func TestParseManifest_JSON(t *testing.T) {
	fromYAML := mustParseManifest(t, readTestdata(t, "manifests/invoice-pipeline.yaml"))
	var doc any
	if err := yaml.Unmarshal(readTestdata(t, "manifests/invoice-pipeline.yaml"), &doc); err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	fromJSON := mustParseManifest(t, b)
	if a, b := mustJSON(t, fromYAML), mustJSON(t, fromJSON); a != b {
		t.Errorf("YAML and JSON forms differ:\nYAML: %s\nJSON: %s", a, b)
	}
}

// Ensure that an amount written as a bare number (YAML, or a JSON number)
// reads exactly as the digits written, never through a float.
func TestParseManifest_UnquotedAmount(t *testing.T) {
	for _, tt := range []struct {
		name, pricing, want string
	}{
		{"YAML 0.10", `pricing: { model: per_run, amount: 0.10, currency: EUR }`, "0.10"},
		{"YAML 0.1", `pricing: { model: per_run, amount: 0.1, currency: EUR }`, "0.10"},
		{"YAML 3", `pricing: { model: per_run, amount: 3, currency: EUR }`, "3.00"},
		{"YAML six decimals", `pricing: { model: per_run, amount: 0.004725, currency: EUR }`, "0.004725"},
		{"JSON number", `pricing: {"model": "per_run", "amount": 0.30, "currency": "EUR"}`, "0.30"},
		// 0.1 + 0.2 in float64 is 0.30000000000000004: the digits, not a float, are read.
		{"JSON large", `pricing: {"model": "per_run", "amount": 1234567.123456, "currency": "EUR"}`, "1234567.123456"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := mustParseManifest(t, []byte(manifestWith(t, "pricing", tt.pricing)))
			if got := m.Pricing.Amount.String(); got != tt.want {
				t.Errorf("amount = %s, want %s", got, tt.want)
			}
			if got, want := m.Pricing.Amount.Micros(), journal.MustParseAmount(tt.want).Micros(); got != want {
				t.Errorf("amount = %d micro-units, want %d", got, want)
			}
		})
	}
}

// Ensure that timeout_s and charge_on take their defaults, and that a
// timeout_s of 0 means the default.
func TestManifest_Defaults(t *testing.T) {
	for _, tt := range []struct {
		name, runtime string
		want          int
	}{
		{"no limits", `runtime: { kind: dev }`, 60},
		{"empty limits", `runtime: { kind: dev, limits: {} }`, 60},
		{"zero", `runtime: { kind: dev, limits: { timeout_s: 0 } }`, 60},
		{"one", `runtime: { kind: dev, limits: { timeout_s: 1 } }`, 1},
		{"largest", `runtime: { kind: dev, limits: { timeout_s: 300 } }`, 300},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := mustParseManifest(t, []byte(manifestWith(t, "runtime", tt.runtime)))
			if m.Timeout() != tt.want {
				t.Errorf("Timeout() = %d, want %d", m.Timeout(), tt.want)
			}
			if m.ChargeOn() != contract.ChargeOnSuccess {
				t.Errorf("ChargeOn() = %q, want success", m.ChargeOn())
			}
		})
	}
	m := mustParseManifest(t, []byte(manifestWith(t, "pricing", `pricing: { model: per_run, amount: "1", currency: EUR, charge_on: attempt }`)))
	if m.ChargeOn() != contract.ChargeOnAttempt {
		t.Errorf("ChargeOn() = %q, want attempt", m.ChargeOn())
	}
	if m.ForkRate() != 0 || m.ForkOf() != "" {
		t.Errorf("ForkRate(), ForkOf() = %s, %q; want 0, none", m.ForkRate(), m.ForkOf())
	}
}

// Ensure that the worst case of a call is the listed worst case of its
// pricing model, plus downstream.cap under passthrough only.
func TestManifest_WorstCase(t *testing.T) {
	const calls = `calls: [{ capability: extraction.table, max_cost: "0.05" }]` + "\n"
	for _, tt := range []struct {
		name, pricing, extra string
		listed, worst        string
	}{
		{"free", `pricing: { model: free }`, "", "0", "0"},
		{"per_run", `pricing: { model: per_run, amount: "0.10", currency: EUR }`, "", "0.10", "0.10"},
		{"per_unit", `pricing: { model: per_unit, amount: "0.002", unit: 1k tokens, max: "2.50", currency: EUR }`, "", "2.50", "2.50"},
		{"quote", `pricing: { model: quote, max: "4", currency: EUR }`, "", "4", "4"},
		{"per_run passthrough", `pricing: { model: per_run, amount: "0.10", currency: EUR }`,
			calls + `downstream: { mode: passthrough, cap: "3.00" }`, "0.10", "3.10"},
		{"free passthrough", `pricing: { model: free }`,
			calls + `downstream: { mode: passthrough, cap: "1.5" }`, "0", "1.50"},
		{"quote passthrough", `pricing: { model: quote, max: "2", currency: EUR }`,
			calls + `downstream: { mode: passthrough, cap: "0.000001" }`, "2", "2.000001"},
		{"per_run included", `pricing: { model: per_run, amount: "0.50", currency: EUR }`,
			calls + `downstream: { mode: included }`, "0.50", "0.50"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := manifestWith(t, "pricing", tt.pricing) + tt.extra
			m := mustParseManifest(t, []byte(src))
			if got, want := m.ListedWorstCase(), journal.MustParseAmount(tt.listed); got != want {
				t.Errorf("ListedWorstCase() = %s, want %s", got, want)
			}
			if got, want := m.WorstCase(), journal.MustParseAmount(tt.worst); got != want {
				t.Errorf("WorstCase() = %s, want %s", got, want)
			}
		})
	}
	t.Run("spec example", func(t *testing.T) {
		m := mustParseManifest(t, readTestdata(t, "manifests/invoice-pipeline.yaml"))
		if got, want := m.WorstCase(), journal.MustParseAmount("3.10"); got != want {
			t.Errorf("WorstCase() = %s, want %s", got, want)
		}
	})
}

// Ensure that a negative zero in a schema reads as 0, as JSON has it, so the
// manifest written back as JSON is the same.
func TestParseManifest_NegativeZero(t *testing.T) {
	m := mustParseManifest(t, []byte(manifestWith(t, "interface", `interface: { input: { minimum: -0.0 }, output: {} }`)))
	if got := mustJSON(t, m.Interface.Input); got != `{"minimum":0}` {
		t.Errorf("input = %s, want {\"minimum\":0}", got)
	}
}

// Ensure that a schema may refer to its own $defs.
func TestParseManifest_LocalRef(t *testing.T) {
	m := mustParseManifest(t, []byte(manifestWith(t, "interface", `
interface:
  input: { $ref: "#/$defs/x", $defs: { x: { type: string, minLength: 2 } } }
  output: {}
  examples: [{ input: "ab", output: 1 }]
`)))
	if err := m.InputSchema().Validate("a"); err == nil {
		t.Error(`input schema accepts "a"; want minLength 2 from $defs`)
	}
}

// Ensure that every rule of manifest.md §9, and every check of the parser,
// refuses a manifest with an error naming the field path.
func TestParseManifest_Invalid(t *testing.T) {
	// Fresh values for each use: an edit may change them in place.
	perUnit := func() map[string]any {
		return map[string]any{"model": "per_unit", "amount": "0.002", "unit": "1k tokens", "max": "2.00", "currency": "EUR"}
	}
	call := func() map[string]any { return map[string]any{"capability": "extraction.table", "max_cost": "0.05"} }
	calls := func() []any { return []any{call()} }
	passthrough := func() map[string]any { return map[string]any{"mode": "passthrough", "cap": "1.00"} }
	type test struct {
		name  string
		edits []edit  // applied to baseManifest
		raw   string  // the whole document, instead of baseManifest and edits
		want  []fwant // every field error, in any order
	}
	tests := []test{
		// Identity.
		{name: "missing id", edits: with(delAt("id")), want: fw("id", "required")},
		{name: "missing version", edits: with(delAt("version")), want: fw("version", "required")},
		{name: "missing summary", edits: with(delAt("summary")), want: fw("summary", "required")},
		{name: "blank summary", edits: with(setAt("summary", "  ")), want: fw("summary", "required")},
		{name: "summary of two lines", edits: with(setAt("summary", "one\ntwo")), want: fw("summary", "one line")},
		{name: "summary too long", edits: with(setAt("summary", strings.Repeat("x", 281))), want: fw("summary", "at most 280")},
		{name: "missing license", edits: with(delAt("license")), want: fw("license", "required")},
		{name: "missing interface.input", edits: with(delAt("interface.input")), want: fw("interface.input", "required")},
		{name: "missing interface.output", edits: with(delAt("interface.output")), want: fw("interface.output", "required")},
		{name: "missing interface", edits: with(delAt("interface")), want: fws("interface.input", "required", "interface.output", "required")},
		{name: "missing pricing", edits: with(delAt("pricing")), want: fw("pricing.model", "required")},
		{name: "missing runtime", edits: with(delAt("runtime")), want: fw("runtime.kind", "required")},
		{name: "id without namespace", edits: with(setAt("id", "extract")), want: fw("id", "is not <namespace>/<name>")},
		{name: "id uppercase", edits: with(setAt("id", "Acme/extract")), want: fw("id", "is not <namespace>/<name>")},
		{name: "id uppercase name", edits: with(setAt("id", "acme/Extract")), want: fw("id", "is not <namespace>/<name>")},
		{name: "id namespace one letter", edits: with(setAt("id", "a/extract")), want: fw("id", "is not <namespace>/<name>")},
		{name: "id namespace leading hyphen", edits: with(setAt("id", "-acme/extract")), want: fw("id", "is not <namespace>/<name>")},
		{name: "id namespace double hyphen", edits: with(setAt("id", "ac--me/extract")), want: fw("id", "is not <namespace>/<name>")},
		{name: "id namespace underscore", edits: with(setAt("id", "ac_me/extract")), want: fw("id", "is not <namespace>/<name>")},
		{name: "id namespace too long", edits: with(setAt("id", strings.Repeat("a", 40)+"/extract")), want: fw("id", "is not <namespace>/<name>")},
		{name: "id name too long", edits: with(setAt("id", "acme/"+strings.Repeat("a", 65))), want: fw("id", "is not <namespace>/<name>")},
		{name: "id with a version", edits: with(setAt("id", "acme/extract@1.0.0")), want: fw("id", "is not <namespace>/<name>")},
		{name: "version of two parts", edits: with(setAt("version", "1.0")), want: fw("version", "invalid version")},
		{name: "version with v", edits: with(setAt("version", "v1.0.0")), want: fw("version", "invalid version")},
		{name: "version leading zero", edits: with(setAt("version", "01.0.0")), want: fw("version", "invalid version")},
		{name: "capability uppercase", edits: with(setAt("capabilities", []any{"extraction.invoice", "Extraction"})), want: fw("capabilities[1]", "is not a capability")},
		{name: "capability empty segment", edits: with(setAt("capabilities", []any{"extraction..invoice"})), want: fw("capabilities[0]", "is not a capability")},
		{name: "capability pattern", edits: with(setAt("capabilities", []any{"extraction.*"})), want: fw("capabilities[0]", "is not a capability")},

		// Interface: schemas.
		{name: "schema does not compile", edits: with(setAt("interface.input", map[string]any{"type": "strin"})), want: fw("interface.input", "/type")},
		{name: "schema of the wrong type", edits: with(setAt("interface.output", "object")), want: fw("interface.output", "a JSON Schema is an object")},
		{name: "schema remote $ref", edits: with(setAt("interface.input", map[string]any{"$ref": "https://example.com/s.json"})),
			want: fw("interface.input", "remote $ref refused")},
		{name: "schema file $ref", edits: with(setAt("interface.output", map[string]any{"$ref": "file:///etc/passwd"})),
			want: fw("interface.output", "remote $ref refused")},
		{name: "schema relative $ref", edits: with(setAt("interface.output", map[string]any{"$ref": "other.json"})),
			want: fw("interface.output", "remote $ref refused")},
		{name: "schema $ref to a missing $def", edits: with(setAt("interface.input", map[string]any{"$ref": "#/$defs/x"})),
			want: fw("interface.input", "#/$defs/x")},
		{name: "schema draft-07", edits: with(setAt("interface.input", map[string]any{"$schema": "http://json-schema.org/draft-07/schema#"})),
			want: fw("interface.input", "only draft 2020-12")},
		{name: "schema lookahead pattern", edits: with(setAt("interface.input", map[string]any{"type": "string", "pattern": "^(?=a)"})),
			want: fw("interface.input", "not valid regex")},

		// Interface: errors.
		{name: "error code uppercase", edits: with(setAt("interface.errors", map[string]any{"NoTable": map[string]any{"billed": false}})),
			want: fw("interface.errors.NoTable", "error codes match")},
		{name: "error code starts with a digit", edits: with(setAt("interface.errors", map[string]any{"1_table": map[string]any{"billed": false}})),
			want: fw("interface.errors.1_table", "error codes match")},
		{name: "error code too long", edits: with(setAt("interface.errors", map[string]any{"e" + strings.Repeat("x", 64): map[string]any{}})),
			want: fw("interface.errors.e"+strings.Repeat("x", 64), "error codes match")},
		{name: "over_budget billed", edits: with(setAt("interface.errors.over_budget", map[string]any{"billed": true})),
			want: fw("interface.errors.over_budget.billed", "never billed")},
		{name: "billed not a bool", edits: with(setAt("interface.errors.no_table_found.billed", "yes")),
			want: fw("interface.errors.no_table_found.billed", "want true or false")},

		// Pricing.
		{name: "amount seven decimals", edits: with(setAt("pricing.amount", "0.1000001")), want: fw("pricing.amount", "at most 6 decimals")},
		{name: "amount negative", edits: with(setAt("pricing.amount", "-0.10")), want: fw("pricing.amount", "no sign, exponent")},
		{name: "amount with plus", edits: with(setAt("pricing.amount", "+0.10")), want: fw("pricing.amount", "no sign, exponent")},
		{name: "amount exponent", edits: with(setAt("pricing.amount", "1e-2")), want: fw("pricing.amount", "no sign, exponent")},
		{name: "amount empty", edits: with(setAt("pricing.amount", "")), want: fw("pricing.amount", "empty")},
		{name: "amount no leading digit", edits: with(setAt("pricing.amount", ".10")), want: fw("pricing.amount", "digit before the decimal point")},
		{name: "amount with a comma", edits: with(setAt("pricing.amount", "0,10")), want: fw("pricing.amount", "only digits")},
		{name: "amount too large", edits: with(setAt("pricing.amount", "99999999999999")), want: fw("pricing.amount", "out of range")},
		{name: "amount a mapping", edits: with(setAt("pricing.amount", map[string]any{"eur": "1"})), want: fw("pricing.amount", "want a string")},
		{name: "amount a JSON number with an exponent", edits: with(setAt("pricing.amount", 1e-7)), want: fw("pricing.amount", "exponent")},
		{name: "amount a JSON number with seven decimals", edits: with(setAt("pricing.amount", 0.1234567)), want: fw("pricing.amount", "at most 6 decimals")},
		{name: "amount a JSON negative number", edits: with(setAt("pricing.amount", -1)), want: fw("pricing.amount", "no sign")},
		{name: "per_unit without max", edits: with(setAt("pricing", perUnit()), delAt("pricing.max")), want: fw("pricing.max", "required for per_unit")},
		{name: "per_unit without unit", edits: with(setAt("pricing", perUnit()), delAt("pricing.unit")), want: fw("pricing.unit", "required for per_unit")},
		{name: "per_unit without amount", edits: with(setAt("pricing", perUnit()), delAt("pricing.amount")), want: fw("pricing.amount", "required for per_unit")},
		{name: "quote without max", edits: with(setAt("pricing", map[string]any{"model": "quote", "currency": "EUR"})), want: fw("pricing.max", "required for quote")},
		{name: "quote with amount", edits: with(setAt("pricing", map[string]any{"model": "quote", "max": "1", "amount": "1", "currency": "EUR"})),
			want: fw("pricing.amount", "not used by quote")},
		{name: "per_run without amount", edits: with(delAt("pricing.amount")), want: fw("pricing.amount", "required for per_run")},
		{name: "per_run with max and unit", edits: with(setAt("pricing.max", "1"), setAt("pricing.unit", "page")),
			want: fws("pricing.max", "not used by per_run", "pricing.unit", "not used by per_run")},
		{name: "free with amount", edits: with(setAt("pricing.model", "free")), want: fw("pricing.amount", "not used by free")},
		{name: "unknown model", edits: with(setAt("pricing.model", "per_call")), want: fw("pricing.model", `"per_call" is not free, per_run, per_unit or quote`)},
		{name: "currency lowercase", edits: with(setAt("pricing.currency", "eur")), want: fw("pricing.currency", "not an ISO 4217 code")},
		{name: "currency too long", edits: with(setAt("pricing.currency", "EURO")), want: fw("pricing.currency", "not an ISO 4217 code")},
		{name: "paid without currency", edits: with(delAt("pricing.currency")), want: fw("pricing.currency", "required")},
		{name: "bad charge_on", edits: with(setAt("pricing.charge_on", "always")), want: fw("pricing.charge_on", "not success or attempt")},

		// Runtime.
		{name: "runtime kind missing", edits: with(delAt("runtime.kind")), want: fw("runtime.kind", "required")},
		{name: "runtime kind unknown", edits: with(setAt("runtime.kind", "lambda")), want: fw("runtime.kind", `"lambda" is not dev, mcp or webhook`)},
		{name: "mcp without endpoint", edits: with(delAt("runtime.endpoint")), want: fw("runtime.endpoint", "required")},
		{name: "mcp without tool", edits: with(delAt("runtime.tool")), want: fw("runtime.tool", "required for mcp")},
		{name: "webhook with per_unit", edits: with(setAt("runtime.kind", "webhook"), delAt("runtime.tool"), setAt("pricing", perUnit())),
			want: fw("pricing.model", "webhook agent can only be free or per_run")},
		{name: "webhook with quote", edits: with(setAt("runtime.kind", "webhook"), delAt("runtime.tool"), setAt("pricing", map[string]any{"model": "quote", "max": "1", "currency": "EUR"})),
			want: fw("pricing.model", "webhook agent can only be free or per_run")},
		{name: "webhook with tool", edits: with(setAt("runtime.kind", "webhook")), want: fw("runtime.tool", "not used by webhook")},
		{name: "endpoint with user-info", edits: with(setAt("runtime.endpoint", "https://user:secret@agents.acme.example/mcp")),
			want: fw("runtime.endpoint", "must not carry credentials")},
		{name: "endpoint with user only", edits: with(setAt("runtime.endpoint", "https://token@agents.acme.example/mcp")),
			want: fw("runtime.endpoint", "must not carry credentials")},
		{name: "endpoint ftp", edits: with(setAt("runtime.endpoint", "ftp://agents.acme.example/mcp")), want: fw("runtime.endpoint", `scheme "ftp"`)},
		{name: "endpoint file", edits: with(setAt("runtime.endpoint", "file:///etc/passwd")), want: fw("runtime.endpoint", `scheme "file"`)},
		{name: "endpoint relative", edits: with(setAt("runtime.endpoint", "/mcp")), want: fw("runtime.endpoint", `scheme ""`)},
		{name: "endpoint without host", edits: with(setAt("runtime.endpoint", "https:///mcp")), want: fw("runtime.endpoint", "with a host")},
		{name: "endpoint with fragment", edits: with(setAt("runtime.endpoint", "https://agents.acme.example/mcp#x")), want: fw("runtime.endpoint", "fragment")},
		{name: "endpoint not a URL", edits: with(setAt("runtime.endpoint", "https://agents acme/%zz")), want: fw("runtime.endpoint", "not a URL")},
		{name: "dev with endpoint", edits: with(setAt("runtime.kind", "dev")), want: fw("runtime.endpoint", "not used by the dev runtime")},
		{name: "timeout 301", edits: with(setAt("runtime.limits.timeout_s", 301)), want: fw("runtime.limits.timeout_s", "301 is not between 1 and 300")},
		{name: "timeout -1", edits: with(setAt("runtime.limits.timeout_s", -1)), want: fw("runtime.limits.timeout_s", "-1 is not between 1 and 300")},
		{name: "timeout fractional", edits: with(setAt("runtime.limits.timeout_s", 1.5)), want: fw("runtime.limits.timeout_s", "whole number")},
		{name: "timeout a string", edits: with(setAt("runtime.limits.timeout_s", "60")), want: fw("runtime.limits.timeout_s", "whole number")},

		// Delegation.
		{name: "calls without downstream", edits: with(setAt("calls", calls())), want: fw("downstream", "required with calls")},
		{name: "downstream without calls", edits: with(setAt("downstream", passthrough())), want: fw("calls", "required with downstream")},
		{name: "calls entry with both", edits: with(setAt("downstream", passthrough()),
			setAt("calls", []any{map[string]any{"capability": "extraction.table", "agent": "acme/table", "max_cost": "0.05"}})),
			want: fw("calls[0]", "not both")},
		{name: "calls entry with neither", edits: with(setAt("downstream", passthrough()),
			setAt("calls", []any{call(), map[string]any{"max_cost": "0.05"}})),
			want: fw("calls[1]", "name a capability or an agent")},
		{name: "calls entry without max_cost", edits: with(setAt("downstream", passthrough()),
			setAt("calls", []any{map[string]any{"agent": "acme/table@^1"}})),
			want: fw("calls[0].max_cost", "required")},
		{name: "calls entry with a bad agent", edits: with(setAt("downstream", passthrough()),
			setAt("calls", []any{map[string]any{"agent": "Acme/table", "max_cost": "0.05"}})),
			want: fw("calls[0].agent", "invalid agent reference")},
		{name: "calls entry with a bad range", edits: with(setAt("downstream", passthrough()),
			setAt("calls", []any{map[string]any{"agent": "acme/table@", "max_cost": "0.05"}})),
			want: fw("calls[0].agent", "empty range")},
		{name: "calls entry with a bad capability", edits: with(setAt("downstream", passthrough()),
			setAt("calls", []any{map[string]any{"capability": "Extraction", "max_cost": "0.05"}})),
			want: fw("calls[0].capability", "invalid capability pattern")},
		{name: "calls entry with a bad max_cost", edits: with(setAt("downstream", passthrough()),
			setAt("calls", []any{map[string]any{"capability": "extraction.table", "max_cost": "0.0000001"}})),
			want: fw("calls[0].max_cost", "at most 6 decimals")},
		{name: "calls not a list", edits: with(setAt("downstream", passthrough()), setAt("calls", call())), want: fw("calls", "want a list")},
		{name: "passthrough without cap", edits: with(setAt("calls", calls()), setAt("downstream", map[string]any{"mode": "passthrough"})),
			want: fw("downstream.cap", "required for passthrough")},
		{name: "included with cap", edits: with(setAt("calls", calls()), setAt("downstream", map[string]any{"mode": "included", "cap": "1"})),
			want: fw("downstream.cap", "not used with included")},
		{name: "downstream without mode", edits: with(setAt("calls", calls()), setAt("downstream", map[string]any{"cap": "1"})),
			want: fw("downstream.mode", "required")},
		{name: "downstream unknown mode", edits: with(setAt("calls", calls()), setAt("downstream", map[string]any{"mode": "caller"})),
			want: fw("downstream.mode", `"caller" is not passthrough or included`)},
		{name: "price plus cap overflows", edits: with(setAt("pricing.amount", "9000000000000"), setAt("calls", calls()),
			setAt("downstream", map[string]any{"mode": "passthrough", "cap": "9000000000000"})),
			want: fw("downstream.cap", "too large")},

		// Data.
		{name: "retention unknown", edits: with(setAt("data", map[string]any{"retention": "forever"})), want: fw("data.retention", `"forever" is not none or a duration`)},
		{name: "retention in years", edits: with(setAt("data", map[string]any{"retention": "1y"})), want: fw("data.retention", "is not none or a duration")},
		{name: "retention zero", edits: with(setAt("data", map[string]any{"retention": "0d"})), want: fw("data.retention", "is not none or a duration")},
		{name: "retention beyond a duration", edits: with(setAt("data", map[string]any{"retention": "999999w"})), want: fw("data.retention", "too long")},
		{name: "region uppercase", edits: with(setAt("data", map[string]any{"regions": []any{"eu", "US"}})), want: fw("data.regions[1]", "not a lowercase region code")},
		{name: "region one letter", edits: with(setAt("data", map[string]any{"regions": []any{"e"}})), want: fw("data.regions[0]", "not a lowercase region code")},
		{name: "regions not a list", edits: with(setAt("data", map[string]any{"regions": "eu"})), want: fw("data.regions", "want a list")},
		{name: "subprocessor blank", edits: with(setAt("data", map[string]any{"subprocessors": []any{" "}})), want: fw("data.subprocessors[0]", "empty")},
		{name: "training not a bool", edits: with(setAt("data", map[string]any{"training": "no"})), want: fw("data.training", "want true or false")},

		// License, source, royalties, lineage.
		{name: "license unknown", edits: with(setAt("license", "WTFPL")), want: fw("license", `"WTFPL" is not an OSI-approved SPDX identifier`)},
		{name: "license lowercase", edits: with(setAt("license", "mit")), want: fw("license", "is not an OSI-approved")},
		{name: "license expression", edits: with(setAt("license", "MIT OR Apache-2.0")), want: fw("license", "is not an OSI-approved")},
		{name: "OSI license without source", edits: with(delAt("source")), want: fw("source", "required for an open-source license")},
		{name: "source not on github", edits: with(setAt("source.repository", "https://gitlab.com/acme/extract")),
			want: fw("source.repository", "is not https://github.com/<owner>/<repo>")},
		{name: "source over http", edits: with(setAt("source.repository", "http://github.com/acme/extract")),
			want: fw("source.repository", "is not https://github.com/<owner>/<repo>")},
		{name: "source with a path", edits: with(setAt("source.repository", "https://github.com/acme/extract/tree/main")),
			want: fw("source.repository", "is not https://github.com/<owner>/<repo>")},
		{name: "source without repository", edits: with(delAt("source.repository")), want: fw("source.repository", "is not https://github.com/")},
		{name: "commit too short", edits: with(setAt("source.commit", "4f1c2a")), want: fw("source.commit", "not a commit hash")},
		{name: "commit uppercase", edits: with(setAt("source.commit", "4F1C2A9E")), want: fw("source.commit", "not a commit hash")},
		{name: "commit missing", edits: with(delAt("source.commit")), want: fw("source.commit", "not a commit hash")},
		{name: "royalties above 0.5", edits: with(setAt("royalties", map[string]any{"forks": "0.500001"})), want: fw("royalties.forks", "above the most a fork can pay")},
		{name: "royalties above 1", edits: with(setAt("royalties", map[string]any{"forks": "2"})), want: fw("royalties.forks", "above the most a fork can pay")},
		{name: "royalties negative", edits: with(setAt("royalties", map[string]any{"forks": "-0.1"})), want: fw("royalties.forks", "no sign")},
		{name: "fork_of a range", edits: with(setAt("lineage", map[string]any{"fork_of": "acme/base@^1"})), want: fw("lineage.fork_of", "must name an exact version")},
		{name: "fork_of without version", edits: with(setAt("lineage", map[string]any{"fork_of": "acme/base"})), want: fw("lineage.fork_of", "must name an exact version")},
		{name: "fork_of partial version", edits: with(setAt("lineage", map[string]any{"fork_of": "acme/base@1.2"})), want: fw("lineage.fork_of", "must name an exact version")},
		{name: "fork_of not a reference", edits: with(setAt("lineage", map[string]any{"fork_of": "base"})), want: fw("lineage.fork_of", "invalid agent reference")},
		{name: "fork_of self", edits: with(setAt("lineage", map[string]any{"fork_of": "acme/extract@0.9.0"})), want: fw("lineage.fork_of", "cannot fork itself")},

		// Examples.
		{name: "example input invalid", edits: with(setAt("interface.examples", []any{map[string]any{"input": map[string]any{"file": 1}, "output": map[string]any{"total": "1"}}})),
			want: fw("interface.examples[0].input", "does not match interface.input: at /file")},
		{name: "example output invalid", edits: with(setAt("interface.examples", []any{map[string]any{"input": map[string]any{"file": "f"}, "output": map[string]any{}}})),
			want: fw("interface.examples[0].output", "does not match interface.output: at /")},
		{name: "example input missing", edits: with(setAt("interface.examples", []any{map[string]any{"output": map[string]any{"total": "1"}}})),
			want: fw("interface.examples[0].input", "required")},
		{name: "example error not declared", edits: with(setAt("interface.examples", []any{
			map[string]any{"input": map[string]any{"file": "f"}, "error": "no_table_found"},
			map[string]any{"input": map[string]any{"file": "f"}, "error": "timeout"}})),
			want: fw("interface.examples[1].error", `"timeout" is not declared`)},
		{name: "example with output and error", edits: with(setAt("interface.examples", []any{map[string]any{"input": map[string]any{"file": "f"}, "output": map[string]any{"total": "1"}, "error": "no_table_found"}})),
			want: fw("interface.examples[0]", "not both")},
		{name: "example with neither", edits: with(setAt("interface.examples", []any{map[string]any{"input": map[string]any{"file": "f"}}})),
			want: fw("interface.examples[0]", "give output or error")},
		{name: "example with an unknown field", edits: with(setAt("interface.examples", []any{map[string]any{"input": map[string]any{"file": "f"}, "outptu": 1}})),
			want: fws("interface.examples[0].outptu", "unknown field", "interface.examples[0]", "give output or error")},

		// Document shape.
		{name: "unknown top-level field", edits: with(setAt("licence", "MIT")), want: fw("licence", "unknown field")},
		{name: "unknown nested field", edits: with(setAt("pricing.amout", "0.10")), want: fw("pricing.amout", "unknown field")},
		{name: "misspelt nested field", edits: with(delAt("pricing.amount"), setAt("pricing.amout", "0.10")),
			want: fws("pricing.amout", "unknown field", "pricing.amount", "required for per_run")},
		{name: "field of the wrong shape", edits: with(setAt("pricing", "free")), want: fw("pricing", "want a mapping")},
		{name: "capabilities not a list", edits: with(setAt("capabilities", "extraction.invoice")), want: fw("capabilities", "want a list")},
		{name: "duplicate top-level key", raw: baseManifest + "summary: Again.\n", want: fw("summary", "duplicate key")},
		{name: "duplicate nested key", raw: strings.Replace(baseManifest, "model: per_run,", "model: per_run, model: free,", 1),
			want: fw("pricing.model", "duplicate key")},
		{name: "duplicate key in a schema", raw: strings.Replace(baseManifest, "input: { type: object,", "input: { type: object, type: string,", 1),
			want: fw("interface.input.type", "duplicate key")},
		{name: "duplicate error code", raw: strings.Replace(baseManifest, "  errors:\n", "  errors:\n    no_table_found: { billed: true }\n", 1),
			want: fw("interface.errors.no_table_found", "duplicate key")},
		{name: "duplicate key in JSON", raw: strings.Replace(mustJSON(t, yamlDoc(t, baseManifest)), "{", `{"id":"acme/other",`, 1),
			want: fw("id", "duplicate key")},
		{name: "alias", raw: strings.Replace(baseManifest, "  output: {", "  output: &out {", 1) + "description: *out\n",
			want: fw("description", "aliases are not allowed")},
		{name: "alias in a schema", raw: strings.Replace(baseManifest, "file: { type: string }", "file: &s { type: string }, other: *s", 1),
			want: fw("interface.input.properties.other", "aliases are not allowed")},
		{name: "alias as a key", raw: strings.Replace(baseManifest, "summary: Extracts", "summary: &k Extracts", 1) + "*k : x\n",
			want: fw("k", "aliases are not allowed")},
		{name: "merge key", raw: baseManifest + "<<: { description: merged }\n", want: fw("<<", "merge keys are not allowed")},
		{name: "merge key in a schema", raw: strings.Replace(baseManifest, "output: { type: object,", "output: { <<: { minProperties: 1 }, type: object,", 1),
			want: fw("interface.output.<<", "keys must be strings")},
		{name: "a list", raw: "[1, 2]", want: fw("", "want a mapping")},
		{name: "a scalar", raw: "holon", want: fw("", "want a mapping")},
		{name: "empty", raw: "", want: fw("", "empty document")},
		{name: "only a comment", raw: "# nothing\n", want: fw("", "empty document")},
		{name: "not YAML", raw: "id: [acme", want: fw("", "not valid YAML or JSON")},
		{name: "not JSON", raw: `{"id": "acme/a", "version": "1.0.0"`, want: fw("", "not valid YAML or JSON")},
		{name: "two documents", raw: baseManifest + "---\nid: acme/other\n", want: fw("", "one document")},
		{name: "over 1 MiB", raw: baseManifest + "description: " + strings.Repeat("x", 1<<20) + "\n", want: fw("", "at most 1048576")},
		{name: "binary string", raw: baseManifest + "description: !!binary /w==\n", want: fw("description", "want a string")},
		{name: "date in an example", raw: baseManifest[:strings.Index(baseManifest, "pricing:")] +
			"  examples: [{ input: { file: 2024-01-01 }, output: { total: \"1\" } }]\n" + baseManifest[strings.Index(baseManifest, "pricing:"):],
			want: fw("interface.examples[0].input.file", "quote it")},
		{name: "infinity in a schema", edits: with(setAt("interface.input", map[string]any{"maximum": yamlRaw(".inf")})),
			want: fw("interface.input.maximum", "not a JSON number")},
		{name: "control character", raw: baseManifest + "description: \"tab\\tis fine, DEL\\x7f is not\"\n",
			want: fw("description", "character U+007F is not allowed")},
		{name: "C1 control in a schema", raw: strings.Replace(baseManifest, "file: { type: string }", `file: { type: string, const: "\u0085" }`, 1),
			want: fw("interface.input.properties.file.const", "character U+0085 is not allowed")},
		{name: "non-character in a schema key", raw: strings.Replace(baseManifest, "file: { type: string }", `"\uFFFF": { type: string }`, 1),
			want: fw("interface.input.properties.\uffff", "character U+FFFF is not allowed")},
		{name: "integer too large", edits: with(setAt("runtime.limits.timeout_s", yamlRaw("9223372036854775808"))),
			want: fw("runtime.limits.timeout_s", "whole number")},

		{name: "mapping of 1001 keys", edits: with(setAt("interface.errors", func() map[string]any {
			m := map[string]any{}
			for i := range 1001 {
				m[fmt.Sprintf("e%d", i)] = map[string]any{}
			}
			return m
		}())), want: fw("interface.errors", "more than 1000 keys")},
		{name: "schema mapping of 1001 keys", edits: with(setAt("interface.output", func() map[string]any {
			m := map[string]any{}
			for i := range 1001 {
				m[fmt.Sprintf("x-%d", i)] = 1
			}
			return m
		}())), want: fw("interface.output", "more than 1000 keys")},

		// Many problems at once.
		{name: "many problems", edits: with(
			setAt("id", "Acme/extract"), setAt("version", "1"), delAt("summary"), setAt("pricing.currency", "eur"),
			setAt("runtime.limits.timeout_s", 999), setAt("royalties", map[string]any{"forks": "0.9"}),
			setAt("interface.errors.timeout", map[string]any{}), setAt("colour", "blue")),
			want: fws(
				"id", "is not <namespace>/<name>",
				"version", "invalid version",
				"summary", "required",
				"pricing.currency", "not an ISO 4217 code",
				"runtime.limits.timeout_s", "999 is not between 1 and 300",
				"royalties.forks", "above the most",
				"interface.errors.timeout", "cannot be declared",
				"colour", "unknown field")},
	}
	for _, code := range []string{
		"invalid_output", "agent_error", "timeout", "runtime_unavailable", "gateway_error",
		"gateway_restarted", "file_not_found", "rejected_input", "invalid_units", "invalid_quote",
	} {
		tests = append(tests, test{
			name:  "reserved error code " + code,
			edits: with(setAt("interface.errors."+code, map[string]any{"billed": false})),
			want:  fw("interface.errors."+code, code+" is a code the gateway itself uses"),
		})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.raw
			if src == "" && tt.edits != nil {
				src = editDoc(t, baseManifest, tt.edits...)
			}
			m, err := contract.ParseManifest([]byte(src))
			if err == nil {
				t.Fatalf("ParseManifest accepted the manifest: %s", mustJSON(t, m))
			}
			assertFields(t, err, holon.CodeInvalidManifest, tt.want)
		})
	}
}

// Ensure that the base manifest of the table tests is valid, so each case
// fails only for its own edit.
func TestParseManifest_Base(t *testing.T) {
	mustParseManifest(t, []byte(baseManifest))
	mustParseManifest(t, []byte(editDoc(t, baseManifest)))
}

// Ensure that an over_budget error that is not billed, and a billed declared
// error, are accepted.
func TestParseManifest_DeclaredErrors(t *testing.T) {
	src := editDoc(t, baseManifest,
		setAt("pricing.charge_on", "attempt"),
		setAt("interface.errors.over_budget", map[string]any{"billed": false}),
		setAt("interface.errors.bad_scan", map[string]any{"billed": true, "description": "Unreadable scan."}))
	m := mustParseManifest(t, []byte(src))
	if d, b := m.IsDeclared("bad_scan"); !d || !b {
		t.Errorf("IsDeclared(bad_scan) = %v, %v; want declared and billed", d, b)
	}
	if d, b := m.IsDeclared("over_budget"); !d || b {
		t.Errorf("IsDeclared(over_budget) = %v, %v; want declared, not billed", d, b)
	}
}

// Ensure that CheckLineage follows fork_of through the registry: an unknown
// version or a loop is refused, the chain is at most 8 long, and the royalty
// chain comes nearest first.
func TestManifest_CheckLineage(t *testing.T) {
	// chain builds up1 … upN, each forking the next, the last forking nothing;
	// upI pays royalties of I hundredths.
	chain := func(n int) map[string]*contract.Manifest {
		reg := map[string]*contract.Manifest{}
		for i := 1; i <= n; i++ {
			fork := ""
			if i < n {
				fork = fmt.Sprintf("up%d/agent@1.0.0", i+1)
			}
			m := forkManifest(t, fmt.Sprintf("up%d/agent", i), fork, fmt.Sprintf("0.%02d", i))
			reg[m.Ref()] = m
		}
		return reg
	}
	lookup := func(reg map[string]*contract.Manifest) contract.ManifestLookup {
		return func(ref string) (*contract.Manifest, bool) { m, ok := reg[ref]; return m, ok }
	}

	t.Run("no fork", func(t *testing.T) {
		m := forkManifest(t, "lena/agent", "", "0")
		got, err := m.CheckLineage(lookup(nil))
		if err != nil || len(got) != 0 {
			t.Fatalf("CheckLineage = %v, %v; want an empty chain", got, err)
		}
	})
	t.Run("chain of 8", func(t *testing.T) {
		m := forkManifest(t, "lena/agent", "up1/agent@1.0.0", "0")
		got, err := m.CheckLineage(lookup(chain(8)))
		if err != nil {
			t.Fatalf("CheckLineage: %v", err)
		}
		var want []journal.Upstream
		for i := 1; i <= 8; i++ {
			want = append(want, journal.Upstream{Account: fmt.Sprintf("up%d", i), Rate: journal.MustParseRate(fmt.Sprintf("0.%02d", i))})
		}
		if !slices.Equal(got, want) {
			t.Errorf("chain = %v\nwant    %v", got, want)
		}
	})
	t.Run("spec example", func(t *testing.T) {
		reg := map[string]*contract.Manifest{}
		for _, f := range []string{"manifests/acme-invoice-extract.yaml", "manifests/lena-invoice-fork.yaml"} {
			m := mustParseManifest(t, readTestdata(t, f))
			reg[m.Ref()] = m
		}
		lena := reg["lena/invoice-fork@1.0.0"]
		if lena == nil {
			t.Skip("testdata has no lena/invoice-fork@1.0.0")
		}
		got, err := lena.CheckLineage(lookup(reg))
		if err != nil {
			t.Fatalf("CheckLineage: %v", err)
		}
		want := []journal.Upstream{{Account: "acme", Rate: journal.MustParseRate("0.15")}}
		if !slices.Equal(got, want) {
			t.Errorf("chain = %v, want %v", got, want)
		}
	})
	t.Run("exact version written with =", func(t *testing.T) {
		m := forkManifest(t, "lena/agent", "up1/agent@=1.0.0", "0")
		got, err := m.CheckLineage(lookup(chain(2)))
		if err != nil || len(got) != 2 {
			t.Fatalf("CheckLineage = %v, %v; want a chain of 2", got, err)
		}
	})

	for _, tt := range []struct {
		name string
		m    *contract.Manifest
		reg  map[string]*contract.Manifest
		want string
	}{
		{"unknown version", forkManifest(t, "lena/agent", "up1/agent@2.0.0", "0"), chain(2), "up1/agent@2.0.0 is not a listed version"},
		{"unknown agent", forkManifest(t, "lena/agent", "ghost/agent@1.0.0", "0"), chain(2), "ghost/agent@1.0.0 is not a listed version"},
		{"unknown upstream of upstream", forkManifest(t, "lena/agent", "up1/agent@1.0.0", "0"),
			func() map[string]*contract.Manifest { r := chain(3); delete(r, "up3/agent@1.0.0"); return r }(),
			"up3/agent@1.0.0 is not a listed version"},
		{"chain of 9", forkManifest(t, "lena/agent", "up1/agent@1.0.0", "0"), chain(9), "longer than 8"},
		{"loop back to itself", forkManifest(t, "lena/agent", "up1/agent@1.0.0", "0"),
			func() map[string]*contract.Manifest {
				r := chain(2)
				back := forkManifest(t, "up2/agent", "lena/agent@0.9.0", "0.02")
				r[back.Ref()] = back
				r["lena/agent@0.9.0"] = forkManifest(t, "lena/agent", "", "0")
				return r
			}(),
			"loops at lena/agent@0.9.0"},
		{"loop upstream", forkManifest(t, "lena/agent", "up1/agent@1.0.0", "0"),
			func() map[string]*contract.Manifest {
				r := chain(3)
				back := forkManifest(t, "up3/agent", "up2/agent@1.0.0", "0.03")
				r[back.Ref()] = back
				return r
			}(),
			"loops at up2/agent@1.0.0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.m.CheckLineage(lookup(tt.reg))
			if err == nil {
				t.Fatalf("CheckLineage accepted the chain %v", got)
			}
			assertFields(t, err, holon.CodeInvalidManifest, fw("lineage.fork_of", tt.want))
		})
	}
}

// forkManifest builds a minimal valid manifest id@1.0.0 (0.9.0 when the
// tests need an older version) forking forkOf and paying rate to its forks.
func forkManifest(t *testing.T, id, forkOf, rate string) *contract.Manifest {
	t.Helper()
	version := "1.0.0"
	if id == "lena/agent" && forkOf == "" {
		version = "0.9.0"
	}
	src := fmt.Sprintf(`
id: %s
version: %s
summary: A fork.
license: proprietary
interface: { input: {}, output: {} }
pricing: { model: per_run, amount: "0.01", currency: EUR }
runtime: { kind: dev }
royalties: { forks: %q }
`, id, version, rate)
	if forkOf != "" {
		src += fmt.Sprintf("lineage: { fork_of: %q }\n", forkOf)
	}
	return mustParseManifest(t, []byte(src))
}

// --- helpers shared by the manifest, mandate and fuzz tests ---

// fwant is one expected field error: its exact path and a distinctive part
// of its message.
type fwant struct{ path, msg string }

func fw(path, msg string) []fwant { return []fwant{{path, msg}} }

// fws builds a list of expected field errors from path, message pairs.
func fws(pairs ...string) []fwant {
	var out []fwant
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, fwant{pairs[i], pairs[i+1]})
	}
	return out
}

// assertFields checks that err is an *holon.Error with code whose field
// errors are exactly want, in any order.
func assertFields(t *testing.T, err error, code string, want []fwant) {
	t.Helper()
	var e *holon.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *holon.Error", err, err)
	}
	if e.Code != code {
		t.Errorf("code = %q, want %q", e.Code, code)
	}
	got := slices.Clone(e.Fields)
	var missing []fwant
	for _, w := range want {
		i := slices.IndexFunc(got, func(f holon.FieldError) bool { return f.Path == w.path && strings.Contains(f.Msg, w.msg) })
		if i < 0 {
			missing = append(missing, w)
			continue
		}
		got = slices.Delete(got, i, i+1)
	}
	if len(missing) > 0 || len(got) > 0 {
		var b strings.Builder
		for _, f := range e.Fields {
			fmt.Fprintf(&b, "\n\t%q: %s", f.Path, f.Msg)
		}
		t.Errorf("field errors:%s\nmissing: %q\nunexpected: %q", b.String(), missing, got)
	}
}

// assertInvalid checks that err is an *holon.Error with code and at least
// one field error.
func assertInvalid(t testing.TB, err error, code string) {
	t.Helper()
	var e *holon.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *holon.Error", err, err)
	}
	if e.Code != code || len(e.Fields) == 0 {
		t.Fatalf("error = %v; want code %s with field errors", e, code)
	}
}

func mustParseManifest(t testing.TB, b []byte) *contract.Manifest {
	t.Helper()
	m, err := contract.ParseManifest(b)
	if err != nil {
		t.Fatalf("ParseManifest: %v\n%s", err, b)
	}
	return m
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	return string(b)
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// globTestdata lists the file names under ../../testdata matching pattern.
func globTestdata(t testing.TB, pattern string) []string {
	t.Helper()
	dir, _, _ := strings.Cut(pattern, "/")
	entries, err := os.ReadDir("../../testdata/" + dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml") || strings.HasSuffix(e.Name(), ".json")) {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatalf("no testdata for %s", pattern)
	}
	return names
}

// manifestWith is baseManifest with the top-level field key replaced by the
// YAML text field.
func manifestWith(t testing.TB, key, field string) string {
	t.Helper()
	var out []string
	skip := false
	for _, line := range strings.Split(baseManifest, "\n") {
		if skip && strings.HasPrefix(line, " ") {
			continue
		}
		skip = strings.HasPrefix(line, key+":")
		if !skip {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n") + strings.TrimSpace(field) + "\n"
}

// An edit changes a document decoded into maps.
type edit func(doc map[string]any)

func with(edits ...edit) []edit { return edits }

// yamlRaw is a value written into the document as it stands, unquoted:
// ".inf", or a number too large for any Go integer.
type yamlRaw string

// MarshalYAML writes r as a plain scalar.
func (r yamlRaw) MarshalYAML() (any, error) {
	return &yaml.Node{Kind: yaml.ScalarNode, Value: string(r)}, nil
}

// set sets the field at a dotted path, making the maps on the way.
func setAt(path string, v any) edit {
	return func(doc map[string]any) {
		keys := strings.Split(path, ".")
		for _, k := range keys[:len(keys)-1] {
			next, ok := doc[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				doc[k] = next
			}
			doc = next
		}
		doc[keys[len(keys)-1]] = v
	}
}

// del removes the field at a dotted path.
func delAt(path string) edit {
	return func(doc map[string]any) {
		keys := strings.Split(path, ".")
		for _, k := range keys[:len(keys)-1] {
			next, ok := doc[k].(map[string]any)
			if !ok {
				return
			}
			doc = next
		}
		delete(doc, keys[len(keys)-1])
	}
}

// yamlDoc decodes the YAML src into maps.
func yamlDoc(t testing.TB, src string) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// editDoc decodes the YAML src, applies the edits and encodes the result
// as YAML.
func editDoc(t testing.TB, src string, edits ...edit) string {
	t.Helper()
	doc := yamlDoc(t, src)
	for _, e := range edits {
		e(doc)
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
