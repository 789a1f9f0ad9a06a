package appliance

import (
	"time"

	"holon.dev/holon/appliance/ratelimit"
)

// limiters are a hosted gateway's rate limits.
type limiters struct {
	account, address, signup ratelimit.Limiter
	trustProxy               bool
}

func newLimiters(l Limits, trustProxy bool, now func() time.Time) *limiters {
	return &limiters{
		account:    ratelimit.NewSet(l.Account, l.MaxTracked, now),
		address:    ratelimit.NewSet(l.Address, l.MaxTracked, now),
		signup:     ratelimit.NewSet(l.Signup, l.MaxTracked, now),
		trustProxy: trustProxy,
	}
}
