package journal_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"holon.dev/holon/journal"
)

// parseAmountCases is shared by TestParseAmount and the fuzz seed corpus.
var parseAmountCases = []struct {
	in      string
	want    journal.Amount // in micro-units, when valid
	wantErr string         // a fragment of the error, when invalid
}{
	{in: "0.10", want: 100_000},
	{in: "3", want: 3_000_000},
	{in: "0.004725", want: 4_725},
	{in: "0", want: 0},
	{in: "00.5", want: 500_000}, // leading zeros are harmless; accepted
	{in: "0.000001", want: 1},
	{in: "9223372036854.775807", want: journal.MaxAmount},
	{in: "", wantErr: "want a decimal string"},
	{in: ".5", wantErr: "want a digit before the decimal point"},
	{in: "5.", wantErr: "want a digit after the decimal point"},
	{in: "-1", wantErr: "no sign"},
	{in: "+1", wantErr: "no sign"},
	{in: "1e3", wantErr: "exponent"},
	{in: " 1", wantErr: "spaces"},
	{in: "1 ", wantErr: "spaces"},
	{in: "1.2.3", wantErr: "one decimal point"},
	{in: "1.0000001", wantErr: "at most 6 decimals"},
	{in: "1,5", wantErr: "only digits"},
	{in: "9223372036854.775808", wantErr: "at most 9223372036854.775807"},
	{in: "9223372036855", wantErr: "at most 9223372036854.775807"},
	{in: "99999999999999999999", wantErr: "at most 9223372036854.775807"},
}

// Ensure that ParseAmount reads valid decimal strings into micro-units and
// refuses everything else with an error that says what to fix.
func TestParseAmount(t *testing.T) {
	for _, tt := range parseAmountCases {
		t.Run(tt.in, func(t *testing.T) {
			got, err := journal.ParseAmount(tt.in)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseAmount(%q) = %d, want an error containing %q", tt.in, got, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseAmount(%q) error = %q, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseAmount(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseAmount(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

// Ensure that an amount too large to represent is refused with ErrOverflow.
func TestParseAmount_Overflow(t *testing.T) {
	for _, s := range []string{"9223372036854.775808", "9223372036855", "99999999999999999999"} {
		if _, err := journal.ParseAmount(s); !errors.Is(err, journal.ErrOverflow) {
			t.Errorf("ParseAmount(%q) error = %v, want ErrOverflow", s, err)
		}
	}
}

// Ensure that String writes the canonical form: at least two decimals,
// trailing zeros beyond the second trimmed, a minus for negative amounts.
func TestAmount_String(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"0.10", "0.10"},
		{"0.100", "0.10"},
		{"0.1", "0.10"},
		{"3", "3.00"},
		{"0", "0.00"},
		{"0.0035", "0.0035"},
		{"0.192", "0.192"},
		{"0.000001", "0.000001"},
		{"00.5", "0.50"},
		{"9223372036854.775807", "9223372036854.775807"},
	} {
		a, err := journal.ParseAmount(tt.in)
		if err != nil {
			t.Fatalf("ParseAmount(%q): %v", tt.in, err)
		}
		if got := a.String(); got != tt.want {
			t.Errorf("ParseAmount(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, tt := range []struct {
		in   journal.Amount
		want string
	}{
		{-35_000, "-0.035"},
		{-1, "-0.000001"},
		{-5_000_000, "-5.00"},
		{math.MinInt64, "-9223372036854.775808"},
	} {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Amount(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
	}
}

// Ensure that an amount is a JSON string both ways and a JSON number is refused.
func TestAmount_JSON(t *testing.T) {
	b, err := json.Marshal(struct {
		Price journal.Amount `json:"price"`
	}{journal.MustParseAmount("0.10")})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"price":"0.10"}`; got != want {
		t.Fatalf("Marshal = %s, want %s", got, want)
	}

	for _, tt := range []struct {
		in      string
		want    journal.Amount
		wantErr bool
	}{
		{in: `{"price":"0.035"}`, want: 35_000},
		{in: `{"price":"3"}`, want: 3_000_000},
		{in: `{"price":0.035}`, wantErr: true},
		{in: `{"price":3}`, wantErr: true},
		{in: `{"price":"-0.035"}`, wantErr: true},
		{in: `{"price":"1e3"}`, wantErr: true},
	} {
		var v struct {
			Price journal.Amount `json:"price"`
		}
		err := json.Unmarshal([]byte(tt.in), &v)
		if tt.wantErr {
			if err == nil {
				t.Errorf("Unmarshal(%s) = %s, want an error", tt.in, v.Price)
			}
			continue
		}
		if err != nil {
			t.Errorf("Unmarshal(%s): %v", tt.in, err)
		} else if v.Price != tt.want {
			t.Errorf("Unmarshal(%s) = %d, want %d", tt.in, v.Price, tt.want)
		}
	}
}

// Ensure that Add, Sub, MulInt and Sum compute exactly and return
// ErrOverflow instead of wrapping around.
func TestAmount_Arithmetic(t *testing.T) {
	const maxA, minA = journal.MaxAmount, journal.Amount(math.MinInt64)
	for _, tt := range []struct {
		name     string
		op       func() (journal.Amount, error)
		want     journal.Amount
		overflow bool
	}{
		{name: "add", op: func() (journal.Amount, error) { return journal.Amount(35_000).Add(3_500) }, want: 38_500},
		{name: "add to max", op: func() (journal.Amount, error) { return maxA.Add(0) }, want: maxA},
		{name: "add overflow", op: func() (journal.Amount, error) { return maxA.Add(1) }, overflow: true},
		{name: "add underflow", op: func() (journal.Amount, error) { return minA.Add(-1) }, overflow: true},
		{name: "sub to negative", op: func() (journal.Amount, error) { return journal.Amount(1).Sub(35_000) }, want: -34_999},
		{name: "sub overflow", op: func() (journal.Amount, error) { return maxA.Sub(-1) }, overflow: true},
		{name: "sub underflow", op: func() (journal.Amount, error) { return minA.Sub(1) }, overflow: true},
		{name: "sub min from negative", op: func() (journal.Amount, error) { return journal.Amount(-1).Sub(minA) }, want: maxA},
		{name: "sub min from zero", op: func() (journal.Amount, error) { return journal.Amount(0).Sub(minA) }, overflow: true},
		{name: "mulint", op: func() (journal.Amount, error) { return journal.Amount(2_500).MulInt(12) }, want: 30_000},
		{name: "mulint zero", op: func() (journal.Amount, error) { return maxA.MulInt(0) }, want: 0},
		{name: "mulint overflow", op: func() (journal.Amount, error) { return maxA.MulInt(2) }, overflow: true},
		{name: "mulint overflow high word", op: func() (journal.Amount, error) { return maxA.MulInt(math.MaxInt64) }, overflow: true},
		{name: "mulint just fits", op: func() (journal.Amount, error) { return journal.Amount(math.MaxInt64 / 7).MulInt(7) }, want: math.MaxInt64 / 7 * 7},
		{name: "sum", op: func() (journal.Amount, error) { return journal.Sum(3_500, 26_775, 4_725) }, want: 35_000},
		{name: "sum empty", op: func() (journal.Amount, error) { return journal.Sum() }, want: 0},
		{name: "sum overflow", op: func() (journal.Amount, error) { return journal.Sum(maxA, 1, -1) }, overflow: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.op()
			if tt.overflow {
				if !errors.Is(err, journal.ErrOverflow) {
					t.Fatalf("= %d, %v, want ErrOverflow", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("= %d, %v, want %d", got, err, tt.want)
			}
		})
	}
}

// Ensure that MulInt refuses a negative operand rather than computing a
// negative price.
func TestAmount_MulInt_Negative(t *testing.T) {
	if _, err := journal.Amount(10).MulInt(-1); err == nil {
		t.Error("MulInt(-1) succeeded, want an error")
	}
	if _, err := journal.Amount(-10).MulInt(1); err == nil {
		t.Error("Amount(-10).MulInt(1) succeeded, want an error")
	}
}

// Ensure that Min returns the smaller amount.
func TestMin(t *testing.T) {
	if got := journal.Min(200_000, 50_000); got != 50_000 {
		t.Errorf("Min(0.20, 0.05) = %s, want 0.05", got)
	}
	if got := journal.Min(-1, 0); got != -1 {
		t.Errorf("Min(-0.000001, 0) = %s, want -0.000001", got)
	}
}
