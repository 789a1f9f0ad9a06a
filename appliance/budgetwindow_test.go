package appliance_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// Ensure that a budget that renews by window is created through the API
// like any mandate, and that the API, /mcp and the console all show its
// current window, what is left in it, and when it renews.
func TestBudgetWindow_ShownEverywhere(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	ann.createMandate("daily", map[string]any{
		"budget": map[string]any{"window": "day", "per_window": "0.20", "timezone": "Europe/Paris"},
		"allow":  map[string]any{"agents": []string{"holon-labs/*"}},
	})
	ann.human.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/daily"))
	out := ann.human.must(http.StatusOK, "GET", "/v0/mandates/ann/daily", nil)
	w, _ := out["window"].(map[string]any)
	loc, _ := time.LoadLocation("Europe/Paris")
	now := time.Now().In(loc)
	end := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, loc).Format(time.RFC3339)
	if w == nil || w["kind"] != "day" || w["spent"] != "0.08" || w["remaining"] != "0.12" || w["per_window"] != "0.20" ||
		w["timezone"] != "Europe/Paris" || w["end"] != end || out["remaining"] != "0.12" {
		t.Fatalf("GET /v0/mandates/ann/daily: window %v, remaining %v; want 0.08 spent of 0.20, renewing at %s", w, out["remaining"], end)
	}
	// A second call would pass what is left today: refused, saying when
	// the budget renews.
	ann.human.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/daily"))
	status, denied := ann.human.do("POST", "/v0/calls", lookup("ann/daily"))
	e, _ := denied["error"].(map[string]any)
	if status != http.StatusForbidden || e["code"] != "over_budget" || !strings.Contains(str(e["message"]), "renews at "+end) {
		t.Errorf("a call over today's allowance: %d %v", status, denied)
	}

	key, _ := ann.newKey("ann/daily", false)
	s := connectMCP(t, ta.srv.URL+"/mcp", key, nil)
	b := s.ok("get_budget", map[string]any{})
	mw, _ := b["window"].(map[string]any)
	if mw == nil || mw["end"] != end || mw["remaining"] != "0.04" || b["total"] != nil {
		t.Errorf("get_budget: %v", b)
	}

	br := signIn(t, ta, ann.humanKey)
	resp, body := br.get("/console/mandates/ann/daily")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-window="day:`) || !strings.Contains(body, `datetime="`+strings.ReplaceAll(end, "+", "&#43;")+`"`) ||
		!strings.Contains(body, `<span data-window-remaining>0.04</span>`) || !strings.Contains(body, "every day, 0.20 EUR each, in Europe/Paris") {
		t.Errorf("the console's mandate page: %d\n%s", resp.StatusCode, body)
	}
}
