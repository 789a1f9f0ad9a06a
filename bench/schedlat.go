package bench

import (
	"fmt"
	"math"
	"runtime/metrics"
	"time"
)

// schedLatency is the Go runtime's histogram of how long goroutines
// waited, runnable, before they ran (/sched/latencies:seconds): counts
// since the process began, or between two moments (minus). With the
// gateways and their clients in one process on two cores, a writer that
// PostgreSQL answers waits this long before it reads the answer, once per
// goroutine it hands the answer to.
type schedLatency struct {
	counts  []uint64
	buckets []float64 // len(counts)+1 boundaries, in seconds
}

const schedMetric = "/sched/latencies:seconds"

// schedNow reads the histogram now.
func schedNow() schedLatency {
	s := []metrics.Sample{{Name: schedMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return schedLatency{}
	}
	h := s[0].Value.Float64Histogram()
	return schedLatency{counts: append([]uint64(nil), h.Counts...), buckets: h.Buckets}
}

// combine adds (sign 1) or takes away (sign -1) o's counts; histograms
// of different shapes do not combine (the first one's is kept).
func (h schedLatency) combine(o schedLatency, sign int) schedLatency {
	if len(h.counts) == 0 {
		if sign < 0 {
			return h
		}
		return schedLatency{counts: append([]uint64(nil), o.counts...), buckets: o.buckets}
	}
	if len(o.counts) != len(h.counts) {
		return h
	}
	out := schedLatency{counts: make([]uint64, len(h.counts)), buckets: h.buckets}
	for i, c := range h.counts {
		if sign < 0 {
			out.counts[i] = c - min(c, o.counts[i])
		} else {
			out.counts[i] = c + o.counts[i]
		}
	}
	return out
}

func (h schedLatency) plus(o schedLatency) schedLatency  { return h.combine(o, 1) }
func (h schedLatency) minus(o schedLatency) schedLatency { return h.combine(o, -1) }

func (h schedLatency) total() (n uint64) {
	for _, c := range h.counts {
		n += c
	}
	return n
}

// quantile is the upper bound of the bucket that holds quantile q (the
// histogram's buckets are its resolution); -1 when it is empty.
func (h schedLatency) quantile(q float64) time.Duration {
	n := h.total()
	if n == 0 {
		return -1
	}
	rank := max(uint64(math.Ceil(q*float64(n))), 1)
	i := 0
	for seen := h.counts[0]; seen < rank && i+1 < len(h.counts); seen += h.counts[i] {
		i++
	}
	hi := h.buckets[i+1]
	if math.IsInf(hi, 1) {
		hi = h.buckets[i]
	}
	return time.Duration(hi * float64(time.Second))
}

// note says how long goroutines waited to run.
func (h schedLatency) note() string {
	if h.total() == 0 {
		return "goroutines' wait to run: not known"
	}
	return fmt.Sprintf("goroutines' wait to run once runnable (this process, the Go runtime's histogram): p50 %s, p90 %s, p99 %s over %d waits",
		usOrMs(h.quantile(0.5)), usOrMs(h.quantile(0.9)), usOrMs(h.quantile(0.99)), h.total())
}

func usOrMs(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%.0f µs", float64(d.Nanoseconds())/1e3)
	}
	return fmt.Sprintf("%.2f ms", float64(d.Nanoseconds())/1e6)
}
