package bench

import (
	"math"
	"testing"
	"time"
)

// Ensure that quantiles are read by nearest rank.
func TestLatencies_P(t *testing.T) {
	var l latencies
	for i := 1; i <= 100; i++ {
		l = append(l, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0.001, time.Millisecond}} {
		if got := l.P(c.q); got != c.want {
			t.Errorf("P(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := (latencies{}).P(0.5); got != 0 {
		t.Errorf("P of nothing = %v, want 0", got)
	}
}

// Ensure that figures get thousands separators.
// The smallest int64, which a rate of no calls converted to int64 gives,
// has no positive counterpart.
func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -20000: "-20,000", -999: "-999",
		math.MinInt64: "-9,223,372,036,854,775,808", math.MaxInt64: "9,223,372,036,854,775,807"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
