package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// flakyDoc is acme/flaky at version: it fails with the unbilled declared
// bad_doc when its input says {"fail": true}.
func flakyDoc(version string) string {
	return agentDoc("acme/flaky", version, `
interface:
  input: {type: object}
  output: {}
  errors: {bad_doc: {billed: false}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev, tool: flaky}
`)
}

func flakyHandler(_ context.Context, input json.RawMessage, _ *gateway.Ctx) (any, error) {
	var in struct{ Fail bool }
	_ = json.Unmarshal(input, &in)
	if in.Fail {
		return nil, &gateway.AgentError{Code: "bad_doc", Message: "asked to fail"}
	}
	return map[string]any{"ok": true}, nil
}

// Ensure that require.min_success_rate is held against the measured
// record (mandate.md: once it has at least 20 finished runs): a version
// that succeeded 9 of its first 19 runs is still admitted, after its 20th
// run (9 of 20) it is denied requirement_not_met with the figures, while a
// mandate without the requirement still reaches it and a new version,
// with no runs, is admitted.
func TestEngine_MinSuccessRateFromTheRecord(t *testing.T) {
	te := newEngine(t, []string{flakyDoc("1.0.0"), flakyDoc("1.1.0")}, map[string]gateway.DevHandler{"flaky": flakyHandler},
		mandateWith("strict", `require: {min_success_rate: "0.90"}`), mainMandate)
	call := func(mandate, agent string, fail bool) *gateway.CallResult {
		t.Helper()
		input, _ := json.Marshal(map[string]bool{"fail": fail})
		return te.call(t, gateway.CallInput{Mandate: mandate, Agent: agent, Input: input})
	}
	for i := range 20 {
		res := call("alice/strict", "acme/flaky@1.0.0", i >= 9)
		if res.Receipt.Status == holon.StatusDenied {
			t.Fatalf("run %d (%d finished before it): denied %s (%s); the requirement applies from 20 runs", i+1, i, *res.Receipt.Error, res.Message)
		}
	}
	res := call("alice/strict", "acme/flaky@1.0.0", false)
	if res.Receipt.Status != holon.StatusDenied || res.Receipt.Error == nil || *res.Receipt.Error != holon.CodeRequirementNotMet ||
		!strings.Contains(res.Message, "succeeded 9 of 20 runs") || res.Receipt.Billed {
		t.Errorf("after 9 of 20: %s %v %q, want denied requirement_not_met, unbilled", res.Receipt.Status, res.Receipt.Error, res.Message)
	}
	if res := call("alice/main", "acme/flaky@1.0.0", false); res.Receipt.Status != holon.StatusSucceeded {
		t.Errorf("without the requirement: %s (%s)", res.Receipt.Status, res.Message)
	}
	if res := call("alice/strict", "acme/flaky@1.1.0", false); res.Receipt.Status != holon.StatusSucceeded {
		t.Errorf("a new version with no runs: %s (%s), want admitted", res.Receipt.Status, res.Message)
	}
	if got := te.ran("flaky"); got != 22 {
		t.Errorf("the handler ran %d times, want 22 (the denied call never runs)", got)
	}
}
