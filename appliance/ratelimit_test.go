package appliance_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"holon.dev/holon/appliance"
)

// hourly is a limit of n requests that refills one an hour: within a test
// it never refills.
func hourly(n int) appliance.Limit {
	return appliance.Limit{Rate: rate.Every(time.Hour), Burst: n}
}

func trustProxy(on bool) func(*appliance.Config) {
	return func(c *appliance.Config) { c.TrustProxy = &on }
}

// checkLimited wants a 429 rate_limited with a Retry-After in seconds.
func checkLimited(t *testing.T, what string, status int, h http.Header, b []byte) {
	t.Helper()
	ra, err := strconv.Atoi(h.Get("Retry-After"))
	if status != http.StatusTooManyRequests || err != nil || ra < 1 || !containsAny(string(b), `"code":"rate_limited"`) {
		t.Errorf("%s: %d, Retry-After %q, %s; want 429 rate_limited with Retry-After", what, status, h.Get("Retry-After"), b)
	}
}

// Ensure that the rate limit is per account: spreading requests over more
// keys of the same account buys nothing, and another account is not
// affected.
func TestRateLimit_MoreKeysBuyNothing(t *testing.T) {
	ta := newHostedApp(t, func(c *appliance.Config) { c.Limits.Account = hourly(10) })
	ann, bob := ta.signup("ann"), ta.signup("bob")
	keys := []client{ann.human, ann.agent}
	for i := 0; i < 3; i++ { // three requests of the ten
		k, _ := ann.newAgentKey("ann/sandbox")
		keys = append(keys, k)
	}
	for i := 0; i < 7; i++ { // the other seven, each key in turn
		keys[i%len(keys)].must(http.StatusOK, "GET", "/v0/me", nil)
	}
	for i, k := range keys {
		status, h, b := k.raw("GET", "/v0/me", nil)
		checkLimited(t, fmt.Sprintf("ann's key %d after ten requests", i), status, h, b)
	}
	bob.human.must(http.StatusOK, "GET", "/v0/me", nil)
}

// Ensure that behind a trusted proxy the client address is the last
// X-Forwarded-For entry, the one the proxy appended: entries a client
// forges before it, or extra headers before the proxy's, buy nothing, while
// another real client keeps its own limit.
func TestRateLimit_ForgedForwardedFor(t *testing.T) {
	ta := newHostedApp(t, trustProxy(true), func(c *appliance.Config) { c.Limits.Address = hourly(5) })
	for i := 0; i < 5; i++ {
		ta.anonymous().with("X-Forwarded-For", fmt.Sprintf("10.0.0.%d, 203.0.113.7", i)).must(http.StatusOK, "GET", "/healthz", nil)
	}
	for i, c := range []client{
		ta.anonymous().with("X-Forwarded-For", "198.51.100.99, 203.0.113.7"),
		ta.anonymous().with("X-Forwarded-For", "198.51.100.1").with("X-Forwarded-For", "203.0.113.7"),
		ta.anonymous().with("X-Forwarded-For", "2001:db8::1, 203.0.113.7"),
		ta.admin().with("X-Forwarded-For", "203.0.113.7"),
	} {
		status, h, b := c.raw("GET", "/v0/agents", nil)
		checkLimited(t, fmt.Sprintf("forged request %d from 203.0.113.7", i), status, h, b)
	}
	ta.anonymous().with("X-Forwarded-For", "203.0.113.7, 203.0.113.8").must(http.StatusOK, "GET", "/healthz", nil)
	// An IPv6 client counts by its /64: rotating within it buys nothing.
	for i := 0; i < 5; i++ {
		ta.anonymous().with("X-Forwarded-For", fmt.Sprintf("2001:db8:1:2::%x", i+1)).must(http.StatusOK, "GET", "/healthz", nil)
	}
	status, h, b := ta.anonymous().with("X-Forwarded-For", "2001:db8:1:2:ffff::9").raw("GET", "/healthz", nil)
	checkLimited(t, "a sixth address in the same /64", status, h, b)
}

// Ensure that without a trusted proxy X-Forwarded-For is ignored: every
// request counts against the connection's address.
func TestRateLimit_UntrustedForwardedFor(t *testing.T) {
	ta := newHostedApp(t, trustProxy(false), func(c *appliance.Config) { c.Limits.Address = hourly(3) })
	for i := 0; i < 3; i++ {
		ta.anonymous().with("X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i)).must(http.StatusOK, "GET", "/healthz", nil)
	}
	status, h, b := ta.anonymous().with("X-Forwarded-For", "198.51.100.200").raw("GET", "/healthz", nil)
	checkLimited(t, "a fourth request with a new forged address", status, h, b)
}

// Ensure that signups are limited per address more strictly than other
// requests, and that a forged X-Forwarded-For does not reset the count.
func TestRateLimit_Signups(t *testing.T) {
	ta := newHostedApp(t, trustProxy(true), func(c *appliance.Config) { c.Limits.Signup = hourly(2) })
	from := func(fwd string) client { return ta.anonymous().with("X-Forwarded-For", fwd) }
	for _, h := range []string{"ann", "bob"} {
		from("203.0.113.7").must(http.StatusCreated, "POST", "/v0/signup", map[string]any{"handle": h, "email": h + "@example.com"})
	}
	status, hdr, b := from("10.9.9.9, 203.0.113.7").raw("POST", "/v0/signup", mustJSON(t, map[string]any{"handle": "cat", "email": "cat@example.com"}))
	checkLimited(t, "a third signup from one address", status, hdr, b)
	from("203.0.113.7").must(http.StatusOK, "GET", "/v0/agents", nil)
	from("203.0.113.8").must(http.StatusCreated, "POST", "/v0/signup", map[string]any{"handle": "cat", "email": "cat@example.com"})
}
