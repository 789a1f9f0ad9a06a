package contract_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
)

// manifestSeeds are documents on the edges of the manifest parser: YAML
// features that JSON lacks, numbers where strings are due, and broken shapes.
var manifestSeeds = []string{
	baseManifest,
	strings.Replace(baseManifest, `amount: "0.10"`, `amount: 0.10`, 1),
	strings.Replace(baseManifest, `amount: "0.10"`, `amount: 1e-7`, 1),
	strings.Replace(baseManifest, `amount: "0.10"`, `amount: !!binary MC4xMA==`, 1),
	strings.Replace(baseManifest, "  output: {", "  output: &o {", 1) + "description: *o\n",
	strings.Replace(baseManifest, "summary: Extracts", "summary: &k Extracts", 1) + "*k : x\n",
	baseManifest + "<<: { description: merged }\n",
	baseManifest + "summary: Again.\n",
	baseManifest + "---\nid: acme/other\n",
	baseManifest + "description: !!binary /w==\n",
	baseManifest + "description: \"\\x7f\\u0085\\u2028\"\n",
	baseManifest + "runtime: { kind: dev, limits: { timeout_s: 9223372036854775808 } }\n",
	strings.Replace(baseManifest, "output: { type: object,", "output: { maximum: .inf, const: 2001-12-14, type: object,", 1),
	strings.Replace(baseManifest, "input: { type: object,", `input: { $ref: "https://example.com/s.json", type: object,`, 1),
	strings.Replace(baseManifest, "input: { type: object,", `input: { pattern: "(a)\\1", type: object,`, 1),
	strings.Replace(baseManifest, "  errors:\n", "  examples: [{ input: { file: x }, output: { total: \"1\" } }]\n  errors:\n", 1),
	baseManifest + "calls: [{ agent: acme/table@^1, max_cost: \"0.05\" }]\ndownstream: { mode: passthrough, cap: \"3\" }\n",
	baseManifest + "lineage: { fork_of: acme/base@=1.0.0 }\nroyalties: { forks: \"0.5\" }\ndata: { retention: 999999w, regions: [eu] }\n",
	`{"id": "acme/a", "version": "1.0.0", "summary": "s", "license": "proprietary", "interface": {"input": {}, "output": true},
	  "pricing": {"model": "quote", "max": 2.5, "currency": "USD"}, "runtime": {"kind": "dev", "limits": {"timeout_s": 0}}}`,
	strings.Replace(baseManifest, "output: { type: object,", `output: { minimum: -0.0, pattern: "\\pL{40}", type: object,`, 1),
	strings.Replace(baseManifest, "input: { type: object,", "input: { not: { not: { not: { not: {} } } }, type: object,", 1),
	"[1, 2]",
	"",
	"~",
	"id: !!null x\n",
}

// mandateSeeds are documents on the edges of the mandate parser.
var mandateSeeds = []string{
	minimalMandate,
	minimalMandate + "expires: 2027-01-01T00:00:00+02:00\n",
	minimalMandate + "expires: 2027-01-01\n",
	minimalMandate + "expires: \"2027-01-01T00:00:00.123456789Z\"\n",
	minimalMandate + "fx: { USD: 0.92, EUR: \"1\", usd: \"0\" }\n",
	minimalMandate + "delegation: { max_depth: -1 }\n",
	minimalMandate + "delegation: { max_depth: 0x10 }\n",
	minimalMandate + "data: { retention: 200000d, regions: [eu, US], training: !!bool yes }\n",
	minimalMandate + "require: { license: open, min_success_rate: 1.5 }\n",
	minimalMandate + "revoked: true\nparent: alice/root\n",
	strings.Replace(minimalMandate, `total: "50.00"`, `total: &t "50.00", per_call: *t`, 1),
	`{"id": "alice/x", "issuer": "alice", "grantee": "alice/a", "currency": "EUR", "budget": {"total": 1e2}}`,
	"---\n",
}

// Ensure that ParseManifest never panics; that a manifest it accepts, written
// back as JSON, reads again as the same manifest; and that it refuses any
// other document with an invalid_manifest error that names a field.
func FuzzParseManifest(f *testing.F) {
	for _, name := range globTestdata(f, "manifests/*") {
		f.Add(readTestdata(f, "manifests/"+name))
	}
	for _, s := range manifestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := contract.ParseManifest(b)
		if err != nil {
			assertRefused(t, err, holon.CodeInvalidManifest)
			return
		}
		assertRoundTrip(t, m, func(b []byte) (any, error) { return contract.ParseManifest(b) })
	})
}

// Ensure that ParseMandate never panics; that a mandate it accepts, written
// back as JSON, reads again as the same mandate; and that it refuses any
// other document with an invalid_mandate error that names a field.
func FuzzParseMandate(f *testing.F) {
	for _, name := range globTestdata(f, "mandates/*") {
		f.Add(readTestdata(f, "mandates/"+name))
	}
	for _, s := range mandateSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := contract.ParseMandate(b)
		if err != nil {
			assertRefused(t, err, holon.CodeInvalidMandate)
			return
		}
		assertRoundTrip(t, m, func(b []byte) (any, error) { return contract.ParseMandate(b) })
	})
}

// assertRefused checks that err is an *holon.Error with code and at least
// one field error, each with a message.
func assertRefused(t *testing.T, err error, code string) {
	t.Helper()
	var e *holon.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *holon.Error", err, err)
	}
	if e.Code != code || len(e.Fields) == 0 {
		t.Fatalf("error = %v; want code %s with field errors", e, code)
	}
	for _, f := range e.Fields {
		if f.Msg == "" {
			t.Fatalf("field error %q has no message", f.Path)
		}
	}
}

// assertRoundTrip checks that v, marshalled to JSON and parsed again, gives
// the same JSON.
func assertRoundTrip(t *testing.T, v any, parse func([]byte) (any, error)) {
	t.Helper()
	first, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal of an accepted document: %v", err)
	}
	again, err := parse(first)
	if err != nil {
		t.Fatalf("the accepted document, as JSON, is refused: %v\n%s", err, first)
	}
	second, err := json.Marshal(again)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("the document changed when read again as JSON:\nfirst:  %s\nsecond: %s", first, second)
	}
}
