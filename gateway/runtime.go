package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// Invocation is what a runtime needs to run one call.
type Invocation struct {
	// Manifest is the exact agent version being run.
	Manifest *contract.Manifest
	// Input is the call's input, already validated against interface.input.
	Input json.RawMessage
	// MaxCost is the caller's ceiling converted into the agent's currency
	// (rounded down), or nil when the caller set none.
	MaxCost *journal.Amount
	// Receipt is the id of the call's receipt.
	Receipt string
	// Delegate makes the agent's downstream calls; nil when the agent
	// declares no calls. For a remote agent it also implements
	// DelegationGranter.
	Delegate Delegator
	// Shipped is true for an agent shipped with the gateway: its remote
	// endpoint is exempt from the network guard (gateway.md §7).
	Shipped bool
	// Files are the links to the files the input names, by handle
	// (files.go); nil when it names none.
	Files map[string]FileLink
	// Durable waits until the call's reservation is durable. A remote
	// runner is only run once it is; an in-process agent runs earlier and
	// must wait on it (Ctx.Durable) before any effect of its own leaves the
	// process. Nil: nothing to wait for.
	Durable func() error
}

// RunResult is how a run ended, as a runtime saw it.
type RunResult struct {
	// Output is the agent's output (not yet checked against interface.output).
	Output json.RawMessage
	// Outcome says how the run ended and carries the units or quote.
	Outcome contract.Outcome
	// Message is the agent's own explanation of a failure; it is returned
	// to the caller but never stored.
	Message string
}

// Runner runs agents of one runtime.kind.
type Runner interface {
	// Run runs one call. It must return when ctx is done (the hard timeout).
	Run(ctx context.Context, inv *Invocation) RunResult
}

// Target names a downstream call: an agent reference or a capability.
type Target struct {
	Agent      string
	Capability string
	// MaxCost is an optional ceiling for this call, in the orchestrator's currency.
	MaxCost *journal.Amount
}

// CallOutcome is what a downstream call returned to the orchestrator.
type CallOutcome struct {
	OK      bool            `json:"ok"`
	Output  json.RawMessage `json:"output,omitempty"`
	Receipt string          `json:"receipt,omitempty"`
	Status  string          `json:"status"`
	Error   string          `json:"error,omitempty"`
	Message string          `json:"message,omitempty"`
}

// Delegator makes an orchestrator's downstream calls under its sub-mandate.
type Delegator interface {
	Call(ctx context.Context, t Target, input json.RawMessage) CallOutcome
}

// DevHandler is an agent compiled into the gateway (runtime.kind: dev). It
// returns the output, or an error: c.Error(code, msg) for a declared error,
// anything else for a crash.
type DevHandler func(ctx context.Context, input json.RawMessage, c *Ctx) (any, error)

// DevRuntime runs the handlers compiled into the binary.
type DevRuntime struct {
	mu       sync.RWMutex
	handlers map[string]DevHandler
}

// NewDevRuntime returns a dev runtime with no handlers.
func NewDevRuntime() *DevRuntime { return &DevRuntime{handlers: map[string]DevHandler{}} }

// Register makes a handler available under name (a manifest's runtime.tool,
// or its agent name by default).
func (r *DevRuntime) Register(name string, h DevHandler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers[name] = h
}

// Has reports whether a handler is registered under name.
func (r *DevRuntime) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.handlers[name]
	return ok
}

// DevHandlerName is the handler a dev manifest runs: runtime.tool, or the agent's name.
func DevHandlerName(m *contract.Manifest) string {
	if m.Runtime.Tool != "" {
		return m.Runtime.Tool
	}
	return m.Name()
}

// Run runs the handler in its own goroutine and stops waiting for it when
// ctx is done: a handler that ignores its context cannot hold the call.
func (r *DevRuntime) Run(ctx context.Context, inv *Invocation) RunResult {
	r.mu.RLock()
	h, ok := r.handlers[DevHandlerName(inv.Manifest)]
	r.mu.RUnlock()
	if !ok {
		return RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeUnavailable},
			Message: fmt.Sprintf("no dev handler %q is compiled into this gateway", DevHandlerName(inv.Manifest))}
	}
	c := &Ctx{inv: inv}
	done := make(chan RunResult, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeCrash}, Message: fmt.Sprintf("agent panicked: %v", p)}
			}
		}()
		out, err := h(ctx, inv.Input, c)
		done <- c.result(out, err)
	}()
	select {
	case res := <-done:
		if ctx.Err() != nil && res.Outcome.Kind != contract.OutcomeOutput {
			return RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeTimeout}}
		}
		return res
	case <-ctx.Done():
		return RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeTimeout}}
	}
}

// Ctx is what a dev handler can do besides computing its output: delegate,
// declare an error, report units or a quote, and read its ceiling.
type Ctx struct {
	inv   *Invocation
	mu    sync.Mutex
	units any
	quote any
}

// AgentError is a declared error returned by a handler through Ctx.Error.
type AgentError struct {
	Code    string
	Message string
}

func (e *AgentError) Error() string { return e.Code + ": " + e.Message }

// Call makes a downstream call, by agent reference or capability, under the
// run's sub-mandate. An agent that declares no calls gets not_declared.
func (c *Ctx) Call(ctx context.Context, t Target, input any) CallOutcome {
	if c.inv.Delegate == nil {
		return CallOutcome{Status: holon.StatusDenied, Error: holon.CodeNotDeclared,
			Message: fmt.Sprintf("%s declares no calls: it cannot delegate", c.inv.Manifest.Ref())}
	}
	b, err := json.Marshal(input)
	if err != nil {
		return CallOutcome{Status: holon.StatusFailed, Error: holon.CodeRejectedInput, Message: "input is not JSON: " + err.Error()}
	}
	return c.inv.Delegate.Call(ctx, t, b)
}

// Durable waits until this call's reservation is durable: a handler calls
// it before anything it does leaves the process (a request to another
// service, a message a person will see). Its own downstream calls need
// not: they wait for their own reservations, which commit after this one.
func (c *Ctx) Durable() error {
	if c.inv.Durable == nil {
		return nil
	}
	return c.inv.Durable()
}

// Error returns a declared error for the handler to return.
func (c *Ctx) Error(code, message string) error { return &AgentError{Code: code, Message: message} }

// Units reports the units consumed, for per_unit pricing.
func (c *Ctx) Units(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.units = n
}

// Quote reports the price of this run, for quote pricing (a decimal string
// in the agent's currency).
func (c *Ctx) Quote(amount string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.quote = amount
}

// MaxCost is the caller's ceiling for this run in the agent's currency; ok
// is false when the caller set none.
func (c *Ctx) MaxCost() (journal.Amount, bool) {
	if c.inv.MaxCost == nil {
		return 0, false
	}
	return *c.inv.MaxCost, true
}

// Receipt is the id of the run's receipt.
func (c *Ctx) Receipt() string { return c.inv.Receipt }

// Manifest is the exact agent version being run (its pricing, for an agent
// that estimates its own cost).
func (c *Ctx) Manifest() *contract.Manifest { return c.inv.Manifest }

func (c *Ctx) result(out any, err error) RunResult {
	c.mu.Lock()
	units, quote := c.units, c.quote
	c.mu.Unlock()
	res := RunResult{Outcome: contract.Outcome{Units: units, Quote: quote}}
	var ae *AgentError
	switch {
	case errors.As(err, &ae):
		res.Outcome.Kind, res.Outcome.Code, res.Message = contract.OutcomeError, ae.Code, ae.Message
	case err != nil:
		res.Outcome.Kind, res.Message = contract.OutcomeCrash, err.Error()
	default:
		b, err := json.Marshal(out)
		if err != nil {
			res.Outcome.Kind, res.Message = contract.OutcomeCrash, "output is not JSON: "+err.Error()
			break
		}
		res.Outcome.Kind, res.Output = contract.OutcomeOutput, b
	}
	return res
}
