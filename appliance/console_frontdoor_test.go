package appliance_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"holon.dev/holon/appliance"
)

// Ensure that a console page's own API requests go through the front
// door: a NUL in a form field that the page puts in an API path is
// refused with nul_character, as the same request over HTTP is, and
// logged as a request like any other.
func TestConsole_FrontDoor_NUL(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	status, out := ta.admin().do("POST", "/v0/admin/accounts/ann%00/disable", map[string]any{"reason": "spam"})
	if status != http.StatusBadRequest || errorCode(out) != "nul_character" {
		t.Fatalf("over HTTP: %d %v, want 400 nul_character", status, out)
	}
	op := signIn(t, ta, testAdminKey)
	before := ta.logs.String()
	resp, body := op.post("/console/operator/disable", url.Values{"handle": {"ann\x00"}, "reason": {"spam"}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "nul_character") {
		t.Errorf("from the console: %d, want 400 nul_character:\n%s", resp.StatusCode, body)
	}
	logged := strings.TrimPrefix(ta.logs.String(), before)
	if !strings.Contains(logged, `/v0/admin/accounts/ann`) {
		t.Errorf("the console's request to the API was not logged as a request: %s", logged)
	}
	ann.human.must(http.StatusOK, "GET", "/v0/me", nil) // not disabled
}

// Ensure that a console page's own API requests are not charged to the
// account's rate limit as extra API calls: with room for two requests a
// minute, pages that each make several API requests render, again and
// again, while the account's keys are still limited over HTTP.
func TestConsole_FrontDoor_NotRateLimited(t *testing.T) {
	ta := newHostedApp(t, func(c *appliance.Config) {
		c.Limits.Account = appliance.Limit{Rate: rate.Every(time.Minute), Burst: 2}
	})
	ann := ta.signup("ann")
	b := signIn(t, ta, ann.humanKey)
	for i := range 3 {
		for _, page := range []string{"/console/", "/console/mandates/ann/sandbox", "/console/mandates"} {
			if resp, body := b.get(page); resp.StatusCode != http.StatusOK {
				t.Fatalf("round %d, %s: %d\n%s", i, page, resp.StatusCode, body)
			}
		}
	}
	ann.human.must(http.StatusOK, "GET", "/v0/me", nil)
	ann.human.must(http.StatusOK, "GET", "/v0/me", nil)
	if status, out := ann.human.do("GET", "/v0/me", nil); status != http.StatusTooManyRequests {
		t.Errorf("a third API request a minute: %d %v, want 429", status, out)
	}
}
