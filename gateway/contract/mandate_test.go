package contract_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// minimalMandate is a small valid mandate that the table tests edit.
const minimalMandate = `
id: alice/books
issuer: alice
grantee: alice/assistant
currency: EUR
budget: { total: "50.00" }
allow: { agents: ["holon-labs/*"], capabilities: ["extraction.*"] }
deny: { agents: ["shady/*"], capabilities: ["crypto.*"] }
`

// Ensure that the spec's example mandate parses, with every field read.
func TestParseMandate_Valid(t *testing.T) {
	m := mustParseMandate(t, readTestdata(t, "mandates/bookkeeping-q4.yaml"))

	if m.ID != "alice/bookkeeping-q4" || m.Issuer != "alice" || m.Grantee != "alice/assistant" || m.Currency != "EUR" {
		t.Errorf("identity = %q %q %q %q", m.ID, m.Issuer, m.Grantee, m.Currency)
	}
	if want := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC); m.Expires == nil || !m.Expires.Equal(want) {
		t.Errorf("Expires = %v, want %v", m.Expires, want)
	}
	if m.Total() != journal.MustParseAmount("50") || m.Budget.PerCall == nil || *m.Budget.PerCall != journal.MustParseAmount("5") {
		t.Errorf("Budget = %v / %v", m.Budget.Total, m.Budget.PerCall)
	}
	if m.Approval == nil || m.Approval.Above == nil || *m.Approval.Above != journal.MustParseAmount("1") {
		t.Errorf("Approval = %+v", m.Approval)
	}
	if !slices.Equal(m.Allow.Agents, []string{"holon-labs/*", "acme/invoice-pipeline@^1"}) ||
		!slices.Equal(m.Allow.Capabilities, []string{"extraction.*"}) || m.Allow.Published {
		t.Errorf("Allow = %+v", m.Allow)
	}
	if m.Deny == nil || !slices.Equal(m.Deny.Agents, []string{"shady/*"}) || len(m.Deny.Capabilities) != 0 {
		t.Errorf("Deny = %+v", m.Deny)
	}
	if r := m.Require; r == nil || r.License != contract.RequireAny || r.Evaluated ||
		r.MinSuccessRate == nil || *r.MinSuccessRate != journal.MustParseRate("0.90") {
		t.Errorf("Require = %+v", m.Require)
	}
	if d := m.Data; d == nil || d.Retention != "none" || !slices.Equal(d.Regions, []string{"eu"}) || d.Training == nil || *d.Training {
		t.Errorf("Data = %+v", m.Data)
	}
	if r, ok := m.Rate("USD"); !ok || r != journal.MustParseRate("0.92") {
		t.Errorf("Rate(USD) = %s, %v; want 0.92", r, ok)
	}
	if m.MaxDepth() != 2 {
		t.Errorf("MaxDepth() = %d, want 2", m.MaxDepth())
	}
	if !m.Active(time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)) {
		t.Error("not active the second before it expires")
	}
	if m.Active(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Error("still active when it expires")
	}
}

// Ensure that every mandate under testdata whose name does not start with
// "invalid-" parses, and every one that does is refused.
func TestParseMandate_Testdata(t *testing.T) {
	for _, f := range globTestdata(t, "mandates/*") {
		t.Run(f, func(t *testing.T) {
			_, err := contract.ParseMandate(readTestdata(t, "mandates/"+f))
			if strings.HasPrefix(f, "invalid-") {
				assertInvalid(t, err, holon.CodeInvalidMandate)
			} else if err != nil {
				t.Fatalf("ParseMandate: %v", err)
			}
		})
	}
}

// Ensure that the spec's example written as JSON parses to the same mandate.
func TestParseMandate_JSON(t *testing.T) {
	src := readTestdata(t, "mandates/bookkeeping-q4.yaml")
	fromYAML := mustParseMandate(t, src)
	var doc map[string]any
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	doc["expires"] = "2027-01-01T00:00:00Z" // YAML reads it as a time; JSON has only the string
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON := mustParseMandate(t, b)
	if a, b := mustJSON(t, fromYAML), mustJSON(t, fromJSON); a != b {
		t.Errorf("YAML and JSON forms differ:\nYAML: %s\nJSON: %s", a, b)
	}
}

// Ensure that a mandate's optional fields take their defaults.
func TestMandate_Defaults(t *testing.T) {
	m := mustParseMandate(t, []byte(minimalMandate))
	if m.MaxDepth() != contract.DefaultMaxDepth || m.MaxDepth() != 2 {
		t.Errorf("MaxDepth() = %d, want 2", m.MaxDepth())
	}
	for _, cur := range []string{"EUR", ""} {
		if r, ok := m.Rate(cur); !ok || r != journal.One {
			t.Errorf("Rate(%q) = %s, %v; want 1, true", cur, r, ok)
		}
	}
	if r, ok := m.Rate("USD"); ok {
		t.Errorf("Rate(USD) = %s, true; want no rate", r)
	}
	if !m.Active(time.Now()) {
		t.Error("a mandate without expires is not active")
	}
	if m.Expires != nil || m.Approval != nil || m.Require != nil || m.Data != nil || m.Budget.PerCall != nil {
		t.Errorf("unset fields are set: %s", mustJSON(t, m))
	}

	zero := mustParseMandate(t, []byte(editDoc(t, minimalMandate, setAt("delegation.max_depth", 0))))
	if zero.MaxDepth() != 0 {
		t.Errorf("MaxDepth() = %d, want 0 as written", zero.MaxDepth())
	}
}

// Ensure that every rule of a mandate refuses it with an error naming the
// field path.
func TestParseMandate_Invalid(t *testing.T) {
	for _, tt := range []struct {
		name  string
		edits []edit // applied to minimalMandate
		raw   string // the whole document, instead of minimalMandate and edits
		want  []fwant
	}{
		{name: "id in another namespace", edits: with(setAt("id", "bob/books")), want: fw("id", "must be in the issuer's namespace")},
		{name: "id missing", edits: with(delAt("id")), want: fw("id", "required")},
		{name: "id without a name", edits: with(setAt("id", "alice")), want: fw("id", "is not <issuer>/<name>")},
		{name: "id uppercase", edits: with(setAt("id", "alice/Books")), want: fw("id", "is not <issuer>/<name>")},
		{name: "id empty segment", edits: with(setAt("id", "alice/books..r1")), want: fw("id", "is not <issuer>/<name>")},
		{name: "issuer missing", edits: with(delAt("issuer")), want: fw("issuer", "required")},
		{name: "issuer not a handle", edits: with(setAt("issuer", "Alice"), setAt("id", "Alice/books")),
			want: fws("issuer", "is not an account handle", "id", "is not <issuer>/<name>")},
		{name: "grantee missing", edits: with(delAt("grantee")), want: fw("grantee", "required")},
		{name: "grantee without a name", edits: with(setAt("grantee", "assistant")), want: fw("grantee", "is not <handle>/<name>")},
		{name: "grantee with a range", edits: with(setAt("grantee", "alice/assistant@^1")), want: fw("grantee", "is not <handle>/<name>")},
		{name: "currency missing", edits: with(delAt("currency")), want: fw("currency", "want an ISO 4217 code")},
		{name: "currency lowercase", edits: with(setAt("currency", "eur")), want: fw("currency", `want an ISO 4217 code such as EUR, got "eur"`)},
		{name: "budget missing", edits: with(delAt("budget")), want: fw("budget.total", "required")},
		{name: "budget.total missing", edits: with(delAt("budget.total"), setAt("budget.per_call", "1")), want: fw("budget.total", "required")},
		{name: "budget.total negative", edits: with(setAt("budget.total", "-5")), want: fw("budget.total", "no sign")},
		{name: "budget.total seven decimals", edits: with(setAt("budget.total", "0.0000001")), want: fw("budget.total", "at most 6 decimals")},
		{name: "budget.per_call exponent", edits: with(setAt("budget.per_call", "1e2")), want: fw("budget.per_call", "exponent")},
		{name: "approval.above negative", edits: with(setAt("approval.above", "-1")), want: fw("approval.above", "no sign")},
		{name: "allow.agents uppercase", edits: with(setAt("allow.agents", []any{"holon-labs/*", "Holon/x"})), want: fw("allow.agents[1]", "Holon")},
		{name: "allow.agents star with range", edits: with(setAt("allow.agents", []any{"holon-labs/*@^1"})), want: fw("allow.agents[0]", "holon-labs/*@^1")},
		{name: "allow.agents bad range", edits: with(setAt("allow.agents", []any{"acme/x@^^1"})), want: fw("allow.agents[0]", "acme/x@^^1")},
		{name: "allow.capabilities star in the middle", edits: with(setAt("allow.capabilities", []any{"extraction.*.table"})),
			want: fw("allow.capabilities[0]", "invalid capability pattern")},
		{name: "allow.capabilities star first", edits: with(setAt("allow.capabilities", []any{"*.x"})), want: fw("allow.capabilities[0]", "invalid capability pattern")},
		{name: "deny.agents no namespace", edits: with(setAt("deny.agents", []any{"shady"})), want: fw("deny.agents[0]", "shady")},
		{name: "deny.capabilities uppercase", edits: with(setAt("deny.capabilities", []any{"crypto.*", "Crypto"})),
			want: fw("deny.capabilities[1]", "invalid capability pattern")},
		{name: "allow.agents not a list", edits: with(setAt("allow.agents", "holon-labs/*")), want: fw("allow.agents", "want a list")},
		{name: "require.license", edits: with(setAt("require.license", "osi")), want: fw("require.license", `"osi" is not any or open`)},
		{name: "require.min_success_rate above 1", edits: with(setAt("require.min_success_rate", "1.000001")),
			want: fw("require.min_success_rate", "1.000001 is above 1")},
		{name: "require.min_success_rate negative", edits: with(setAt("require.min_success_rate", "-0.5")), want: fw("require.min_success_rate", "no sign")},
		{name: "require.evaluated not a bool", edits: with(setAt("require.evaluated", "yes")), want: fw("require.evaluated", "want true or false")},
		{name: "data.retention unknown", edits: with(setAt("data.retention", "forever")), want: fw("data.retention", `"forever" is not none or a duration`)},
		{name: "data.retention too long", edits: with(setAt("data.retention", "200000d")), want: fw("data.retention", "too long")},
		{name: "data.regions uppercase", edits: with(setAt("data.regions", []any{"eu", "EU"})), want: fw("data.regions[1]", "not a lowercase region code")},
		{name: "fx own currency", edits: with(setAt("fx.EUR", "1")), want: fw("fx.EUR", "own currency needs no rate")},
		{name: "fx rate 0", edits: with(setAt("fx.USD", "0")), want: fw("fx.USD", "rate of 0")},
		{name: "fx rate 0.000000", edits: with(setAt("fx.GBP", "0.000000")), want: fw("fx.GBP", "rate of 0")},
		{name: "fx lowercase code", edits: with(setAt("fx.usd", "0.92")), want: fw("fx.usd", `"usd" is not an ISO 4217 code`)},
		{name: "fx long code", edits: with(setAt("fx.USDT", "0.92")), want: fw("fx.USDT", "is not an ISO 4217 code")},
		{name: "fx negative rate", edits: with(setAt("fx.USD", "-0.92")), want: fw("fx.USD", "no sign")},
		{name: "fx many", edits: with(setAt("fx.EUR", "1"), setAt("fx.USD", "0"), setAt("fx.gbp", "1.1"), setAt("fx.CHF", "1.05")),
			want: fws("fx.EUR", "own currency", "fx.USD", "rate of 0", "fx.gbp", "not an ISO 4217 code")},
		{name: "negative max_depth", edits: with(setAt("delegation.max_depth", -1)), want: fw("delegation.max_depth", "-1 is negative")},
		{name: "max_depth not a number", edits: with(setAt("delegation.max_depth", "2")), want: fw("delegation.max_depth", "whole number")},
		{name: "expires a date", edits: with(setAt("expires", "2027-01-01")), want: fw("expires", "RFC 3339")},
		{name: "expires words", edits: with(setAt("expires", "next year")), want: fw("expires", `got "next year"`)},
		{name: "expires without zone", edits: with(setAt("expires", "2027-01-01T00:00:00")), want: fw("expires", "RFC 3339")},
		{name: "expires a number", edits: with(setAt("expires", 1798761600)), want: fw("expires", "RFC 3339")},
		{name: "unknown field", edits: with(setAt("budgets", map[string]any{"total": "1"})), want: fw("budgets", "unknown field")},
		{name: "unknown nested field", edits: with(setAt("allow.agent", []any{"holon-labs/*"})), want: fw("allow.agent", "unknown field")},
		{name: "misspelt budget.total", edits: with(delAt("budget.total"), setAt("budget.totl", "1")),
			want: fws("budget.totl", "unknown field", "budget.total", "required")},
		{name: "duplicate key", raw: minimalMandate + "currency: USD\n", want: fw("currency", "duplicate key")},
		{name: "alias", raw: strings.Replace(minimalMandate, `total: "50.00"`, `total: &t "50.00", per_call: *t`, 1), want: fw("budget.per_call", "aliases")},
		{name: "not a mapping", raw: `["alice/books"]`, want: fw("", "want a mapping")},
		{name: "empty", raw: "\n", want: fw("", "empty document")},
		{name: "over 1 MiB", raw: minimalMandate + "#" + strings.Repeat(" ", 1<<20), want: fw("", "at most 1048576")},
		{name: "many problems", edits: with(setAt("id", "bob/books"), delAt("grantee"), setAt("currency", "euro"),
			setAt("require.license", "closed"), setAt("fx.EUR", "1"), setAt("delegation.max_depth", -2)),
			want: fws(
				"id", "issuer's namespace",
				"grantee", "required",
				"currency", "ISO 4217",
				"require.license", "not any or open",
				"delegation.max_depth", "negative")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.raw
			if src == "" {
				src = editDoc(t, minimalMandate, tt.edits...)
			}
			m, err := contract.ParseMandate([]byte(src))
			if err == nil {
				t.Fatalf("ParseMandate accepted the mandate: %s", mustJSON(t, m))
			}
			assertFields(t, err, holon.CodeInvalidMandate, tt.want)
		})
	}
}

// Ensure that Validate checks a mandate built in code, as ParseMandate
// checks one read from a document.
func TestMandate_Validate(t *testing.T) {
	m := mustParseMandate(t, []byte(minimalMandate))
	if err := m.Validate(); err != nil {
		t.Fatalf("Validate of a parsed mandate: %v", err)
	}
	m.Allow.Agents = append(m.Allow.Agents, "bad")
	m.FX = map[string]journal.Rate{"USD": 0}
	assertFields(t, m.Validate(), holon.CodeInvalidMandate, fws("allow.agents[1]", "bad", "fx.USD", "rate of 0"))

	var empty contract.Mandate
	assertFields(t, empty.Validate(), holon.CodeInvalidMandate, fws(
		"id", "required", "issuer", "required", "grantee", "required",
		"currency", "ISO 4217", "budget.total", "required"))
}

func mustParseMandate(t testing.TB, b []byte) *contract.Mandate {
	t.Helper()
	m, err := contract.ParseMandate(b)
	if err != nil {
		t.Fatalf("ParseMandate: %v\n%s", err, b)
	}
	return m
}

// Ensure that a mandate document cannot name a parent: only the gateway
// derives sub-mandates, and a parent would lift the namespace rule (alice
// could write bob's mandate).
func TestParseMandate_ParentRefused(t *testing.T) {
	doc := []byte(`
id: bob/x
issuer: alice
grantee: alice/assistant
currency: EUR
parent: bob/real
budget: {total: "1.00"}
`)
	_, err := contract.ParseMandate(doc)
	var ge *holon.Error
	if !errors.As(err, &ge) || ge.Code != holon.CodeInvalidMandate {
		t.Fatalf("ParseMandate: %v, want invalid_mandate", err)
	}
	found := false
	for _, f := range ge.Fields {
		if f.Path == "parent" {
			found = true
		}
	}
	if !found {
		t.Errorf("no error at parent: %v", err)
	}
}
