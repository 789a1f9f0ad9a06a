package holon

import (
	"errors"
	"math"
	"sort"

	"holon.dev/holon/journal"
)

// Earned is what one version earned in one currency: its author's share of
// the paid calls made to it, and the royalties its forks paid it.
type Earned struct {
	// PaidCalls counts the settlements that paid this version's author a
	// creator share.
	PaidCalls int64 `json:"paid_calls"`
	// Own is the sum of those creator shares (after the royalties the
	// version itself pays upstream).
	Own journal.Amount `json:"own"`
	// Royalties is what forks of this version paid it, at any depth.
	Royalties journal.Amount `json:"royalties"`
}

// Earnings is a version's earnings by currency.
type Earnings map[string]Earned

// Add counts paidCalls more paid calls and adds own and royalties to the
// earnings in currency; it refuses a change that would leave any of them
// below zero, and then changes nothing.
func (e Earnings) Add(currency string, paidCalls int64, own, royalties journal.Amount) error {
	x := e[currency]
	x.PaidCalls += paidCalls
	var err error
	if x.Own, err = x.Own.Add(own); err != nil {
		return err
	}
	if x.Royalties, err = x.Royalties.Add(royalties); err != nil {
		return err
	}
	if x.PaidCalls < 0 || x.Own < 0 || x.Royalties < 0 {
		return ErrEarningsBelowZero
	}
	e[currency] = x
	return nil
}

// ErrEarningsBelowZero is Earnings.Add's refusal of a change that would
// leave a count or an amount below zero.
var ErrEarningsBelowZero = errors.New("earnings would go below zero")

// LatencyBoundsMS are the upper bounds, in milliseconds, of a latency
// histogram's buckets; a last bucket counts everything slower.
var LatencyBoundsMS = []int64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000, 120000, 300000}

// Latency is a version's settled runs as a histogram of their durations:
// Counts[i] runs took at most LatencyBoundsMS[i] (and more than the bound
// before it); the last count is the slower ones.
type Latency struct {
	Counts []int64 `json:"counts"`
}

// LatencyBucket is the histogram bucket a duration falls in.
func LatencyBucket(ms int64) int {
	return sort.Search(len(LatencyBoundsMS), func(i int) bool { return ms <= LatencyBoundsMS[i] })
}

// Runs is how many runs the histogram counts.
func (l Latency) Runs() int64 {
	var n int64
	for _, c := range l.Counts {
		n += c
	}
	return n
}

// Quantile is the upper bound (ms) of the bucket holding quantile q (0 < q
// ≤ 1) of the runs, -1 for a run slower than the last bound, 0 when there
// are no runs.
func (l Latency) Quantile(q float64) int64 {
	n := l.Runs()
	if n == 0 {
		return 0
	}
	// The rank of the quantile, rounded up: at least that many runs are at
	// or below the answer.
	rank := int64(math.Ceil(q * float64(n)))
	rank = min(max(rank, 1), n)
	var seen int64
	for i, c := range l.Counts {
		seen += c
		if seen >= rank {
			if i < len(LatencyBoundsMS) {
				return LatencyBoundsMS[i]
			}
			return -1
		}
	}
	return -1
}
