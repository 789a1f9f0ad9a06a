package agents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/appliance/agents"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// Ensure that Sets names the shipped agents and the demo agents.
func TestSets(t *testing.T) {
	if got, want := agents.Sets(), []string{"agents", "examples"}; !slices.Equal(got, want) {
		t.Fatalf("Sets() = %q, want %q", got, want)
	}
}

// Ensure that every set loads, its manifests parse and validate, and each
// follows the conventions of the agents that ship with the gateway.
func TestLoad(t *testing.T) {
	commitRE := regexp.MustCompile(`^[0-9a-f]{40}$`)
	for _, tt := range []struct {
		set  string
		refs []string
	}{
		{"agents", []string{"holon-labs/csv-profile@1.0.0", "holon-labs/summarize@1.0.0"}},
		{"examples", []string{
			"holon-labs/company-lookup@1.0.0",
			"holon-labs/invoice-pipeline@0.4.0",
			"holon-labs/text-tables@1.0.0",
		}},
	} {
		t.Run(tt.set, func(t *testing.T) {
			ms := load(t, tt.set)
			var refs []string
			for _, m := range ms {
				refs = append(refs, m.Ref())
			}
			if !slices.Equal(refs, tt.refs) {
				t.Fatalf("Load(%q) = %q, want %q", tt.set, refs, tt.refs)
			}
			for _, m := range ms {
				if m.Runtime.Kind != contract.RuntimeDev {
					t.Errorf("%s: runtime.kind = %q, want dev", m.Ref(), m.Runtime.Kind)
				}
				if m.License != "Apache-2.0" || m.Source == nil ||
					m.Source.Repository != "https://github.com/holon-labs/holon" || !commitRE.MatchString(m.Source.Commit) {
					t.Errorf("%s: license %q, source %+v; want Apache-2.0 from github.com/holon-labs/holon at a full commit", m.Ref(), m.License, m.Source)
				}
				regions := []string{"eu"}
				if m.ID == "holon-labs/summarize" {
					// Its work runs at Anthropic, which it names as a subprocessor.
					regions = []string{"us"}
					if d := m.Data; d == nil || !slices.Equal(d.Subprocessors, []string{"Anthropic"}) {
						t.Errorf("%s: data = %+v, want Anthropic as its subprocessor", m.Ref(), d)
					}
				}
				if d := m.Data; d == nil || d.Retention != "none" || !slices.Equal(d.Regions, regions) || d.Training == nil || *d.Training {
					t.Errorf("%s: data = %+v, want retention none, regions %v, training false", m.Ref(), d, regions)
				}
				if len(m.Capabilities) == 0 {
					t.Errorf("%s: no capability", m.Ref())
				}
				if len(m.Interface.Examples) == 0 {
					t.Errorf("%s: no example", m.Ref())
				}
				for code, d := range m.Interface.Errors {
					if d.Billed {
						t.Errorf("%s: declared error %s is billed", m.Ref(), code)
					}
				}
			}
		})
	}
}

// Ensure that Load refuses a set that does not exist.
func TestLoad_UnknownSet(t *testing.T) {
	if ms, err := agents.Load("nope"); err == nil {
		t.Fatalf("Load(nope) = %d manifests, want an error", len(ms))
	}
}

// Ensure that Load parses afresh each time: two callers never share a manifest.
func TestLoad_Fresh(t *testing.T) {
	a, b := load(t, "examples"), load(t, "examples")
	for i := range a {
		if a[i] == b[i] {
			t.Fatalf("%s: the same *Manifest returned twice", a[i].Ref())
		}
	}
}

// Ensure that Register gives every manifest of every set a handler.
func TestRegister(t *testing.T) {
	rt := devRuntime()
	for _, set := range agents.Sets() {
		for _, m := range load(t, set) {
			if name := gateway.DevHandlerName(m); !rt.Has(name) {
				t.Errorf("%s: no handler registered as %q", m.Ref(), name)
			}
		}
	}
}

// Ensure that every example in every manifest is what the agent really
// does: the same output, or the same declared error.
func TestExamples(t *testing.T) {
	for _, set := range agents.Sets() {
		for _, m := range load(t, set) {
			for i, ex := range m.Interface.Examples {
				t.Run(fmt.Sprintf("%s/%d", m.ID, i), func(t *testing.T) {
					input, err := json.Marshal(ex.Input)
					if err != nil {
						t.Fatal(err)
					}
					res := newDelegator(t).run(m, string(input))
					if ex.Error != "" {
						wantError(t, res, ex.Error)
						return
					}
					want, err := json.Marshal(ex.Output)
					if err != nil {
						t.Fatal(err)
					}
					wantOutput(t, res, string(want))
				})
			}
		}
	}
}

// Ensure that every call the demo orchestrator declares resolves to a demo
// agent whose worst case fits the call's max_cost, and that together they
// fit the downstream cap.
func TestExamples_CallsFit(t *testing.T) {
	d := newDelegator(t)
	m := manifest(t, "holon-labs/invoice-pipeline")
	var sum journal.Amount
	for _, c := range m.Calls {
		target := gateway.Target{Agent: c.Agent, Capability: c.Capability}
		callee := d.resolve(target)
		if callee == nil {
			t.Fatalf("%+v resolves to no demo agent", c)
		}
		if w := callee.WorstCase(); w > *c.MaxCost {
			t.Errorf("%s: worst case %s is above the max_cost %s of %+v", callee.Ref(), w, c.MaxCost, c)
		}
		sum += callee.WorstCase()
	}
	if sum > *m.Downstream.Cap {
		t.Errorf("downstream worst cases sum to %s, above the cap %s", sum, m.Downstream.Cap)
	}
}

// load is agents.Load that fails the test on an error.
func load(t *testing.T, set string) []*contract.Manifest {
	t.Helper()
	ms, err := agents.Load(set)
	if err != nil {
		t.Fatalf("Load(%q): %v", set, err)
	}
	return ms
}

// manifest finds an agent by id in any set.
func manifest(t *testing.T, id string) *contract.Manifest {
	t.Helper()
	for _, set := range agents.Sets() {
		for _, m := range load(t, set) {
			if m.ID == id {
				return m
			}
		}
	}
	t.Fatalf("no agent %s in any set", id)
	return nil
}

// devRuntime is a dev runtime with every agent of this package registered.
func devRuntime() *gateway.DevRuntime {
	rt := gateway.NewDevRuntime()
	agents.Register(rt)
	return rt
}

// run runs one agent as the gateway would, without delegation: the input
// must match interface.input, and an output must match interface.output.
func run(t *testing.T, m *contract.Manifest, input string) gateway.RunResult {
	t.Helper()
	return newDelegator(t).run(m, input)
}

// wantOutput checks that a run succeeded with an output equal, as JSON, to want.
func wantOutput(t *testing.T, res gateway.RunResult, want string) {
	t.Helper()
	if res.Outcome.Kind != contract.OutcomeOutput {
		t.Fatalf("outcome %v %q (%s), want an output", res.Outcome.Kind, res.Outcome.Code, res.Message)
	}
	if !jsonEqual(t, res.Output, []byte(want)) {
		t.Fatalf("output:\n got %s\nwant %s", res.Output, want)
	}
}

// wantError checks that a run failed with the declared error code.
func wantError(t *testing.T, res gateway.RunResult, code string) {
	t.Helper()
	if res.Outcome.Kind != contract.OutcomeError || res.Outcome.Code != code {
		t.Fatalf("outcome %v %q (%s), output %s; want declared error %s", res.Outcome.Kind, res.Outcome.Code, res.Message, res.Output, code)
	}
	if res.Message == "" {
		t.Errorf("declared error %s has no message", code)
	}
}

// jsonEqual compares two JSON documents by value, numbers by their digits.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	decode := func(b []byte) any {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("not JSON: %s: %v", b, err)
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}

// delegator is a test double of the engine's delegation: it routes a
// Target to the demo agent the engine would pick, checks the input and
// output against the callee's schemas, runs it on the same dev runtime,
// bills it with contract.DecideBilling, and records every call.
type delegator struct {
	t   *testing.T
	rt  *gateway.DevRuntime
	reg *gateway.Registry
	// fail, when set, answers a call in place of the callee.
	fail func(gateway.Target) (gateway.CallOutcome, bool)

	mu    sync.Mutex
	calls []delegatedCall
}

// delegatedCall is one downstream call as the double saw it.
type delegatedCall struct {
	Target gateway.Target
	Agent  string // the exact version called, "" when fail answered
	Input  json.RawMessage
	Bill   contract.Bill
}

func newDelegator(t *testing.T) *delegator {
	t.Helper()
	reg := gateway.NewRegistry()
	if err := reg.AddAll(load(t, "examples"), contract.AgentFacts{}, true); err != nil {
		t.Fatal(err)
	}
	rt := devRuntime()
	// summarize's examples are answered by a fake of the Messages API.
	agents.RegisterWith(rt, agents.Options{Summarize: examplesMessagesAPI(t)})
	return &delegator{t: t, rt: rt, reg: reg}
}

// run runs m as a top-level call with this delegator, when m declares calls.
func (d *delegator) run(m *contract.Manifest, input string) gateway.RunResult {
	d.t.Helper()
	if err := m.InputSchema().ValidateJSON([]byte(input)); err != nil {
		d.t.Fatalf("%s: input %s does not match interface.input: %v", m.Ref(), input, err)
	}
	inv := &gateway.Invocation{Manifest: m, Input: json.RawMessage(input), Receipt: "r1"}
	if len(m.Calls) > 0 {
		inv.Delegate = d
	}
	res := d.rt.Run(context.Background(), inv)
	if res.Outcome.Kind == contract.OutcomeOutput {
		if err := m.OutputSchema().ValidateJSON(res.Output); err != nil {
			d.t.Fatalf("%s: output %s does not match interface.output: %v", m.Ref(), res.Output, err)
		}
	}
	return res
}

// resolve picks the callee of a target as the engine would: the highest
// version in range, or the first implementer of the capability.
func (d *delegator) resolve(t gateway.Target) *contract.Manifest {
	if t.Agent != "" {
		v, err := d.reg.Resolve(t.Agent)
		if err != nil {
			return nil
		}
		return v.Manifest
	}
	if vs := d.reg.Implementers(t.Capability); len(vs) > 0 {
		return vs[0].Manifest
	}
	return nil
}

// Call implements gateway.Delegator.
func (d *delegator) Call(ctx context.Context, t gateway.Target, input json.RawMessage) gateway.CallOutcome {
	d.mu.Lock()
	receipt := fmt.Sprintf("r%d", len(d.calls)+2)
	d.mu.Unlock()
	record := func(c delegatedCall) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.calls = append(d.calls, c)
	}
	if d.fail != nil {
		if out, ok := d.fail(t); ok {
			record(delegatedCall{Target: t, Input: input})
			out.Receipt = receipt
			return out
		}
	}
	m := d.resolve(t)
	if m == nil {
		record(delegatedCall{Target: t, Input: input})
		return gateway.CallOutcome{Status: holon.StatusDenied, Error: holon.CodeNotFound, Receipt: receipt, Message: "no agent"}
	}
	call := delegatedCall{Target: t, Agent: m.Ref(), Input: input}
	if err := m.InputSchema().ValidateJSON(input); err != nil {
		record(call)
		return gateway.CallOutcome{Status: holon.StatusRejected, Error: holon.CodeRejectedInput, Receipt: receipt, Message: err.Error()}
	}
	res := d.rt.Run(ctx, &gateway.Invocation{Manifest: m, Input: input, Receipt: receipt})
	out := res.Outcome
	if out.Kind == contract.OutcomeOutput {
		if err := m.OutputSchema().ValidateJSON(res.Output); err != nil {
			d.t.Errorf("%s: output %s does not match interface.output: %v", m.Ref(), res.Output, err)
			out.Kind = contract.OutcomeInvalidOutput
		}
	}
	call.Bill = contract.DecideBilling(m, out, nil, journal.One)
	record(call)
	o := gateway.CallOutcome{OK: call.Bill.Status == holon.StatusSucceeded, Status: call.Bill.Status,
		Error: call.Bill.Error, Message: res.Message, Receipt: receipt}
	if o.OK {
		o.Output = res.Output
	}
	return o
}

// Calls returns the downstream calls made so far.
func (d *delegator) Calls() []delegatedCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// Ensure that the output schemas are tight: each output here is wrong in one
// way, and its agent's interface.output refuses it.
func TestOutputSchemas_RefuseWrongOutputs(t *testing.T) {
	const col = `"name":"a","count":1,"nulls":0,"distinct":1`
	for _, tt := range []struct{ id, why, output string }{
		{"holon-labs/csv-profile", "no columns", `{"rows":0,"columns":[]}`},
		{"holon-labs/csv-profile", "an extra field", `{"rows":1,"columns":[{` + col + `,"type":"integer","min":1,"max":1,"mean":1}]}`},
		{"holon-labs/csv-profile", "no min", `{"rows":1,"columns":[{` + col + `,"type":"integer","max":1}]}`},
		{"holon-labs/csv-profile", "a string min in an integer column", `{"rows":1,"columns":[{` + col + `,"type":"integer","min":"1","max":1}]}`},
		{"holon-labs/csv-profile", "a fraction in an integer column", `{"rows":1,"columns":[{` + col + `,"type":"integer","min":1.5,"max":2}]}`},
		{"holon-labs/csv-profile", "a number max in a string column", `{"rows":1,"columns":[{` + col + `,"type":"string","min":"a","max":2}]}`},
		{"holon-labs/csv-profile", "a string in a boolean column", `{"rows":1,"columns":[{` + col + `,"type":"boolean","min":"false","max":true}]}`},
		{"holon-labs/csv-profile", "a min in an empty column", `{"rows":1,"columns":[{"name":"a","count":0,"nulls":1,"distinct":0,"type":"empty","min":1,"max":null}]}`},
		{"holon-labs/csv-profile", "an unknown type", `{"rows":1,"columns":[{` + col + `,"type":"date","min":"a","max":"a"}]}`},
		{"holon-labs/text-tables", "no rows", `{"rows":[]}`},
		{"holon-labs/text-tables", "a row of one cell", `{"rows":[["a"]]}`},
		{"holon-labs/company-lookup", "a country that is not a code", `{"name":"ACME Corp","country":"USA","registration":"1"}`},
		{"holon-labs/invoice-pipeline", "a found issuer without a country", `{"issuer":{"name":"A","found":true,"registration":"1"},"lines":[{"description":"d","quantity":1,"unit_price":"1.00","amount":"1.00"}],"total":"1.00"}`},
		{"holon-labs/invoice-pipeline", "an unknown issuer with a country", `{"issuer":{"name":"A","found":false,"country":"FR"},"lines":[{"description":"d","quantity":1,"unit_price":"1.00","amount":"1.00"}],"total":"1.00"}`},
		{"holon-labs/invoice-pipeline", "an amount as a number", `{"issuer":{"name":"A","found":false},"lines":[{"description":"d","quantity":1,"unit_price":"1.00","amount":1}],"total":"1.00"}`},
		{"holon-labs/invoice-pipeline", "an amount with one decimal", `{"issuer":{"name":"A","found":false},"lines":[{"description":"d","quantity":1,"unit_price":"1.0","amount":"1.00"}],"total":"1.00"}`},
		{"holon-labs/invoice-pipeline", "no lines", `{"issuer":{"name":"A","found":false},"lines":[],"total":"0.00"}`},
	} {
		t.Run(tt.id+"/"+tt.why, func(t *testing.T) {
			if err := manifest(t, tt.id).OutputSchema().ValidateJSON([]byte(tt.output)); err == nil {
				t.Errorf("interface.output accepts %s", tt.output)
			}
		})
	}
}
