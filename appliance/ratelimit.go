package appliance

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiterSet is one token bucket per key (an account, an address), kept in
// memory and bounded: when it reaches max entries, the buckets that are
// full again (idle long enough that forgetting them changes nothing) are
// dropped, then, if that is not enough, the least recently used half.
type limiterSet struct {
	limit Limit
	max   int
	now   func() time.Time

	mu sync.Mutex
	m  map[string]*limiterEntry
}

type limiterEntry struct {
	lim  *rate.Limiter
	seen time.Time
}

func newLimiterSet(l Limit, max int, now func() time.Time) *limiterSet {
	if max <= 0 {
		max = DefaultLimits.MaxTracked
	}
	return &limiterSet{limit: l, max: max, now: now, m: map[string]*limiterEntry{}}
}

// allow takes one token from key's bucket. When the bucket is empty it
// returns false and how long until a token is there.
func (s *limiterSet) allow(key string) (bool, time.Duration) {
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
		e = &limiterEntry{lim: rate.NewLimiter(s.limit.Rate, s.limit.Burst)}
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

func (s *limiterSet) evict(now time.Time) {
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

// size is how many buckets are kept.
func (s *limiterSet) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// limiters are a hosted gateway's rate limits.
type limiters struct {
	account, address, signup *limiterSet
	trustProxy               bool
}

func newLimiters(l Limits, trustProxy bool, now func() time.Time) *limiters {
	return &limiters{
		account:    newLimiterSet(l.Account, l.MaxTracked, now),
		address:    newLimiterSet(l.Address, l.MaxTracked, now),
		signup:     newLimiterSet(l.Signup, l.MaxTracked, now),
		trustProxy: trustProxy,
	}
}

// clientAddr is the address a request comes from: the connection's peer,
// or, behind a trusted proxy, the last X-Forwarded-For entry (the one the
// proxy appended; every earlier entry is whatever the client sent). An
// IPv6 address counts by its /64, which one client typically holds whole.
func (l *limiters) clientAddr(r *http.Request) string {
	host := r.RemoteAddr
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		host = h
	}
	if l.trustProxy {
		if vs := r.Header.Values("X-Forwarded-For"); len(vs) > 0 {
			last := vs[len(vs)-1]
			if i := strings.LastIndexByte(last, ','); i >= 0 {
				last = last[i+1:]
			}
			if last = strings.TrimSpace(last); last != "" {
				host = last
			}
		}
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// retryAfter is a Retry-After value: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}
