package appliance_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
)

// listed reports whether GET /v0/agents lists an agent id.
func listed(c client, id string) bool {
	c.ta.t.Helper()
	for _, a := range c.must(http.StatusOK, "GET", "/v0/agents", nil)["agents"].([]any) {
		if a.(map[string]any)["id"] == id {
			return true
		}
	}
	return false
}

// modLog reads the moderation log as the operator.
func modLog(ta *hostedApp) []map[string]any {
	ta.t.Helper()
	var out []map[string]any
	for _, e := range ta.admin().must(http.StatusOK, "GET", "/v0/admin/log", nil)["entries"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

// Ensure that disabling an account revokes every one of its keys at once,
// bars its email from signing up again (in any case), withdraws its agents
// with yank_agents (not resolved, not listed, not callable, also after a
// restart), and is in the moderation log with its reason.
func TestModeration_DisableAccount(t *testing.T) {
	ta := newHostedApp(t)
	dan, bob := ta.signup("dan"), ta.signup("bob")
	extra, _ := dan.newAgentKey("dan/sandbox")
	// dan's namespace gets agents after dan signed up: an operator added a
	// registry directory that holds them.
	danAgents := writeRegistry(t, map[string]string{"echo.yaml": echoManifest("dan", "1.0.0")})
	ta.restart(func(c *appliance.Config) { c.Registry = append(c.Registry, danAgents) })
	bob.createMandate("wide", map[string]any{"budget": map[string]any{"total": "1.00"}, "allow": map[string]any{"agents": []string{"dan/*"}}})
	echo := map[string]any{"mandate": "bob/wide", "agent": "dan/echo", "input": map[string]any{"text": "hi"}}
	bob.human.must(http.StatusOK, "POST", "/v0/calls", echo)
	if !listed(ta.anonymous(), "dan/echo") {
		t.Fatal("dan/echo is not listed before the disable")
	}
	for _, k := range []client{dan.human, dan.agent, extra} {
		k.must(http.StatusOK, "GET", "/v0/me", nil)
	}

	status, out := ta.admin().do("POST", "/v0/admin/accounts/dan/disable", map[string]any{})
	if status != http.StatusBadRequest {
		t.Errorf("disable without a reason: %d %v, want 400", status, out)
	}
	out = ta.admin().must(http.StatusOK, "POST", "/v0/admin/accounts/dan/disable", map[string]any{"reason": "spam calls", "yank_agents": true})
	if out["keys_revoked"] != float64(3) || str(out["yanked"]) != "[dan/echo@1.0.0]" {
		t.Errorf("disable answer %v, want 3 keys revoked and dan/echo@1.0.0 yanked", out)
	}
	for i, k := range []client{dan.human, dan.agent, extra} {
		if status, out := k.do("GET", "/v0/me", nil); status != http.StatusUnauthorized || errorCode(out) != "invalid_key" {
			t.Errorf("dan's key %d after the disable: %d %v, want 401 invalid_key", i, status, out)
		}
	}
	for _, email := range []string{"dan@example.com", "DAN@Example.COM"} {
		status, out := ta.anonymous().do("POST", "/v0/signup", map[string]any{"handle": "dan-again", "email": email})
		if status != http.StatusForbidden || errorCode(out) != "email_disabled" {
			t.Errorf("signup with %s: %d %v, want 403 email_disabled", email, status, out)
		}
	}
	if status, _ := ta.admin().do("POST", "/v0/admin/accounts/dan/disable", map[string]any{"reason": "again"}); status != http.StatusConflict {
		t.Errorf("disabling twice: %d, want 409", status)
	}
	withdrawn := func(when string) {
		if listed(ta.anonymous(), "dan/echo") {
			t.Errorf("%s: dan/echo is still listed", when)
		}
		if status, _ := ta.anonymous().do("GET", "/v0/agents/dan/echo", nil); status != http.StatusNotFound {
			t.Errorf("%s: GET /v0/agents/dan/echo: %d, want 404", when, status)
		}
		if status, out := bob.human.do("POST", "/v0/calls", echo); status != http.StatusNotFound || errorCode(out) != "not_found" {
			t.Errorf("%s: calling dan/echo: %d %v, want 404 not_found", when, status, out)
		}
	}
	withdrawn("after the disable")
	ta.restart()
	withdrawn("after a restart")
	if status, _ := dan.human.do("GET", "/v0/me", nil); status != http.StatusUnauthorized {
		t.Errorf("dan's key after a restart: %d, want 401", status)
	}

	log := modLog(ta)
	if len(log) != 2 || log[0]["action"] != "disable" || log[0]["target"] != "dan" || log[0]["reason"] != "spam calls" ||
		log[1]["action"] != "yank" || log[1]["target"] != "dan/echo@1.0.0" || !strings.Contains(str(log[1]["reason"]), "spam calls") {
		t.Errorf("moderation log %v", log)
	}
	accts := ta.admin().must(http.StatusOK, "GET", "/v0/admin/accounts?q=dan", nil)["accounts"].([]any)
	if len(accts) != 1 || accts[0].(map[string]any)["disabled"] == nil {
		t.Errorf("GET /v0/admin/accounts?q=dan: %v, want dan, disabled", accts)
	}
}

// Ensure that the operator can withdraw any listed version that is not
// shipped with the gateway: it is no longer resolved (the range falls back
// to the version left), listed or callable, also after a restart; shipped
// agents are refused; each yank is logged with its reason.
func TestModeration_YankVersion(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	slowMandate(ann)
	call := func(agent string) (int, map[string]any) {
		return ann.human.do("POST", "/v0/calls", map[string]any{"mandate": "ann/lab", "agent": agent, "input": map[string]any{"text": "hi"}})
	}
	if _, out := call("test-lab/echo"); str(out["receipt"].(map[string]any)["agent"]) != "test-lab/echo@1.1.0" {
		t.Fatalf("before the yank test-lab/echo resolves to %v", out["receipt"])
	}
	if status, _ := ta.admin().do("POST", "/v0/admin/agents/test-lab/echo@1.1.0/yank", map[string]any{}); status != http.StatusBadRequest {
		t.Errorf("yank without a reason: %d, want 400", status)
	}
	ta.admin().must(http.StatusOK, "POST", "/v0/admin/agents/test-lab/echo@1.1.0/yank", map[string]any{"reason": "leaks inputs"})
	check := func(when string) {
		status, out := call("test-lab/echo")
		if status != http.StatusOK || str(out["receipt"].(map[string]any)["agent"]) != "test-lab/echo@1.0.0" {
			t.Errorf("%s: test-lab/echo: %d %v, want 1.0.0", when, status, out)
		}
		if status, _ := call("test-lab/echo@1.1.0"); status != http.StatusNotFound {
			t.Errorf("%s: test-lab/echo@1.1.0: %d, want 404", when, status)
		}
		detail := ta.anonymous().must(http.StatusOK, "GET", "/v0/agents/test-lab/echo", nil)
		if vs := detail["versions"].([]any); slices.Contains(vs, any("1.1.0")) {
			t.Errorf("%s: versions %v still list 1.1.0", when, vs)
		}
	}
	check("after the yank")
	ta.restart()
	check("after a restart")
	if status, out := ta.admin().do("POST", "/v0/admin/agents/test-lab/echo@1.1.0/yank", map[string]any{"reason": "again"}); status != http.StatusConflict || errorCode(out) != "already_yanked" {
		t.Errorf("yanking twice: %d %v, want 409 already_yanked", status, out)
	}
	if status, out := ta.admin().do("POST", "/v0/admin/agents/holon-labs/csv-profile@1.0.0/yank", map[string]any{"reason": "no"}); status != http.StatusConflict || errorCode(out) != "shipped_agent" {
		t.Errorf("yanking a shipped agent: %d %v, want 409 shipped_agent", status, out)
	}
	if status, _ := ta.admin().do("POST", "/v0/admin/agents/test-lab/nothing@1.0.0/yank", map[string]any{"reason": "no"}); status != http.StatusNotFound {
		t.Errorf("yanking an unknown version: %d, want 404", status)
	}
	ta.admin().must(http.StatusOK, "POST", "/v0/admin/agents/test-lab/echo@1.0.0/yank", map[string]any{"reason": "gone"})
	if status, _ := call("test-lab/echo"); status != http.StatusNotFound {
		t.Errorf("with every version yanked: %d, want 404", status)
	}
	if listed(ta.anonymous(), "test-lab/echo") {
		t.Error("test-lab/echo is listed with every version yanked")
	}
	log := modLog(ta)
	if len(log) != 2 || log[0]["target"] != "test-lab/echo@1.1.0" || log[0]["reason"] != "leaks inputs" || log[1]["target"] != "test-lab/echo@1.0.0" {
		t.Errorf("moderation log %v", log)
	}
}

// Ensure that the operator's credit is journaled as admin-credit:<uuid>
// from external:demo-credit, shows in the balance and the log with its
// reason, and that bad credits are refused.
func TestModeration_Credit(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	out := ta.admin().must(http.StatusOK, "POST", "/v0/admin/credit", map[string]any{"account": "ann", "amount": "2.50", "reason": "conference demo"})
	entry := str(out["entry"])
	if !strings.HasPrefix(entry, "admin-credit:") || len(entry) != len("admin-credit:")+36 {
		t.Errorf("entry %q, want admin-credit:<uuid>", entry)
	}
	if b := ann.balance(); b != "7.50" {
		t.Errorf("balance %s, want 7.50", b)
	}
	err := ta.app.Engine().Store().View(func(tx holon.Tx) error {
		row, err := tx.EntryByKey(entry)
		if err == nil && (row.Lines[0].Account != "external:demo-credit" || row.Lines[1].Account != "ann") {
			t.Errorf("credit entry %+v", row.Lines)
		}
		return err
	})
	if err != nil {
		t.Errorf("journal entry %s: %v", entry, err)
	}
	ta.admin().must(http.StatusOK, "POST", "/v0/admin/credit", map[string]any{"account": "ann", "amount": "1.00"})
	for _, tc := range []struct {
		body   map[string]any
		status int
	}{
		{map[string]any{"account": "ann", "amount": "0"}, 400},
		{map[string]any{"account": "ann", "amount": "-1.00"}, 400},
		{map[string]any{"account": "ann", "amount": "1.0000001"}, 400},
		{map[string]any{"account": "ann"}, 400},
		{map[string]any{"account": "nobody", "amount": "1.00"}, 404},
		{map[string]any{"account": "external:demo-credit", "amount": "1.00"}, 404},
	} {
		if status, out := ta.admin().do("POST", "/v0/admin/credit", tc.body); status != tc.status {
			t.Errorf("credit %v: %d %v, want %d", tc.body, status, out, tc.status)
		}
	}
	log := modLog(ta)
	if len(log) != 2 || log[0]["action"] != "credit" || log[0]["amount"] != "2.50" || log[0]["reason"] != "conference demo" ||
		log[0]["entry"] != entry || log[1]["reason"] != "demo credit" {
		t.Errorf("moderation log %v", log)
	}
	if b := ann.balance(); b != "8.50" {
		t.Errorf("balance %s, want 8.50", b)
	}
}
