package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// TryResult is how one run outside the call lifecycle ended.
type TryResult struct {
	// Output is the agent's output, checked against interface.output; nil
	// unless Error is "".
	Output json.RawMessage
	// Error is the run's code as a receipt would give it (a declared error,
	// rejected_input, agent_error, timeout, invalid_output, …); "" when the
	// run succeeded.
	Error string
	// Message explains a failure (the agent's own words, or the schema's).
	Message string
	// Duration is how long the agent took.
	Duration time.Duration
}

// Try runs a listed version once outside the call lifecycle: the input is
// checked against interface.input, the agent is run under its own timeout
// (or limit, when shorter), and its output checked against
// interface.output. Nothing is admitted, reserved, billed, written or
// measured: no receipt, no event, no record. Evaluations (under
// WithEvaluation, which lets the input's handles name platform files) and
// the public demo use it; label stands where a receipt id would (a webhook's
// x-holon-call), such as "eval" or "demo". An agent that declares calls gets no delegation and fails
// with gateway_error: an orchestrator's downstream calls would be paid
// calls.
func (e *Engine) Try(ctx context.Context, v *AgentVersion, label string, input json.RawMessage, limit time.Duration) TryResult {
	a := v.Manifest
	if err := CheckJSON(input, "input"); err != nil {
		return TryResult{Error: holon.CodeRejectedInput, Message: holon.ErrorMessage(err)}
	}
	if err := a.InputSchema().ValidateJSON(input); err != nil {
		return TryResult{Error: holon.CodeRejectedInput, Message: fmt.Sprintf("input does not match %s's interface.input: %v", a.Ref(), err)}
	}
	if len(a.Calls) > 0 {
		return TryResult{Error: holon.CodeGatewayError, Message: fmt.Sprintf("%s declares calls: it can only run as a paid call", a.Ref())}
	}
	runner := e.runners[a.Runtime.Kind]
	if runner == nil {
		return TryResult{Error: holon.CodeRuntimeUnavailable, Message: "no runtime for kind " + a.Runtime.Kind}
	}
	timeout := time.Duration(a.Timeout()) * time.Second
	if limit > 0 && limit < timeout {
		timeout = limit
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := e.now()
	// A run outside a call has no mandate, so no account's files: its
	// handles resolve only to platform files, under WithEvaluation.
	var res RunResult
	if files, fres, ok := e.fileLinks(rctx, input, ""); !ok {
		res = fres
	} else {
		res = runner.Run(rctx, &Invocation{Manifest: a, Input: input, Receipt: label, Shipped: v.Shipped, Files: files})
	}
	d := e.now().Sub(start)
	if checkOutput(a, &res); res.Outcome.Kind == contract.OutcomeInvalidOutput {
		return TryResult{Error: holon.CodeInvalidOutput, Duration: d, Message: res.Message}
	}
	// The billing table names the outcome; the price it computes is ignored.
	bill := contract.DecideBilling(a, res.Outcome, nil, journal.One)
	if bill.Error != "" {
		return TryResult{Error: bill.Error, Message: res.Message, Duration: d}
	}
	return TryResult{Output: res.Output, Duration: d}
}
