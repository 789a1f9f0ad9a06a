package journal_test

import (
	"math/big"
	"regexp"
	"testing"

	"holon.dev/holon/journal"
)

// wireAmount is the grammar of manifest.md §4, independent of the parser.
var wireAmount = regexp.MustCompile(`^[0-9]+(\.[0-9]{1,6})?$`)

// Ensure that ParseAmount never panics, accepts exactly the strings of the
// wire grammar that fit in an Amount, reads them at their exact value, and
// that String gives back a canonical string that parses to the same amount.
func FuzzParseAmount(f *testing.F) {
	for _, tt := range parseAmountCases {
		f.Add(tt.in)
	}
	for _, s := range []string{"0.100", "0.0035", "0.192", "1.2.3", "٣", "0x10", "1_000", "-0", "9223372036854775807"} {
		f.Add(s)
	}
	million := big.NewRat(int64(journal.Micro), 1)
	maxAmount := new(big.Rat).SetInt64(int64(journal.MaxAmount))
	f.Fuzz(func(t *testing.T, s string) {
		a, err := journal.ParseAmount(s)

		// The reference: the grammar, then the exact value in micro-units.
		var want *big.Rat
		if wireAmount.MatchString(s) {
			r, ok := new(big.Rat).SetString(s)
			if !ok {
				t.Fatalf("big.Rat cannot read %q", s)
			}
			if r.Mul(r, million); r.Cmp(maxAmount) <= 0 {
				want = r
			}
		}
		if err != nil {
			if want != nil {
				t.Fatalf("ParseAmount(%q): %v, want %s micro-units", s, err, want.RatString())
			}
			return
		}
		if want == nil {
			t.Fatalf("ParseAmount(%q) = %d, want an error", s, a)
		}
		if want.Cmp(new(big.Rat).SetInt64(int64(a))) != 0 {
			t.Fatalf("ParseAmount(%q) = %d micro-units, want %s", s, a, want.RatString())
		}
		if a < 0 {
			t.Fatalf("ParseAmount(%q) = %d, want a non-negative amount", s, a)
		}
		canonical := a.String()
		back, err := journal.ParseAmount(canonical)
		if err != nil || back != a {
			t.Fatalf("ParseAmount(%q) = %d, but its String %q reads back as %d, %v", s, a, canonical, back, err)
		}
		if again := back.String(); again != canonical {
			t.Fatalf("String is not canonical: %q then %q", canonical, again)
		}
	})
}
