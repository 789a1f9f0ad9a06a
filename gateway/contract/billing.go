package contract

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"

	"holon.dev/holon"
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
	failed := func(code string) Bill { return Bill{Status: holon.StatusFailed, Error: code} }
	switch out.Kind {
	case OutcomeOutput:
	case OutcomeError:
		declared, billed := a.IsDeclared(out.Code)
		if !declared {
			// Unknown codes are never billed, and keep the agent's word out
			// of the receipt's vocabulary.
			return failed(holon.CodeAgentError)
		}
		if !billed || a.ChargeOn() != ChargeOnAttempt || out.Code == "over_budget" {
			return failed(out.Code)
		}
	case OutcomeCrash:
		return failed(holon.CodeAgentError)
	case OutcomeTimeout:
		return failed(holon.CodeTimeout)
	case OutcomeInvalidOutput:
		return failed(holon.CodeInvalidOutput)
	case OutcomeUnavailable:
		return failed(holon.CodeRuntimeUnavailable)
	case OutcomeFileNotFound:
		return failed(holon.CodeFileNotFound)
	default:
		return failed(holon.CodeGatewayError)
	}
	price, code := runPrice(a, out)
	if code != "" {
		return failed(code)
	}
	charge, err := journal.ConvertUp(price, rate)
	switch {
	case err == nil:
	case maxCost != nil:
		// Beyond any amount, so certainly above the caller's cap.
		charge = journal.MaxAmount
	default:
		return failed(holon.CodeGatewayError)
	}
	if maxCost != nil {
		charge = journal.Min(charge, *maxCost)
	}
	b := Bill{Status: holon.StatusSucceeded, Billed: true, Price: price, Charge: charge}
	if out.Kind == OutcomeError {
		b.Status, b.Error = holon.StatusFailed, out.Code
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
			return 0, holon.CodeInvalidUnits
		}
		price, err := p.Amount.MulInt(n)
		if err != nil { // beyond any amount: certainly above max
			return *p.Max, ""
		}
		return journal.Min(price, *p.Max), ""
	case PricingQuote:
		q, ok := parseQuote(out.Quote)
		if !ok {
			return 0, holon.CodeInvalidQuote
		}
		return journal.Min(q, *p.Max), ""
	}
	return 0, ""
}

// parseUnits accepts a non-negative whole count, as JSON decodes it. A count
// beyond int64 is still a count: it saturates, and pricing.max caps its price.
func parseUnits(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), n >= 0
	case int64:
		return n, n >= 0
	case float64:
		return floatUnits(n)
	case json.Number:
		return numberUnits(string(n))
	}
	return 0, false
}

// floatUnits accepts a float64 that holds a non-negative whole number.
func floatUnits(f float64) (int64, bool) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f != math.Trunc(f):
		return 0, false
	case f >= math.MaxInt64: // 2⁶³, the first float64 beyond int64
		return math.MaxInt64, true
	}
	return int64(f), true
}

// numberUnits accepts a JSON number that is a non-negative whole number,
// however it is written ("3", "3.0", "3e2"), decided on its digits: a float64
// would round "1e-400" to 0 and "3.0000000000000000001" to 3.
func numberUnits(s string) (int64, bool) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, i >= 0
	}
	if !wholeNumber(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err == nil:
		return floatUnits(f)
	case errors.Is(err, strconv.ErrRange) && f > 0: // beyond float64: "1e400"
		return math.MaxInt64, true
	}
	return 0, false
}

// wholeNumber reports whether the JSON number s has no non-zero digit after
// the decimal point once its exponent is applied.
func wholeNumber(s string) bool {
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		switch {
		case errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(s[i+1:], "-"):
			e = math.MaxInt32 // so large that every digit is before the point
		case errors.Is(err, strconv.ErrRange):
			e = math.MinInt32
		case err != nil:
			return false
		}
		mant, exp = s[:i], e
	}
	mant = strings.TrimPrefix(mant, "-")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	last := strings.LastIndexFunc(digits, func(r rune) bool { return r != '0' })
	// The decimal point sits after len(intPart)+exp digits.
	return last < 0 || int64(last) < int64(len(intPart))+int64(exp)
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
