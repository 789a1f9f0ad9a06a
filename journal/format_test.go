package journal_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"holon.dev/holon/journal"
)

// canonical is the canonical form written the plain way: at least two
// decimals, at most six, trailing zeros beyond the second removed.
func canonical(v int64) string {
	neg := v < 0
	u := uint64(v)
	if neg {
		u = -u
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", u%journal.Micro), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	s := strconv.FormatUint(u/journal.Micro, 10) + "." + frac
	if neg {
		return "-" + s
	}
	return s
}

// Ensure that String, MarshalText and AppendText write the canonical form
// for every kind of amount, negative ones and the extremes included.
func TestAmount_Format_Canonical(t *testing.T) {
	vals := []int64{0, 1, 9, 10, 99, 100, 4725, 100_000, 1_000_000, 1_000_001, 1_230_000, 3_000_000,
		math.MaxInt64, math.MinInt64, math.MinInt64 + 1, -1, -35_000, -1_000_000}
	r := rand.New(rand.NewPCG(7, 8))
	for range 100_000 {
		vals = append(vals, r.Int64()>>r.IntN(63), -(r.Int64() >> r.IntN(63)))
	}
	for _, v := range vals {
		a, want := journal.Amount(v), canonical(v)
		if got := a.String(); got != want {
			t.Fatalf("Amount(%d).String() = %q, want %q", v, got, want)
		}
		if got, _ := a.MarshalText(); string(got) != want {
			t.Fatalf("Amount(%d).MarshalText() = %q, want %q", v, got, want)
		}
		if got, _ := a.AppendText([]byte("x")); string(got) != "x"+want {
			t.Fatalf("Amount(%d).AppendText = %q, want %q", v, got, "x"+want)
		}
		if v >= 0 {
			if back, err := journal.ParseAmount(want); err != nil || back != a {
				t.Fatalf("ParseAmount(%q) = %d, %v; want %d", want, back, err, v)
			}
		}
	}
}

func BenchmarkAmount_String(b *testing.B) {
	a := journal.MustParseAmount("0.004725")
	for range b.N {
		_ = a.String()
	}
}
