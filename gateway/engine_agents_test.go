package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"holon.dev/holon/gateway"
)

// The test agents. Every one is acme's, version 1.0.0 unless it says, a dev
// agent whose handler is its name unless runtime.tool names another.

// agentDoc is a manifest: the identity every test agent shares, then body.
func agentDoc(id, version, body string) string {
	return fmt.Sprintf("id: %s\nversion: %s\nsummary: A test agent.\nlicense: proprietary\n%s", id, version, body)
}

var (
	agentEcho = agentDoc("acme/echo", "1.0.0", `
capabilities: [text.echo]
interface: {input: {type: object}, output: {type: object}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev}
`)
	agentFree = agentDoc("acme/free", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: free}
runtime: {kind: dev, tool: echo}
`)
	agentStrict = agentDoc("acme/strict", "1.0.0", `
interface:
  input: {type: object, required: [text], properties: {text: {type: string}}}
  output: {}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev, tool: echo}
`)
	agentBadOutput = agentDoc("acme/bad-output", "1.0.0", `
interface: {input: {}, output: {type: object, required: [text]}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev, tool: echo}
`)
	agentSlow = agentDoc("acme/slow", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev, limits: {timeout_s: 1}}
`)
	agentHang = agentDoc("acme/hang", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.05", currency: EUR}
runtime: {kind: dev, limits: {timeout_s: 60}}
`)
	agentCrash = agentDoc("acme/crash", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev}
`)
	agentDeclared = agentDoc("acme/declared", "1.0.0", `
interface:
  input: {}
  output: {}
  errors:
    quota: {billed: true}
    bad_doc: {billed: false}
pricing: {model: per_run, amount: "0.10", currency: EUR, charge_on: attempt}
runtime: {kind: dev, tool: declared}
`)
	agentDeclaredOnSuccess = agentDoc("acme/declared-s", "1.0.0", `
interface:
  input: {}
  output: {}
  errors:
    quota: {billed: true}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev, tool: declared}
`)
	agentUnits = agentDoc("acme/units", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_unit, amount: "0.10", unit: page, max: "3.00", currency: EUR}
runtime: {kind: dev}
`)
	agentQuote = agentDoc("acme/quote", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: quote, max: "2.00", currency: EUR}
runtime: {kind: dev}
`)
	agentUSD = agentDoc("acme/usd", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.10", currency: USD}
runtime: {kind: dev, tool: echo}
`)
	agentGhost = agentDoc("acme/ghost", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev}
`)
	agentRemote = agentDoc("acme/remote", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: mcp, endpoint: "https://agents.example/mcp", tool: remote}
`)
	// agentOrch runs the calls its input lists (scriptHandler), the caller
	// paying them out of its hold.
	agentOrch = agentDoc("acme/orch", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev, tool: script}
downstream: {mode: passthrough, cap: "1.00"}
calls:
  - {agent: acme/echo, max_cost: "0.20"}
  - {agent: acme/units, max_cost: "0.50"}
  - {agent: acme/strict, max_cost: "0.20"}
  - {agent: acme/hang, max_cost: "0.20"}
  - {agent: acme/orch2, max_cost: "0.30"}
  - {capability: text.echo, max_cost: "0.20"}
`)
	// agentOrch2 is a second passthrough level under agentOrch.
	agentOrch2 = agentDoc("acme/orch2", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.05", currency: EUR}
runtime: {kind: dev, tool: script}
downstream: {mode: passthrough, cap: "0.20"}
calls:
  - {agent: acme/echo, max_cost: "0.10"}
  - {agent: acme/hang, max_cost: "0.10"}
`)
	// agentOrchIncluded pays its calls itself, out of its own price.
	agentOrchIncluded = agentDoc("acme/orch-inc", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.50", currency: EUR}
runtime: {kind: dev, tool: script}
downstream: {mode: included}
calls:
  - {agent: acme/echo, max_cost: "0.20"}
`)
	// agentOrchWide declares a call its callers' mandates do not allow: its
	// sub-mandate would widen theirs.
	agentOrchWide = agentDoc("acme/orch-wide", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev, tool: script}
downstream: {mode: passthrough, cap: "0.50"}
calls:
  - {agent: other/thing, max_cost: "0.20"}
`)
	// agentOrchTimeout times out after 1 s while its child may still run.
	agentOrchTimeout = agentDoc("acme/orch-timeout", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev, limits: {timeout_s: 1}}
downstream: {mode: passthrough, cap: "0.50"}
calls:
  - {agent: acme/hang, max_cost: "0.20"}
`)
)

// allAgents is every test agent.
var allAgents = []string{
	agentEcho, agentFree, agentStrict, agentBadOutput, agentSlow, agentHang, agentCrash,
	agentDeclared, agentDeclaredOnSuccess, agentUnits, agentQuote, agentUSD, agentGhost,
	agentRemote, agentOrch, agentOrch2, agentOrchIncluded, agentOrchWide, agentOrchTimeout,
}

// mainMandate is alice's: every acme agent, capabilities under text., 10.00
// EUR, and a rate for USD.
const mainMandate = `
id: alice/main
issuer: alice
grantee: alice/assistant
currency: EUR
budget: {total: "10.00"}
allow: {agents: ["acme/*"], capabilities: ["text.*"]}
fx: {USD: "0.923457"}
`

// mandateWith is mainMandate under another name, with extra top-level YAML
// that replaces its fields (a YAML document cannot repeat a key, so the
// fields given replace mainMandate's lines of the same key).
func mandateWith(name string, fields ...string) string {
	lines := strings.Split(strings.TrimSpace(mainMandate), "\n")
	var out []string
	for _, l := range lines {
		key, _, _ := strings.Cut(l, ":")
		replaced := false
		for _, f := range fields {
			if fk, _, _ := strings.Cut(f, ":"); fk == key {
				replaced = true
			}
		}
		switch {
		case key == "id":
			out = append(out, "id: alice/"+name)
		case !replaced:
			out = append(out, l)
		}
	}
	return strings.Join(append(out, fields...), "\n") + "\n"
}

// scriptCall is one downstream call an orchestrator's input asks for.
type scriptCall struct {
	Agent      string          `json:"agent,omitempty"`
	Capability string          `json:"capability,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	MaxCost    string          `json:"max_cost,omitempty"`
}

// scriptOutput is what scriptHandler returns: each call's outcome, in order.
type scriptOutput struct {
	Results []gateway.CallOutcome `json:"results"`
}

// script is the input of an orchestrator that makes calls, in order.
func script(calls ...scriptCall) json.RawMessage {
	b, err := json.Marshal(map[string]any{"calls": calls})
	if err != nil {
		panic(err)
	}
	return b
}

// scriptHandler makes the downstream calls its input lists, one after the
// other, and returns their outcomes.
func scriptHandler(ctx context.Context, input json.RawMessage, c *gateway.Ctx) (any, error) {
	var in struct {
		Calls []scriptCall `json:"calls"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, err
	}
	out := scriptOutput{Results: []gateway.CallOutcome{}}
	for _, sc := range in.Calls {
		t := gateway.Target{Agent: sc.Agent, Capability: sc.Capability, MaxCost: eurPtr(sc.MaxCost)}
		var input any = map[string]any{}
		if len(sc.Input) > 0 {
			input = sc.Input
		}
		out.Results = append(out.Results, c.Call(ctx, t, input))
	}
	return out, nil
}

// echoHandler returns its input.
func echoHandler(_ context.Context, input json.RawMessage, _ *gateway.Ctx) (any, error) {
	return input, nil
}

// testHandlers are the handlers of the test agents that need nothing from
// the test; acme/slow, acme/hang and acme/orch-timeout block, so each test
// that calls them registers its own.
func testHandlers() map[string]gateway.DevHandler {
	return map[string]gateway.DevHandler{
		"echo":   echoHandler,
		"script": scriptHandler,
		"crash": func(_ context.Context, input json.RawMessage, _ *gateway.Ctx) (any, error) {
			var in struct{ Mode string }
			_ = json.Unmarshal(input, &in)
			if in.Mode == "panic" {
				panic("the agent fell over")
			}
			return nil, errors.New("the agent failed without a code")
		},
		"declared": func(_ context.Context, input json.RawMessage, c *gateway.Ctx) (any, error) {
			var in struct{ Code string }
			if err := json.Unmarshal(input, &in); err != nil {
				return nil, err
			}
			if in.Code == "" {
				return map[string]any{}, nil
			}
			return nil, c.Error(in.Code, "declared failure "+in.Code)
		},
		"units": func(_ context.Context, input json.RawMessage, c *gateway.Ctx) (any, error) {
			var in struct{ Units *int64 }
			if err := json.Unmarshal(input, &in); err != nil {
				return nil, err
			}
			if in.Units != nil {
				c.Units(*in.Units)
			}
			mc, ok := c.MaxCost()
			return map[string]any{"max_cost": mc.String(), "capped": ok}, nil
		},
		"quote": func(_ context.Context, input json.RawMessage, c *gateway.Ctx) (any, error) {
			var in struct{ Quote *string }
			if err := json.Unmarshal(input, &in); err != nil {
				return nil, err
			}
			if in.Quote != nil {
				c.Quote(*in.Quote)
			}
			return map[string]any{}, nil
		},
	}
}

// blockingHandler announces each run (its receipt id) on started, then
// returns an empty output once release is closed, or the context's error
// when its context ends first.
func blockingHandler(started chan<- string, release <-chan struct{}) gateway.DevHandler {
	return func(ctx context.Context, _ json.RawMessage, c *gateway.Ctx) (any, error) {
		// Telling the test is an effect leaving the agent: after the
		// reservation is durable, as the rule wants.
		if err := c.Durable(); err != nil {
			return nil, err
		}
		started <- c.Receipt()
		select {
		case <-release:
			return map[string]any{}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
