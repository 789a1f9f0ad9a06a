package gateway

import (
	"encoding/json"
	"math"
	"strconv"

	"holon.dev/holon/journal"
)

// OutcomeKind is how a run ended, as far as billing is concerned.
type OutcomeKind int

// The outcomes of the billing table (gateway.md §2).
const (
	// OutcomeOutput: the agent returned an output that matched interface.output.
	OutcomeOutput OutcomeKind = iota
	// OutcomeError: the agent returned an error with a code; declared or not
	// is decided from the manifest.
	OutcomeError
	// OutcomeCrash: the agent failed without a code (agent_error).
	OutcomeCrash
	// OutcomeTimeout: the hard timeout ran out.
	OutcomeTimeout
	// OutcomeInvalidOutput: the output did not match interface.output.
	OutcomeInvalidOutput
	// OutcomeUnavailable: the runtime could not be reached.
	OutcomeUnavailable
	// OutcomeGatewayError: the gateway itself failed after funds were held.
	OutcomeGatewayError
	// OutcomeFileNotFound: the input named a file the caller may not pass.
	OutcomeFileNotFound
)

// Outcome is how a run ended, with what the agent reported for pricing.
type Outcome struct {
	Kind OutcomeKind
	// Code is the error code the agent gave, for OutcomeError.
	Code string
	// Units is what the agent reported through ctx.units or
	// _meta["holon/units"], as decoded from JSON (nil when it reported none).
	Units any
	// Quote is what the agent reported through ctx.quote or
	// _meta["holon/quote"] (nil when it reported none).
	Quote any
}

// Run statuses on a receipt.
const (
	StatusSucceeded       = "succeeded"
	StatusFailed          = "failed"
	StatusDenied          = "denied"
	StatusPendingApproval = "pending_approval"
	StatusRejected        = "rejected"
	StatusRunning         = "running"
)

// Bill is the billing decision for one run's own work (delegated calls are
// billed on their own receipts).
type Bill struct {
	// Status is succeeded or failed.
	Status string
	// Error is the failure code, "" on success.
	Error string
	// Billed is true when the run is charged (possibly 0 for a free agent).
	Billed bool
	// Price is the price in the agent's currency, after pricing.max and
	// before conversion; zero when not billed.
	Price journal.Amount
	// Charge is what the payer pays, in the mandate's currency: the price
	// converted at rate, rounded up, and capped at max_cost.
	Charge journal.Amount
}

// DecideBilling applies the billing table of gateway.md §2 and the pricing
// rules of manifest.md §4: whether a run is billed, and exactly how much, in
// the agent's currency and, converted at rate and capped at maxCost (in the
// mandate's currency), in the payer's.
func DecideBilling(a *Manifest, out Outcome, maxCost *journal.Amount, rate journal.Rate) Bill {
	failed := func(code string) Bill { return Bill{Status: StatusFailed, Error: code} }
	switch out.Kind {
	case OutcomeOutput:
	case OutcomeError:
		declared, billed := a.IsDeclared(out.Code)
		if !declared {
			// Unknown codes are never billed, and keep the agent's word out
			// of the receipt's vocabulary.
			return failed(CodeAgentError)
		}
		if !billed || a.ChargeOn() != ChargeOnAttempt || out.Code == "over_budget" {
			return failed(out.Code)
		}
	case OutcomeCrash:
		return failed(CodeAgentError)
	case OutcomeTimeout:
		return failed(CodeTimeout)
	case OutcomeInvalidOutput:
		return failed(CodeInvalidOutput)
	case OutcomeUnavailable:
		return failed(CodeRuntimeUnavailable)
	case OutcomeFileNotFound:
		return failed(CodeFileNotFound)
	default:
		return failed(CodeGatewayError)
	}
	price, code := runPrice(a, out)
	if code != "" {
		return failed(code)
	}
	charge, err := journal.ConvertUp(price, rate)
	if err != nil {
		return failed(CodeGatewayError)
	}
	if maxCost != nil {
		charge = journal.Min(charge, *maxCost)
	}
	b := Bill{Status: StatusSucceeded, Billed: true, Price: price, Charge: charge}
	if out.Kind == OutcomeError {
		b.Status, b.Error = StatusFailed, out.Code
	}
	return b
}

// runPrice is the price of one billed run in the agent's currency, or the
// code of the pricing failure (invalid_units, invalid_quote).
func runPrice(a *Manifest, out Outcome) (journal.Amount, string) {
	p := a.Pricing
	switch p.Model {
	case PricingPerRun:
		return *p.Amount, ""
	case PricingPerUnit:
		n, ok := parseUnits(out.Units)
		if !ok {
			return 0, CodeInvalidUnits
		}
		price, err := p.Amount.MulInt(n)
		if err != nil { // beyond any amount: certainly above max
			return *p.Max, ""
		}
		return journal.Min(price, *p.Max), ""
	case PricingQuote:
		q, ok := parseQuote(out.Quote)
		if !ok {
			return 0, CodeInvalidQuote
		}
		return journal.Min(q, *p.Max), ""
	}
	return 0, ""
}

// parseUnits accepts a non-negative whole count, as JSON decodes it.
func parseUnits(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), n >= 0
	case int64:
		return n, n >= 0
	case float64:
		if n < 0 || n != math.Trunc(n) || n > 1<<53 {
			return 0, false
		}
		return int64(n), true
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 64)
		return i, err == nil && i >= 0
	}
	return 0, false
}

// parseQuote accepts a decimal string, as manifest.md §4 writes amounts.
func parseQuote(v any) (journal.Amount, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	a, err := journal.ParseAmount(s)
	return a, err == nil
}
