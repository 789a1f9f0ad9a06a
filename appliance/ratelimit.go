package appliance

import (
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/ratelimit"
)

// limiters are a hosted gateway's rate limits.
type limiters struct {
	account, address, signup ratelimit.Limiter
	trustProxy               bool
}

// newLimiters keeps the limits in memory or, on a store several gateways
// share that keeps token buckets (holon.SharedLimits), in the store, so
// that each limit holds across the gateways.
func newLimiters(l Limits, trustProxy bool, now func() time.Time, store holon.Store) *limiters {
	shared, _ := store.(holon.SharedLimits)
	set := func(lim Limit, kind string) ratelimit.Limiter {
		local := ratelimit.NewSet(lim, l.MaxTracked, now)
		if shared == nil {
			return local
		}
		return ratelimit.NewShared(shared, kind+":", lim, local)
	}
	return &limiters{
		account:    set(l.Account, "account"),
		address:    set(l.Address, "address"),
		signup:     set(l.Signup, "signup"),
		trustProxy: trustProxy,
	}
}
