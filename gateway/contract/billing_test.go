package contract_test

import (
	"encoding/json"
	"math"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// erring declares one billed and two non-billed errors.
const erring = `
interface:
  input: {}
  output: {}
  errors:
    partial: {billed: true}
    no_table_found: {billed: false}
    over_budget: {billed: false}
`

// Ensure that every row of the billing table of gateway.md §2 bills, or
// never bills, as written, with the failure code on the receipt.
func TestDecideBilling(t *testing.T) {
	success := overlayManifest(t, erring+`pricing: {charge_on: success}`)
	attempt := overlayManifest(t, erring+`pricing: {charge_on: attempt}`)
	byDefault := overlayManifest(t, erring)
	for _, tt := range []struct {
		name   string
		a      *contract.Manifest
		out    contract.Outcome
		status string
		code   string
		billed bool
	}{
		{name: "valid output", a: success, out: contract.Outcome{Kind: contract.OutcomeOutput},
			status: holon.StatusSucceeded, billed: true},
		{name: "valid output under attempt", a: attempt, out: contract.Outcome{Kind: contract.OutcomeOutput},
			status: holon.StatusSucceeded, billed: true},
		{name: "declared billed error under attempt", a: attempt, out: contract.Outcome{Kind: contract.OutcomeError, Code: "partial"},
			status: holon.StatusFailed, code: "partial", billed: true},
		{name: "declared billed error under success", a: success, out: contract.Outcome{Kind: contract.OutcomeError, Code: "partial"},
			status: holon.StatusFailed, code: "partial"},
		{name: "declared billed error, charge_on defaulted", a: byDefault, out: contract.Outcome{Kind: contract.OutcomeError, Code: "partial"},
			status: holon.StatusFailed, code: "partial"},
		{name: "declared non-billed error under attempt", a: attempt, out: contract.Outcome{Kind: contract.OutcomeError, Code: "no_table_found"},
			status: holon.StatusFailed, code: "no_table_found"},
		{name: "over_budget under attempt", a: attempt, out: contract.Outcome{Kind: contract.OutcomeError, Code: "over_budget"},
			status: holon.StatusFailed, code: "over_budget"},
		{name: "undeclared error under attempt", a: attempt, out: contract.Outcome{Kind: contract.OutcomeError, Code: "weird"},
			status: holon.StatusFailed, code: holon.CodeAgentError},
		{name: "undeclared reserved code", a: attempt, out: contract.Outcome{Kind: contract.OutcomeError, Code: holon.CodeGatewayError},
			status: holon.StatusFailed, code: holon.CodeAgentError},
		{name: "crash", a: attempt, out: contract.Outcome{Kind: contract.OutcomeCrash},
			status: holon.StatusFailed, code: holon.CodeAgentError},
		{name: "timeout", a: attempt, out: contract.Outcome{Kind: contract.OutcomeTimeout},
			status: holon.StatusFailed, code: holon.CodeTimeout},
		{name: "invalid output", a: attempt, out: contract.Outcome{Kind: contract.OutcomeInvalidOutput},
			status: holon.StatusFailed, code: holon.CodeInvalidOutput},
		{name: "runtime unavailable", a: attempt, out: contract.Outcome{Kind: contract.OutcomeUnavailable},
			status: holon.StatusFailed, code: holon.CodeRuntimeUnavailable},
		{name: "gateway error", a: attempt, out: contract.Outcome{Kind: contract.OutcomeGatewayError},
			status: holon.StatusFailed, code: holon.CodeGatewayError},
		{name: "file not found", a: attempt, out: contract.Outcome{Kind: contract.OutcomeFileNotFound},
			status: holon.StatusFailed, code: holon.CodeFileNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := contract.DecideBilling(tt.a, tt.out, nil, journal.One)
			if b.Status != tt.status || b.Error != tt.code || b.Billed != tt.billed {
				t.Fatalf("got %s %q billed %t, want %s %q billed %t", b.Status, b.Error, b.Billed, tt.status, tt.code, tt.billed)
			}
			price, charge := "0.00", "0.00"
			if tt.billed {
				price, charge = "0.10", "0.10"
			}
			if b.Price.String() != price || b.Charge.String() != charge {
				t.Errorf("price %s charge %s, want %s and %s", b.Price, b.Charge, price, charge)
			}
		})
	}
}

// Ensure that each pricing model charges what manifest.md §4 says, capped at
// pricing.max and max_cost, converted with fx and rounded up before the cap,
// and that a missing or malformed report fails without billing.
func TestDecideBilling_Price(t *testing.T) {
	const (
		free       = `pricing: {model: free, amount: null, currency: null}`
		perRun     = `pricing: {model: per_run, amount: "0.10"}`
		perRunUSD  = `pricing: {model: per_run, amount: "0.10", currency: USD}`
		perUnit    = `pricing: {model: per_unit, amount: "0.004", unit: page, max: "0.02"}`
		perUnitUSD = `pricing: {model: per_unit, amount: "0.004", unit: page, max: "0.02", currency: USD}`
		quote      = `pricing: {model: quote, amount: null, max: "1.00"}`
		vast       = `pricing: {model: per_unit, amount: "1000000000000", unit: page, max: "9000000000000", currency: USD}`
	)
	out := func(units any) contract.Outcome { return contract.Outcome{Kind: contract.OutcomeOutput, Units: units} }
	quoted := func(q any) contract.Outcome { return contract.Outcome{Kind: contract.OutcomeOutput, Quote: q} }
	for _, tt := range []struct {
		name    string
		pricing string
		out     contract.Outcome
		maxCost string
		rate    string // fx; 1 when ""
		code    string // the failure, "" when billed
		price   string // in the agent's currency
		charge  string // in the mandate's
	}{
		{name: "free", pricing: free, out: out(nil), price: "0.00", charge: "0.00"},
		{name: "free with max_cost", pricing: free, out: out(nil), maxCost: "0", price: "0.00", charge: "0.00"},

		{name: "per_run", pricing: perRun, out: out(nil), price: "0.10", charge: "0.10"},
		{name: "per_run, max_cost above", pricing: perRun, out: out(nil), maxCost: "0.20", price: "0.10", charge: "0.10"},
		{name: "per_run, max_cost below", pricing: perRun, out: out(nil), maxCost: "0.05", price: "0.10", charge: "0.05"},
		{name: "per_run ignores units", pricing: perRun, out: out(float64(1000)), price: "0.10", charge: "0.10"},

		{name: "per_unit, 3 units", pricing: perUnit, out: out(float64(3)), price: "0.012", charge: "0.012"},
		{name: "per_unit, 3 units as int", pricing: perUnit, out: out(3), price: "0.012", charge: "0.012"},
		{name: "per_unit, 3 units as int64", pricing: perUnit, out: out(int64(3)), price: "0.012", charge: "0.012"},
		{name: "per_unit, 3 units as json.Number", pricing: perUnit, out: out(json.Number("3")), price: "0.012", charge: "0.012"},
		{name: "per_unit, 3.0 units", pricing: perUnit, out: out(json.Number("3.0")), price: "0.012", charge: "0.012"},
		{name: "per_unit, 0 units", pricing: perUnit, out: out(float64(0)), price: "0.00", charge: "0.00"},
		{name: "per_unit, exactly max", pricing: perUnit, out: out(float64(5)), price: "0.02", charge: "0.02"},
		{name: "per_unit, capped at max", pricing: perUnit, out: out(float64(6)), price: "0.02", charge: "0.02"},
		{name: "per_unit, max_cost caps: the agent absorbs", pricing: perUnit, out: out(float64(3)), maxCost: "0.01",
			price: "0.012", charge: "0.01"},
		{name: "per_unit, max_cost above the price", pricing: perUnit, out: out(float64(3)), maxCost: "0.20",
			price: "0.012", charge: "0.012"},
		{name: "per_unit, units absent", pricing: perUnit, out: out(nil), code: holon.CodeInvalidUnits},
		{name: "per_unit, negative units", pricing: perUnit, out: out(float64(-1)), code: holon.CodeInvalidUnits},
		{name: "per_unit, negative int units", pricing: perUnit, out: out(-1), code: holon.CodeInvalidUnits},
		{name: "per_unit, negative json.Number", pricing: perUnit, out: out(json.Number("-2")), code: holon.CodeInvalidUnits},
		{name: "per_unit, fractional units", pricing: perUnit, out: out(2.5), code: holon.CodeInvalidUnits},
		{name: "per_unit, fractional json.Number", pricing: perUnit, out: out(json.Number("2.5")), code: holon.CodeInvalidUnits},
		{name: "per_unit, 0.3e1 units", pricing: perUnit, out: out(json.Number("0.3e1")), price: "0.012", charge: "0.012"},
		{name: "per_unit, 300e-2 units", pricing: perUnit, out: out(json.Number("300e-2")), price: "0.012", charge: "0.012"},
		{name: "per_unit, 1E+0 units", pricing: perUnit, out: out(json.Number("1E+0")), price: "0.004", charge: "0.004"},
		{name: "per_unit, -0 units", pricing: perUnit, out: out(json.Number("-0.0")), price: "0.00", charge: "0.00"},
		{name: "per_unit, tiny json.Number", pricing: perUnit, out: out(json.Number("1e-400")), code: holon.CodeInvalidUnits},
		{name: "per_unit, a fraction float64 would round away", pricing: perUnit, out: out(json.Number("3.0000000000000000001")),
			code: holon.CodeInvalidUnits},
		{name: "per_unit, a half float64 would round away", pricing: perUnit, out: out(json.Number("1000000000000000000.5")),
			code: holon.CodeInvalidUnits},
		{name: "per_unit, a fraction under an exponent beyond int", pricing: perUnit, out: out(json.Number("1e-99999999999999999999")),
			code: holon.CodeInvalidUnits},
		{name: "per_unit, -0e-5 units", pricing: perUnit, out: out(json.Number("-0e-5")), price: "0.00", charge: "0.00"},
		{name: "per_unit, 25e-1 units", pricing: perUnit, out: out(json.Number("25e-1")), code: holon.CodeInvalidUnits},
		{name: "per_unit, hugely negative json.Number", pricing: perUnit, out: out(json.Number("-1e400")), code: holon.CodeInvalidUnits},
		{name: "per_unit, not a number", pricing: perUnit, out: out(json.Number("three")), code: holon.CodeInvalidUnits},
		{name: "per_unit, units as a string", pricing: perUnit, out: out("3"), code: holon.CodeInvalidUnits},
		{name: "per_unit, units as a bool", pricing: perUnit, out: out(true), code: holon.CodeInvalidUnits},
		{name: "per_unit, NaN units", pricing: perUnit, out: out(math.NaN()), code: holon.CodeInvalidUnits},
		{name: "per_unit, infinite units", pricing: perUnit, out: out(math.Inf(1)), code: holon.CodeInvalidUnits},
		{name: "per_unit, huge float units capped", pricing: perUnit, out: out(1e300), price: "0.02", charge: "0.02"},
		{name: "per_unit, 2^53+ float units capped", pricing: perUnit, out: out(float64(1 << 60)), price: "0.02", charge: "0.02"},
		{name: "per_unit, MaxInt64 units capped", pricing: perUnit, out: out(int64(math.MaxInt64)), price: "0.02", charge: "0.02"},
		{name: "per_unit, units beyond int64 capped", pricing: perUnit, out: out(json.Number("99999999999999999999999")),
			price: "0.02", charge: "0.02"},
		{name: "per_unit, units beyond float64 capped", pricing: perUnit, out: out(json.Number("1e400")),
			price: "0.02", charge: "0.02"},
		{name: "per_unit, a fraction times an exponent beyond int capped", pricing: perUnit, out: out(json.Number("1.5e99999999999999999999")),
			price: "0.02", charge: "0.02"},
		{name: "per_unit, an exponent beyond int capped", pricing: perUnit, out: out(json.Number("1e99999999999999999999")),
			price: "0.02", charge: "0.02"},

		{name: "quote", pricing: quote, out: quoted("0.37"), price: "0.37", charge: "0.37"},
		{name: "quote at max", pricing: quote, out: quoted("1"), price: "1.00", charge: "1.00"},
		{name: "quote capped at max", pricing: quote, out: quoted("1.50"), price: "1.00", charge: "1.00"},
		{name: "quote capped at max_cost", pricing: quote, out: quoted("0.37"), maxCost: "0.30", price: "0.37", charge: "0.30"},
		{name: "quote, invalid decimal", pricing: quote, out: quoted("abc"), code: holon.CodeInvalidQuote},
		{name: "quote, negative", pricing: quote, out: quoted("-0.10"), code: holon.CodeInvalidQuote},
		{name: "quote, seven decimals", pricing: quote, out: quoted("0.1234567"), code: holon.CodeInvalidQuote},
		{name: "quote, exponent", pricing: quote, out: quoted("1e-1"), code: holon.CodeInvalidQuote},
		{name: "quote, empty", pricing: quote, out: quoted(""), code: holon.CodeInvalidQuote},
		{name: "quote, a number", pricing: quote, out: quoted(0.37), code: holon.CodeInvalidQuote},
		{name: "quote, a json.Number", pricing: quote, out: quoted(json.Number("0.37")), code: holon.CodeInvalidQuote},
		{name: "quote, absent", pricing: quote, out: quoted(nil), code: holon.CodeInvalidQuote},

		{name: "fx rounds up", pricing: `pricing: {model: per_run, amount: "0.000001", currency: USD}`, out: out(nil), rate: "0.92",
			price: "0.000001", charge: "0.000001"},
		{name: "fx on per_run", pricing: perRunUSD, out: out(nil), rate: "0.92", price: "0.10", charge: "0.092"},
		{name: "fx on per_unit", pricing: perUnitUSD, out: out(float64(3)), rate: "1.1", price: "0.012", charge: "0.0132"},
		{name: "fx on per_unit rounds up", pricing: perUnitUSD, out: out(float64(1)), rate: "0.923456", price: "0.004", charge: "0.003694"},
		{name: "fx before max_cost: the converted price is under it", pricing: perRunUSD, out: out(nil), rate: "0.92", maxCost: "0.095",
			price: "0.10", charge: "0.092"},
		{name: "fx before max_cost: the converted price is over it", pricing: perUnitUSD, out: out(float64(5)), rate: "1.1", maxCost: "0.021",
			price: "0.02", charge: "0.021"},
		{name: "a converted price beyond any amount, capped at max_cost", pricing: vast, out: out(float64(9)), rate: "1.1", maxCost: "0.20",
			price: "9000000000000.00", charge: "0.20"},
		{name: "a converted price beyond any amount", pricing: vast, out: out(float64(9)), rate: "1.1", code: holon.CodeGatewayError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := overlayManifest(t, tt.pricing)
			rate := journal.One
			if tt.rate != "" {
				rate = journal.MustParseRate(tt.rate)
			}
			b := contract.DecideBilling(a, tt.out, amountPtr(t, tt.maxCost), rate)
			if tt.code != "" {
				if b.Billed || b.Status != holon.StatusFailed || b.Error != tt.code || b.Charge != 0 || b.Price != 0 {
					t.Fatalf("got %+v, want failed %s, not billed", b, tt.code)
				}
				return
			}
			if !b.Billed || b.Status != holon.StatusSucceeded || b.Error != "" {
				t.Fatalf("got %s %q billed %t, want succeeded and billed", b.Status, b.Error, b.Billed)
			}
			if b.Price.String() != tt.price || b.Charge.String() != tt.charge {
				t.Errorf("price %s charge %s, want %s and %s", b.Price, b.Charge, tt.price, tt.charge)
			}
		})
	}
}

// Ensure that a declared error billed under charge_on: attempt is priced
// like a success, and a per_unit one without units fails with invalid_units.
func TestDecideBilling_BilledError(t *testing.T) {
	a := overlayManifest(t, erring+`pricing: {model: per_unit, amount: "0.004", unit: page, max: "0.02", currency: USD, charge_on: attempt}`)
	rate := journal.MustParseRate("1.1")
	b := contract.DecideBilling(a, contract.Outcome{Kind: contract.OutcomeError, Code: "partial", Units: float64(3)}, nil, rate)
	if !b.Billed || b.Status != holon.StatusFailed || b.Error != "partial" || b.Price.String() != "0.012" || b.Charge.String() != "0.0132" {
		t.Errorf("with units: got %+v, want failed partial, billed 0.012 → 0.0132", b)
	}
	b = contract.DecideBilling(a, contract.Outcome{Kind: contract.OutcomeError, Code: "partial"}, nil, rate)
	if b.Billed || b.Error != holon.CodeInvalidUnits {
		t.Errorf("without units: got %+v, want invalid_units, not billed", b)
	}
}
