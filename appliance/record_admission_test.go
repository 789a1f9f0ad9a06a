package appliance_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/gateway"
)

// flakyManifest is test-lab/flaky: it fails with the unbilled declared
// bad_doc when its input says {"fail": true}.
const flakyManifest = `
id: test-lab/flaky
version: 1.0.0
summary: Succeeds or fails as asked.
license: proprietary
interface:
  input: { type: object, properties: { fail: { type: boolean } } }
  output: { type: object }
  errors:
    bad_doc: { billed: false, description: Asked to fail. }
pricing: { model: per_run, amount: "0.01", currency: EUR }
runtime: { kind: dev, tool: flaky }
data: { retention: none, regions: [eu], training: false }
`

// Ensure that require.min_success_rate is held against the measured record
// over the API: with 9 successes in 19 runs (under 20, the record does not
// count yet) the call is admitted; after the 20th run (9 of 20) it is
// refused 403 requirement_not_met, unbilled, and the listings that say what
// the mandate allows (GET /v0/agents?mandate=, MCP search_agents and
// get_agent) say the same.
func TestMandate_MinSuccessRateOverTheAPI(t *testing.T) {
	ta := newHostedApp(t, func(c *appliance.Config) {
		c.Registry = append(c.Registry, writeRegistry(t, map[string]string{"flaky.yaml": flakyManifest}))
		c.DevHandlers["flaky"] = func(_ context.Context, input json.RawMessage, c *gateway.Ctx) (any, error) {
			var in struct{ Fail bool }
			_ = json.Unmarshal(input, &in)
			if in.Fail {
				return nil, c.Error("bad_doc", "asked to fail")
			}
			return map[string]any{"ok": true}, nil
		}
	})
	ann := ta.signup("ann")
	ann.createMandate("picky", map[string]any{"budget": map[string]any{"total": "1.00"},
		"allow": map[string]any{"agents": []string{"test-lab/*"}}, "require": map[string]any{"min_success_rate": "0.90"}})
	call := func(fail bool) (int, map[string]any) {
		return ann.human.do("POST", "/v0/calls", map[string]any{"mandate": "ann/picky", "agent": "test-lab/flaky", "input": map[string]any{"fail": fail}})
	}
	for i := range 20 {
		if st, out := call(i >= 9); st == http.StatusForbidden {
			t.Fatalf("run %d, %d finished before it: %d %v; the requirement applies from 20 runs", i+1, i, st, out)
		}
	}
	st, out := call(false)
	if st != http.StatusForbidden || errorCode(out) != holon.CodeRequirementNotMet || receiptOf(out)["billed"] != false ||
		!strings.Contains(str(out), "succeeded 9 of 20 runs") {
		t.Errorf("after 9 of 20: %d %v, want 403 requirement_not_met, unbilled", st, out)
	}

	listed := ann.human.must(http.StatusOK, "GET", "/v0/agents?mandate=ann/picky&q=flaky", nil)
	agents, _ := listed["agents"].([]any)
	if len(agents) != 1 || obj(obj(agents[0])["denied"])["code"] != holon.CodeRequirementNotMet {
		t.Errorf("GET /v0/agents?mandate= lists %v, want test-lab/flaky denied requirement_not_met", agents)
	}
	key, _ := ann.newKey("ann/picky", false)
	s := connectMCP(t, ta.srv.URL+"/mcp", key, nil)
	found := s.ok("search_agents", map[string]any{"q": "flaky"})
	if res, _ := found["agents"].([]any); len(res) != 1 || obj(obj(res[0])["denied"])["code"] != holon.CodeRequirementNotMet {
		t.Errorf("search_agents: %v, want test-lab/flaky denied requirement_not_met", found)
	}
	if got := s.ok("get_agent", map[string]any{"agent": "test-lab/flaky"}); obj(got["under_mandate"])["allowed"] != false {
		t.Errorf("get_agent: under_mandate %v, want allowed false", got["under_mandate"])
	}
}
