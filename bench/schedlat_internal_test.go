package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestSchedLatency(t *testing.T) {
	b := []float64{0, 1e-6, 1e-5, 1e-4, 1e-3, math.Inf(1)}
	at := func(c ...uint64) schedLatency { return schedLatency{counts: c, buckets: b} }
	h := at(10, 20, 30, 40, 5).minus(at(10, 10, 0, 0, 0))
	if got := h.total(); got != 85 {
		t.Fatalf("total %d, want 85", got)
	}
	for _, tt := range []struct {
		q    float64
		want time.Duration
	}{
		// counts 0, 10, 30, 40, 5 in [0, 1 µs), [1, 10 µs), [10, 100 µs),
		// [100 µs, 1 ms), [1 ms, ∞)
		{0.01, 10 * time.Microsecond}, // rank 1
		{0.4, 100 * time.Microsecond}, // rank 34: 10 below 10 µs, 40 below 100 µs
		{0.5, time.Millisecond},       // rank 43
		{0.99, time.Millisecond},      // rank 85: the last bucket has no upper bound, its lower one
	} {
		if got := h.quantile(tt.q); got != tt.want {
			t.Errorf("quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := (schedLatency{}).plus(h).plus(h).total(); got != 170 {
		t.Errorf("two blocks added: %d waits, want 170", got)
	}
	if got := h.minus(at(1, 2)).total(); got != 85 {
		t.Errorf("a histogram of another shape was taken away: %d, want 85", got)
	}
	if (schedLatency{}).quantile(0.5) != -1 || !strings.Contains((schedLatency{}).note(), "not known") {
		t.Error("an empty histogram has a quantile")
	}
	// The runtime's own histogram is there, and grows.
	s0 := schedNow()
	done := make(chan struct{})
	for range 100 {
		go func() { done <- struct{}{} }()
	}
	for range 100 {
		<-done
	}
	if d := schedNow().minus(s0); d.total() == 0 || !strings.Contains(d.note(), "p50") {
		t.Errorf("the runtime's histogram did not grow over 100 goroutines: %+v", d)
	}
}
