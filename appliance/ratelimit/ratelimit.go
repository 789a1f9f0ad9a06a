// Package ratelimit is the gateway's rate limits: token buckets by key
// (an account, a client address), kept in memory and bounded (Set), or
// kept where every gateway of a cluster takes from them (Shared), behind
// the Limiter interface.
//
// It imports nothing of the project.
package ratelimit

import (
	"sort"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter takes one token from a key's bucket: false, and how long until
// a token is there, when the bucket is empty.
type Limiter interface {
	Allow(key string) (ok bool, wait time.Duration)
}

// DefaultMaxTracked bounds the buckets a Set keeps unless told otherwise.
const DefaultMaxTracked = 100_000

// Limit is a token bucket: Burst requests at once, refilled at Rate per
// second.
type Limit struct {
	Rate  rate.Limit
	Burst int
}

// Set is one token bucket per key (an account, an address), kept in
// memory and bounded: when it reaches max entries, the buckets that are
// full again (idle long enough that forgetting them changes nothing) are
// dropped, then, if that is not enough, the least recently used half.
type Set struct {
	limit Limit
	max   int
	now   func() time.Time

	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	lim  *rate.Limiter
	seen time.Time
}

// NewSet returns an empty set of buckets of limit l, keeping at most max
// (DefaultMaxTracked when max is 0).
func NewSet(l Limit, max int, now func() time.Time) *Set {
	if max <= 0 {
		max = DefaultMaxTracked
	}
	return &Set{limit: l, max: max, now: now, m: map[string]*entry{}}
}

// Allow takes one token from key's bucket. When the bucket is empty it
// returns false and how long until a token is there.
func (s *Set) Allow(key string) (bool, time.Duration) {
	if s.limit.Rate == rate.Inf {
		return true, 0
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	if !ok {
		if len(s.m) >= s.max {
			s.evict(now)
		}
		e = &entry{lim: rate.NewLimiter(s.limit.Rate, s.limit.Burst)}
		s.m[key] = e
	}
	e.seen = now
	r := e.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Hour
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

func (s *Set) evict(now time.Time) {
	for k, e := range s.m {
		if e.lim.TokensAt(now) >= float64(s.limit.Burst) {
			delete(s.m, k)
		}
	}
	if len(s.m) < s.max {
		return
	}
	type aged struct {
		key  string
		seen time.Time
	}
	all := make([]aged, 0, len(s.m))
	for k, e := range s.m {
		all = append(all, aged{k, e.seen})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].seen.Before(all[j].seen) })
	for _, a := range all[:len(all)/2+1] {
		delete(s.m, a.key)
	}
}

// Size is how many buckets are kept.
func (s *Set) Size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
