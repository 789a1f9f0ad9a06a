package contract_test

import (
	"encoding/json"
	"strings"
	"testing"

	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/gateway/semver"
)

// Ensure that agent references parse into namespace, name and optional range.
func TestParseAgentRef(t *testing.T) {
	for _, tt := range []struct {
		in, ns, name, rng string
		hasRange          bool
	}{
		{in: "acme/invoice", ns: "acme", name: "invoice"},
		{in: "holon-labs/sec-company@^1", ns: "holon-labs", name: "sec-company", rng: "^1", hasRange: true},
		{in: "acme/invoice@1.2.3", ns: "acme", name: "invoice", rng: "1.2.3", hasRange: true},
		{in: "a1/x_y-z@>=1.0.0 <2.0.0", ns: "a1", name: "x_y-z", rng: ">=1.0.0 <2.0.0", hasRange: true},
		{in: "ab/0@1.x || ^3.0.0-rc.1", ns: "ab", name: "0", rng: "1.x || ^3.0.0-rc.1", hasRange: true},
		{in: "acme/x@*", ns: "acme", name: "x", rng: "*", hasRange: true},
	} {
		t.Run(tt.in, func(t *testing.T) {
			ref, err := contract.ParseAgentRef(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if ref.NS != tt.ns || ref.Name != tt.name || ref.Raw != tt.in || ref.String() != tt.in {
				t.Fatalf("got %+v", ref)
			}
			if ref.ID() != tt.ns+"/"+tt.name {
				t.Fatalf("ID() = %q", ref.ID())
			}
			if (ref.Range != nil) != tt.hasRange {
				t.Fatalf("Range = %v, want one: %v", ref.Range, tt.hasRange)
			}
			if tt.hasRange && ref.Range.String() != tt.rng {
				t.Fatalf("Range = %q, want %q", ref.Range, tt.rng)
			}
		})
	}
}

// Ensure that malformed agent references are refused with an error that says what is wrong.
func TestParseAgentRef_Invalid(t *testing.T) {
	for _, tt := range []struct{ in, err string }{
		{"", `invalid agent reference "": "" is not ns/name`},
		{"acme", `"acme" is not ns/name`},
		{"a/x", `namespace "a" is not a handle`},
		{"-acme/x", `namespace "-acme" is not a handle`},
		{"acme-/x", `namespace "acme-" is not a handle`},
		{"ac--me/x", `namespace "ac--me" is not a handle`},
		{"Acme/x", `namespace "Acme" is not a handle`},
		{"ac_me/x", `namespace "ac_me" is not a handle`},
		{strings.Repeat("a", 40) + "/x", `is not a handle`},
		{"acme/", `agent name "" is not 1 to 64`},
		{"acme/X", `agent name "X" is not 1 to 64`},
		{"acme/x.y", `agent name "x.y" is not 1 to 64`},
		{"acme/x/y", `agent name "x/y" is not 1 to 64`},
		{"acme/" + strings.Repeat("x", 65), `is not 1 to 64`},
		{"acme/*", `agent name "*" is not 1 to 64`},
		{"acme/x@", `empty range after "@"`},
		{"acme/x@ ", `empty range after "@"`},
		{"acme/x@^1.2.x.4", `invalid agent reference "acme/x@^1.2.x.4": invalid range "^1.2.x.4": version "1.2.x.4" has more than three parts`},
		{"acme/x@1@2", `invalid range "1@2"`},
		{"/x", `namespace "" is not a handle`},
	} {
		t.Run(tt.in, func(t *testing.T) {
			_, err := contract.ParseAgentRef(tt.in)
			if err == nil {
				t.Fatal("expected an error")
			}
			if !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error %q does not contain %q", err, tt.err)
			}
		})
	}
}

// Ensure that handles follow GitHub's login rules: 2 to 39 characters, single inner hyphens.
func TestValidHandle(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"ab", true},
		{"holon-labs", true},
		{"a-b-c", true},
		{"0x", true},
		{strings.Repeat("a", 39), true},
		{"", false},
		{"a", false},
		{strings.Repeat("a", 40), false},
		{"-ab", false},
		{"ab-", false},
		{"a--b", false},
		{"Ab", false},
		{"a_b", false},
		{"a.b", false},
		{"a b", false},
		{"é1", false},
	} {
		if got := contract.ValidHandle(tt.in); got != tt.want {
			t.Errorf("ValidHandle(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// Ensure that agent names are 1 to 64 lowercase letters, digits, '-' and '_'.
func TestValidAgentName(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"x", true},
		{"invoice-pipeline", true},
		{"_x_", true},
		{"-x-", true},
		{"a--b__c9", true},
		{strings.Repeat("x", 64), true},
		{"", false},
		{strings.Repeat("x", 65), false},
		{"X", false},
		{"a.b", false},
		{"a/b", false},
		{"a@b", false},
		{"*", false},
	} {
		if got := contract.ValidAgentName(tt.in); got != tt.want {
			t.Errorf("ValidAgentName(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// mustVersion parses s or fails the test.
func mustVersion(tb testing.TB, s string) semver.Version {
	tb.Helper()
	v, err := semver.ParseVersion(s)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// mustAgentPattern parses s or fails the test.
func mustAgentPattern(tb testing.TB, s string) contract.AgentPattern {
	tb.Helper()
	p, err := contract.ParseAgentPattern(s)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Ensure that agent patterns match by namespace, name and version range.
func TestAgentPattern_Match(t *testing.T) {
	for _, tt := range []struct {
		pattern, id, version string
		want                 bool
	}{
		{"*", "acme/x", "1.0.0", true},
		{"*", "acme/x", "1.0.0-beta", true},
		{"*", "not-an-id", "1.0.0", false},
		{"*", "Acme/x", "1.0.0", false},
		{"acme/*", "acme/x", "0.1.0", true},
		{"acme/*", "acme/x", "3.0.0-rc.1", true},
		{"acme/*", "acmex/y", "1.0.0", false},
		{"acme/*", "acme-x/y", "1.0.0", false},
		{"acme/x", "acme/x", "2.0.0", true},
		{"acme/x", "acme/x", "2.0.0-beta", true},
		{"acme/x", "acme/xy", "2.0.0", false},
		{"acme/x", "acme/y", "2.0.0", false},
		{"acme/x@^1", "acme/x", "1.5.0", true},
		{"acme/x@^1", "acme/x", "2.0.0", false},
		{"acme/x@^1", "acme/x", "1.5.0-beta", false},
		{"acme/x@^1", "acme/y", "1.5.0", false},
		{"acme/x@^1.2.0-rc.1", "acme/x", "1.2.0-rc.2", true},
		{"acme/x@1.2.3", "acme/x", "1.2.3", true},
		{"acme/x@1.2.3", "acme/x", "1.2.4", false},
	} {
		if got := mustAgentPattern(t, tt.pattern).Match(tt.id, mustVersion(t, tt.version)); got != tt.want {
			t.Errorf("%q.Match(%q, %s) = %v, want %v", tt.pattern, tt.id, tt.version, got, tt.want)
		}
	}
}

// Ensure that an agent pattern covers a child pattern exactly when it matches every agent version the child does.
func TestAgentPattern_Covers(t *testing.T) {
	for _, tt := range []struct {
		parent, child string
		want          bool
	}{
		{"*", "*", true},
		{"*", "acme/*", true},
		{"*", "acme/x", true},
		{"*", "acme/x@^1", true},

		{"acme/*", "*", false},
		{"acme/*", "acme/*", true},
		{"acme/*", "other/*", false},
		{"acme/*", "acme/x", true},
		{"acme/*", "acme/x@^1", true},
		{"acme/*", "acmex/y", false},
		{"acme/*", "other/x@^1", false},

		{"acme/x", "acme/x", true},
		{"acme/x", "acme/x@^1", true},
		{"acme/x", "acme/x@*", true},
		{"acme/x", "acme/x@1.0.0-beta", true},
		{"acme/x", "acme/*", false},
		{"acme/x", "*", false},
		{"acme/x", "acme/y", false},
		{"acme/x", "acme/xy@^1", false},

		{"acme/x@^1", "acme/x@^1.2", true},
		{"acme/x@^1", "acme/x@^1", true},
		{"acme/x@^1", "acme/x@1.4.2", true},
		{"acme/x@^1", "acme/x@>=1.0.0 <2.0.0", true},
		{"acme/x@^1", "acme/x@>=1", false},
		{"acme/x@^1.2", "acme/x@^1", false},
		{"acme/x@^1", "acme/x@^1.2.3-beta", false},
		{"acme/x@^1", "acme/x", false},
		{"acme/x@*", "acme/x", false},
		{"acme/x@*", "acme/x@^1", true},
		{"acme/x@^1", "acme/y@^1.2", false},
		{"acme/x@^1", "acme/*", false},
		{"acme/x@^1", "*", false},
		{"acme/x@>=1.0.0 <2.0.0 || >=2.0.0 <3.0.0", "acme/x@^1.5 || ^2", true},
		{"acme/x@^1.5 || ^2", "acme/x@>=1.0.0 <2.0.0 || >=2.0.0 <3.0.0", false},
	} {
		t.Run(tt.parent+" covers "+tt.child, func(t *testing.T) {
			if got := mustAgentPattern(t, tt.parent).Covers(mustAgentPattern(t, tt.child)); got != tt.want {
				t.Fatalf("%q.Covers(%q) = %v, want %v", tt.parent, tt.child, got, tt.want)
			}
		})
	}
}

// Ensure that malformed agent patterns are refused with an error that says what is wrong.
func TestParseAgentPattern_Invalid(t *testing.T) {
	for _, tt := range []struct{ in, err string }{
		{"", `invalid agent pattern "": "" is not ns/name`},
		{"**", `"**" is not ns/name`},
		{"acme", `"acme" is not ns/name`},
		{"acme/*@^1", `"ns/*" takes no range or suffix`},
		{"acme/*x", `"ns/*" takes no range or suffix`},
		{"acme/x*", `agent name "x*" is not 1 to 64`},
		{"*/x", `namespace "*" is not a handle`},
		{"a/*", `namespace "a" is not a handle`},
		{"acme/x@", `empty range after "@"`},
		{"acme/x@^1 ||", `invalid range "^1 ||": empty comparator set beside "||"`},
	} {
		t.Run(tt.in, func(t *testing.T) {
			_, err := contract.ParseAgentPattern(tt.in)
			if err == nil {
				t.Fatal("expected an error")
			}
			if !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error %q does not contain %q", err, tt.err)
			}
		})
	}
}

// Ensure that the zero patterns match and cover nothing, so a missing field never grants anything.
func TestPattern_Zero(t *testing.T) {
	var agents contract.AgentPattern
	if agents.Match("acme/x", mustVersion(t, "1.0.0")) || agents.Covers(mustAgentPattern(t, "acme/x")) {
		t.Fatal("zero AgentPattern matches or covers")
	}
	if mustAgentPattern(t, "*").Covers(agents) {
		t.Fatal("* covers the zero AgentPattern")
	}
	var capabilities contract.CapabilityPattern
	if capabilities.Match("a.b") || capabilities.Covers(mustCapabilityPattern(t, "a.b")) {
		t.Fatal("zero CapabilityPattern matches or covers")
	}
	if mustCapabilityPattern(t, "*").Covers(capabilities) {
		t.Fatal("* covers the zero CapabilityPattern")
	}
}

// Ensure that a capability is one or more dot-separated segments of lowercase letters, digits, '-' and '_'.
func TestValidCapability(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"search", true},
		{"extraction.invoice", true},
		{"a.b-c_d.e1", true},
		{"0.1", true},
		{"", false},
		{".a", false},
		{"a.", false},
		{"a..b", false},
		{"A.b", false},
		{"a b", false},
		{"a.*", false},
		{"*", false},
		{"a/b", false},
	} {
		if got := contract.ValidCapability(tt.in); got != tt.want {
			t.Errorf("ValidCapability(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// mustCapabilityPattern parses s or fails the test.
func mustCapabilityPattern(tb testing.TB, s string) contract.CapabilityPattern {
	tb.Helper()
	p, err := contract.ParseCapabilityPattern(s)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Ensure that capability patterns match exactly, everything under a prefix, or everything.
func TestCapabilityPattern_Match(t *testing.T) {
	for _, tt := range []struct {
		pattern, capability string
		want                bool
	}{
		{"*", "search", true},
		{"*", "a.b.c", true},
		{"*", "", false},
		{"*", "A", false},
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", true},
		{"a.*", "a", false},
		{"a.*", "ab.c", false},
		{"a.*", "a.", false},
		{"a.*", "b.a", false},
		{"a.b.*", "a.b.c", true},
		{"a.b.*", "a.b", false},
		{"a.b.*", "a.bc.d", false},
		{"a.b", "a.b", true},
		{"a.b", "a.b.c", false},
		{"a.b", "a", false},
		{"search", "search", true},
		{"search", "search.web", false},
	} {
		if got := mustCapabilityPattern(t, tt.pattern).Match(tt.capability); got != tt.want {
			t.Errorf("%q.Match(%q) = %v, want %v", tt.pattern, tt.capability, got, tt.want)
		}
	}
}

// Ensure that a capability pattern covers a child pattern exactly when it matches every capability the child does.
func TestCapabilityPattern_Covers(t *testing.T) {
	for _, tt := range []struct {
		parent, child string
		want          bool
	}{
		{"*", "*", true},
		{"*", "a.*", true},
		{"*", "a.b", true},
		{"a.*", "a.*", true},
		{"a.*", "a.b", true},
		{"a.*", "a.b.*", true},
		{"a.*", "a.b.c", true},
		{"a.*", "*", false},
		{"a.*", "a", false},
		{"a.*", "ab.*", false},
		{"a.*", "ab.c", false},
		{"a.*", "b.*", false},
		{"a.b.*", "a.*", false},
		{"a.b.*", "a.b", false},
		{"a.b.*", "a.b.c.*", true},
		{"a.b", "a.b", true},
		{"a.b", "a.b.*", false},
		{"a.b", "a.*", false},
		{"a.b", "a.b.c", false},
		{"a.b", "*", false},
		{"a.b", "a.c", false},
	} {
		t.Run(tt.parent+" covers "+tt.child, func(t *testing.T) {
			if got := mustCapabilityPattern(t, tt.parent).Covers(mustCapabilityPattern(t, tt.child)); got != tt.want {
				t.Fatalf("%q.Covers(%q) = %v, want %v", tt.parent, tt.child, got, tt.want)
			}
		})
	}
}

// Ensure that malformed capability patterns are refused with an error that says what is wrong.
func TestParseCapabilityPattern_Invalid(t *testing.T) {
	for _, tt := range []struct{ in, err string }{
		{"", `invalid capability pattern "": empty capability`},
		{"a.*.b", `"*" may only be the whole pattern or its last segment`},
		{"*.a", `"*" may only be the whole pattern or its last segment`},
		{"a*", `"*" may only be the whole pattern or its last segment`},
		{"**", `"*" may only be the whole pattern or its last segment`},
		{".*", `empty capability`},
		{"a..*", `capability "a." has an empty segment`},
		{"a.", `capability "a." has an empty segment`},
		{"A.b", `capability "A.b" has 'A', not a lowercase letter`},
		{"a b", `capability "a b" has ' '`},
	} {
		t.Run(tt.in, func(t *testing.T) {
			_, err := contract.ParseCapabilityPattern(tt.in)
			if err == nil {
				t.Fatal("expected an error")
			}
			if !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error %q does not contain %q", err, tt.err)
			}
		})
	}
}

// Ensure that patterns and references read from and write to JSON as the text they were written as.
func TestPattern_JSON(t *testing.T) {
	type rules struct {
		Agents       []contract.AgentPattern      `json:"agents"`
		Capabilities []contract.CapabilityPattern `json:"capabilities"`
		Agent        contract.AgentRef            `json:"agent"`
	}
	const in = `{"agents":["holon-labs/*","acme/invoice-pipeline@^1","*"],"capabilities":["extraction.*","search"],"agent":"holon-labs/sec-company@~1.2"}`
	var doc rules
	if err := json.Unmarshal([]byte(in), &doc); err != nil {
		t.Fatal(err)
	}
	if !doc.Agents[1].Match("acme/invoice-pipeline", mustVersion(t, "1.9.0")) || doc.Agents[1].Match("acme/invoice-pipeline", mustVersion(t, "2.0.0")) {
		t.Fatal("decoded agent pattern does not behave as acme/invoice-pipeline@^1")
	}
	if !doc.Capabilities[0].Match("extraction.table") || doc.Capabilities[1].Match("search.web") {
		t.Fatal("decoded capability patterns do not behave as written")
	}
	if doc.Agent.ID() != "holon-labs/sec-company" || doc.Agent.Range.String() != "~1.2" {
		t.Fatalf("decoded agent reference %+v", doc.Agent)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Fatalf("got %s, want %s", out, in)
	}
	for _, bad := range []struct{ in, err string }{
		{`{"agents":["acme"]}`, `invalid agent pattern "acme"`},
		{`{"capabilities":["a.*.b"]}`, `invalid capability pattern "a.*.b"`},
		{`{"agent":"acme/x@"}`, `invalid agent reference "acme/x@"`},
	} {
		if err := json.Unmarshal([]byte(bad.in), &doc); err == nil || !strings.Contains(err.Error(), bad.err) {
			t.Errorf("decoding %s: got error %v, want %q", bad.in, err, bad.err)
		}
	}
}
