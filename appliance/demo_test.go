package appliance_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
)

const siteURL = "https://site.example"

// Ensure that the demo runs our own cheap agents for free (no receipt, no
// money, no measurement), narrows the input, answers the site's origin
// only, and stops at 10 tries per visitor and 600 in all per hour.
func TestDemo(t *testing.T) {
	trust := true
	ta := newHostedApp(t, func(c *appliance.Config) { c.SiteURL = siteURL; c.TrustProxy = &trust })
	from := func(addr, origin string) client {
		c := ta.anonymous().with("X-Forwarded-For", addr)
		if origin != "" {
			c = c.with("Origin", origin)
		}
		return c
	}
	try := func(c client, agent, input string) (int, http.Header, []byte) {
		return c.raw("POST", "/v0/demo/"+agent, []byte(`{"input":`+input+`}`))
	}
	before, _ := ta.admin().do("GET", "/v0/accounts", nil)
	status, h, body := try(from("198.51.100.1", siteURL), "holon-labs/text-tables", `{"text":"a,b\nc,d"}`)
	if status != http.StatusOK || !strings.Contains(string(body), `"rows":[["a","b"],["c","d"]]`) {
		t.Fatalf("demo try: %d %s", status, body)
	}
	if h.Get("Access-Control-Allow-Origin") != siteURL {
		t.Errorf("CORS for the site: %q", h.Get("Access-Control-Allow-Origin"))
	}
	// Not billed, not measured, no receipt.
	after, _ := ta.admin().do("GET", "/v0/accounts", nil)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("money moved: %v then %v", before, after)
	}
	cat := ta.anonymous().must(http.StatusOK, "GET", "/v0/catalog?q=text-tables", nil)
	if m := firstAgent(t, cat)["measured"].(map[string]any); m["runs"] != float64(0) || m["latency_ms"] != nil {
		t.Errorf("the demo was measured: %v", m)
	}
	var receipts uint64
	if err := ta.app.Engine().Store().View(func(tx holon.Tx) error { receipts = tx.Counter("receipts"); return nil }); err != nil || receipts != 0 {
		t.Errorf("the demo left %d receipts (%v)", receipts, err)
	}

	for _, tc := range []struct {
		name, addr, origin, agent, input string
		status                           int
		code                             string
	}{
		{"another site", "198.51.100.2", "https://evil.example", "holon-labs/text-tables", `{"text":"a,b"}`, http.StatusForbidden, "forbidden"},
		{"not shipped", "198.51.100.2", "", "test-lab/echo", `{"text":"a"}`, http.StatusNotFound, "not_found"},
		{"an orchestrator", "198.51.100.2", "", "holon-labs/invoice-pipeline", `{"text":"a,b"}`, http.StatusNotFound, "not_found"},
		{"too long", "198.51.100.2", "", "holon-labs/text-tables", `{"text":"` + strings.Repeat("a,", 2000) + `"}`, http.StatusRequestEntityTooLarge, "body_too_large"},
		{"an uploaded file", "198.51.100.2", "", "holon-labs/text-tables", `{"text":"holon://files/f1"}`, http.StatusNotFound, "file_not_found"},
		{"bad input", "198.51.100.2", "", "holon-labs/text-tables", `{"txt":"a,b"}`, http.StatusUnprocessableEntity, "rejected_input"},
		{"declared error", "198.51.100.2", "", "holon-labs/text-tables", `{"text":"no table"}`, http.StatusBadGateway, "no_table_found"},
	} {
		status, _, body := try(from(tc.addr, tc.origin), tc.agent, tc.input)
		if status != tc.status || !bytes.Contains(body, []byte(`"code":"`+tc.code+`"`)) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, body, tc.status, tc.code)
		}
	}
	// The browser's preflight: the site yes, another origin no.
	status, h, _ = from("198.51.100.3", siteURL).raw("OPTIONS", "/v0/demo/holon-labs/text-tables", nil)
	if status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != siteURL || h.Get("Access-Control-Allow-Methods") != "POST" {
		t.Errorf("preflight: %d %v", status, h)
	}
	if status, _, _ = from("198.51.100.3", "https://evil.example").raw("OPTIONS", "/v0/demo/holon-labs/text-tables", nil); status != http.StatusForbidden {
		t.Errorf("preflight from another origin: %d", status)
	}

	// 10 per visitor: 198.51.100.2 ran two above (the declared error and
	// the bad input were tried; refusals before the run are not counted).
	n := 0
	for ; n < 20; n++ {
		if status, _, _ := try(from("198.51.100.4", ""), "holon-labs/company-lookup", `{"name":"acme corp"}`); status == http.StatusTooManyRequests {
			break
		}
	}
	if n != 10 {
		t.Errorf("a visitor got %d tries, want 10", n)
	}
	// 600 in all: the visitors so far ran 1 + 2 + 10; fill the hour.
	used := 13
	for v := 0; used < 600; v++ {
		for i := 0; i < 10 && used < 600; i++ {
			if status, _, body := try(from(fmt.Sprintf("203.0.113.%d", v), ""), "holon-labs/company-lookup", `{"name":"acme corp"}`); status != http.StatusOK {
				t.Fatalf("try %d: %d %s", used+1, status, body)
			}
			used++
		}
	}
	status, _, body = try(from("192.0.2.77", ""), "holon-labs/company-lookup", `{"name":"acme corp"}`)
	if status != http.StatusTooManyRequests || !strings.Contains(string(body), "600 tries of this hour") {
		t.Errorf("try 601: %d %s, want 429", status, body)
	}
}
