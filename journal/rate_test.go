package journal_test

import (
	"testing"

	"holon.dev/holon/journal"
)

// Ensure that ParseRate reads decimal rates and refuses signs and exponents.
func TestParseRate(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want journal.Rate
	}{
		{"0.92", 920_000},
		{"0.15", 150_000},
		{"1", journal.One},
		{"0.1", journal.PlatformFee},
		{"1.5", 1_500_000},
		{"0", 0},
	} {
		got, err := journal.ParseRate(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseRate(%q) = %d, %v, want %d", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "-0.5", "1e-1", "0.1234567", ".5"} {
		if got, err := journal.ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %d, want an error", in, got)
		}
	}
	if got := journal.MustParseRate("0.150").String(); got != "0.15" {
		t.Errorf("Rate(0.150).String() = %q, want 0.15", got)
	}
}

// Ensure that ConvertUp rounds up to the next micro-unit, keeps exact
// conversions exact and refuses overflow with the bare ErrOverflow.
func TestConvertUp(t *testing.T) {
	for _, tt := range []struct {
		amount, rate, want string
	}{
		{"0.000001", "0.92", "0.000001"},
		{"0.10", "0.92", "0.092"},
		{"1.000001", "1.5", "1.500002"},
		{"0.035", "1", "0.035"},
		{"2", "0.5", "1.00"},
		{"0.10", "0.000001", "0.000001"},
		{"0.000003", "0.333333", "0.000001"},
		{"0", "0.92", "0.00"},
		{"5", "0", "0.00"},
		{"9223372036854.775807", "1", "9223372036854.775807"},
	} {
		a, r := journal.MustParseAmount(tt.amount), journal.MustParseRate(tt.rate)
		got, err := journal.ConvertUp(a, r)
		if err != nil || got.String() != tt.want {
			t.Errorf("ConvertUp(%s, %s) = %s, %v, want %s", tt.amount, tt.rate, got, err, tt.want)
		}
	}
	for _, tt := range []struct {
		name   string
		amount journal.Amount
		rate   journal.Rate
	}{
		{"max times 2", journal.MaxAmount, 2 * journal.One},
		{"max rounded up", journal.MaxAmount, journal.One + 1},
		{"high word at the limit", journal.MaxAmount, journal.Rate(journal.MaxAmount)},
		// The quotient is 2^64-1 with a remainder: rounding up must not wrap to 0.
		{"rounding past 2^64", 9223367425171063222, 2000001},
	} {
		got, err := journal.ConvertUp(tt.amount, tt.rate)
		if err != journal.ErrOverflow {
			t.Errorf("%s: ConvertUp(%d, %d) = %d, %v, want ErrOverflow", tt.name, tt.amount, tt.rate, got, err)
		}
	}
	if _, err := journal.ConvertUp(1, -1); err == nil {
		t.Error("ConvertUp with a negative rate succeeded, want an error")
	}
	if _, err := journal.ConvertUp(-1, journal.One); err == nil {
		t.Error("ConvertUp of a negative amount succeeded, want an error")
	}
}

// Ensure that MulFloor rounds down: the platform fee and royalties never
// take more than their share.
func TestMulFloor(t *testing.T) {
	for _, tt := range []struct {
		amount, rate, want string
	}{
		{"0.035", "0.1", "0.0035"},
		{"0.0315", "0.15", "0.004725"},
		{"0.000009", "0.1", "0.00"},
		{"0.000019", "0.1", "0.000001"},
		{"0.10", "0.92", "0.092"},
		{"1.000001", "1.5", "1.500001"},
		{"9223372036854.775807", "1", "9223372036854.775807"},
		{"9223372036854.775807", "0.5", "4611686018427.387903"},
	} {
		a, r := journal.MustParseAmount(tt.amount), journal.MustParseRate(tt.rate)
		got, err := journal.MulFloor(a, r)
		if err != nil || got.String() != tt.want {
			t.Errorf("MulFloor(%s, %s) = %s, %v, want %s", tt.amount, tt.rate, got, err, tt.want)
		}
	}
	if got, err := journal.MulFloor(journal.MaxAmount, journal.One+1); err != journal.ErrOverflow {
		t.Errorf("MulFloor(max, 1.000001) = %d, %v, want ErrOverflow", got, err)
	}
}
