package appliance_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"holon.dev/holon/appliance"
	"holon.dev/holon/backup/pgtest"
)

// Ensure that an account's rate limit holds across three gateways on one
// PostgreSQL store: a burst of three times the limit, spread over the
// three and sent at once, is admitted within 10 % of the limit, not three
// times it; the rest answer 429 with a Retry-After.
func TestRateLimit_HoldsAcrossGateways(t *testing.T) {
	url := pgtest.Start(t).CreateDB(t, "limits")
	const burst = 30
	limits := func(c *appliance.Config) {
		c.Limits = appliance.Limits{
			Account:    appliance.Limit{Rate: rate.Every(time.Hour), Burst: burst},
			Address:    appliance.Limit{Rate: rate.Inf},
			Signup:     appliance.Limit{Rate: rate.Inf},
			MaxTracked: 1000,
		}
	}
	var gws []*hostedApp
	for range 3 {
		gws = append(gws, newHostedApp(t, onPostgres(url), limits))
	}
	ann := gws[0].signup("ann")
	var mu sync.Mutex
	codes := map[int]int{}
	retry := 0
	var wg sync.WaitGroup
	for i := range 3 * burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := ann.human
			c.ta = gws[i%3]
			code, hd, _ := c.raw("GET", "/v0/files", nil)
			mu.Lock()
			codes[code]++
			if code == http.StatusTooManyRequests && hd.Get("Retry-After") != "" {
				retry++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	admitted := codes[http.StatusOK]
	t.Logf("limit %d, sent %d over 3 gateways: %v", burst, 3*burst, codes)
	if admitted < burst*9/10 || admitted > burst*11/10 || admitted+codes[http.StatusTooManyRequests] != 3*burst {
		t.Errorf("admitted %d of %d across three gateways (%v), want %d ± 10 %%", admitted, 3*burst, codes, burst)
	}
	if retry != codes[http.StatusTooManyRequests] {
		t.Errorf("%d of %d refusals say Retry-After", retry, codes[http.StatusTooManyRequests])
	}
}
