package ratelimit

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// Taker keeps token buckets where every gateway takes from them (the
// PostgreSQL store): TakeToken takes one token from key's bucket in one
// atomic step and returns what it held before (under 1: nothing taken).
type Taker interface {
	TakeToken(ctx context.Context, key string, rate float64, burst int) (float64, error)
}

// TakeTimeout bounds one take from a Taker; past it, or when the Taker
// fails, the gateway's own buckets decide.
const TakeTimeout = 2 * time.Second

// Shared is one token bucket per key kept by a Taker, so that a limit
// holds across every gateway that shares it, not once per gateway. While
// the Taker cannot be reached, each gateway limits on its own (Local):
// a limit is never lifted, and at worst N gateways admit N times it.
type Shared struct {
	taker  Taker
	prefix string
	limit  Limit
	local  *Set
}

var _ Limiter = (*Shared)(nil)

// NewShared returns the limit l kept by t, its keys named prefix+key
// there, and local as the fallback.
func NewShared(t Taker, prefix string, l Limit, local *Set) *Shared {
	return &Shared{taker: t, prefix: prefix, limit: l, local: local}
}

// Allow takes one token from key's shared bucket. When the bucket is
// empty it returns false and how long until a token is there.
func (s *Shared) Allow(key string) (bool, time.Duration) {
	if s.limit.Rate == rate.Inf {
		return true, 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), TakeTimeout)
	defer cancel()
	held, err := s.taker.TakeToken(ctx, s.prefix+key, float64(s.limit.Rate), s.limit.Burst)
	switch {
	case err != nil:
		return s.local.Allow(key)
	case held >= 1:
		return true, 0
	case s.limit.Rate <= 0:
		return false, time.Hour
	}
	return false, time.Duration((1 - held) / float64(s.limit.Rate) * float64(time.Second))
}
