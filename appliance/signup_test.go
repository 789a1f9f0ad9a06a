package appliance_test

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
)

var (
	humanKeyRE = regexp.MustCompile(`^hlk_h_[a-z2-7]{52}$`)
	agentKeyRE = regexp.MustCompile(`^hlk_a_[a-z2-7]{52}$`)
)

// Ensure that a signup creates, at once, the account, a human key, an
// agent key bound to <handle>/sandbox with ask_in_client, the starter
// mandate (EUR, the platform's fx, shipped agents only) and the demo
// credit journaled as signup:<handle>; and that the keys work.
func TestSignup_CreatesAccount(t *testing.T) {
	ta := newHostedApp(t)
	out := ta.anonymous().must(http.StatusCreated, "POST", "/v0/signup", map[string]any{"handle": "ann", "email": " Ann@Example.com "})
	hk, ak := str(out["human_key"]), str(out["agent_key"])
	if !humanKeyRE.MatchString(hk) || !agentKeyRE.MatchString(ak) {
		t.Fatalf("keys %q and %q do not have the key format", hk, ak)
	}
	if out["handle"] != "ann" || out["email"] != "ann@example.com" || out["mandate"] != "ann/sandbox" || out["credit"] != "5.00" {
		t.Errorf("signup answer %v", out)
	}
	human, agent := ta.as(hk), ta.as(ak)

	me := human.must(http.StatusOK, "GET", "/v0/me", nil)
	if me["kind"] != "human" || me["handle"] != "ann" || me["email"] != "ann@example.com" {
		t.Errorf("GET /v0/me (human): %v", me)
	}
	if bal := me["balance"].(map[string]any); bal["balance"] != "5.00" || bal["available"] != "5.00" {
		t.Errorf("balance %v, want 5.00", bal)
	}
	keys := me["keys"].([]any)
	if len(keys) != 2 {
		t.Fatalf("%d keys listed, want 2: %v", len(keys), keys)
	}
	prefixes := map[string]map[string]any{}
	for _, k := range keys {
		k := k.(map[string]any)
		prefixes[str(k["prefix"])] = k
	}
	if k := prefixes[hk[:14]]; k == nil || k["kind"] != "human" {
		t.Errorf("human key %s… not listed by its prefix: %v", hk[:14], keys)
	}
	if k := prefixes[ak[:14]]; k == nil || k["kind"] != "agent" || k["mandate"] != "ann/sandbox" || k["ask_in_client"] != true {
		t.Errorf("agent key %s… not listed as bound to ann/sandbox with ask_in_client: %v", ak[:14], keys)
	}

	sandbox := human.must(http.StatusOK, "GET", "/v0/mandates/ann/sandbox", nil)
	m := sandbox["mandate"].(map[string]any)
	if m["issuer"] != "ann" || m["grantee"] != "ann/assistant" || m["currency"] != "EUR" || sandbox["remaining"] != "5.00" {
		t.Errorf("starter mandate %v", sandbox)
	}
	if fx, _ := m["fx"].(map[string]any); fx["USD"] != "0.92" {
		t.Errorf("starter mandate fx %v, want the platform's USD 0.92", m["fx"])
	}
	if allow := m["allow"].(map[string]any); str(allow["agents"]) != "[holon-labs/*]" {
		t.Errorf("starter mandate allows %v, want the shipped agents (holon-labs/*)", allow["agents"])
	}

	ame := agent.must(http.StatusOK, "GET", "/v0/me", nil)
	if ame["kind"] != "agent" || ame["handle"] != "ann" {
		t.Errorf("GET /v0/me (agent): %v", ame)
	}
	if k := ame["key"].(map[string]any); k["mandate"] != "ann/sandbox" || k["ask_in_client"] != true {
		t.Errorf("agent key %v", k)
	}
	if ame["keys"] != nil || ame["email"] != nil {
		t.Errorf("an agent key sees its account's keys or email: %v", ame)
	}

	// The agent key calls under its mandate without naming it.
	res := agent.must(http.StatusOK, "POST", "/v0/calls", lookup(""))
	if r := res["receipt"].(map[string]any); r["mandate"] != "ann/sandbox" || r["caller"] != "ann/assistant" || r["payer"] != "ann" {
		t.Errorf("receipt %v", r)
	}

	err := ta.app.Engine().Store().View(func(tx holon.Tx) error {
		row, err := tx.EntryByKey("signup:ann")
		if err != nil {
			return err
		}
		if len(row.Lines) != 2 || row.Lines[0].Account != "external:demo-credit" || row.Lines[1].Amount.String() != "5.00" {
			t.Errorf("signup entry %+v", row.Lines)
		}
		return nil
	})
	if err != nil {
		t.Errorf("signup:ann: %v", err)
	}
}

// Ensure that handles follow GitHub's login rules in lowercase, and that
// the platform's names, reserved words and every agent author's namespace
// in the registry (shipped or not) are refused.
func TestSignup_HandleRules(t *testing.T) {
	ta := newHostedApp(t)
	for _, tc := range []struct {
		handle string
		status int
		code   string
	}{
		{"", 400, "invalid_handle"},
		{"a", 400, "invalid_handle"},
		{"Ann", 400, "invalid_handle"},
		{"-ann", 400, "invalid_handle"},
		{"ann-", 400, "invalid_handle"},
		{"an--n", 400, "invalid_handle"},
		{"an_n", 400, "invalid_handle"},
		{"an.n", 400, "invalid_handle"},
		{strings.Repeat("a", 40), 400, "invalid_handle"},
		{"holon", 409, "handle_taken"},
		{"external", 409, "handle_taken"},
		{"admin", 409, "handle_taken"},
		{"support", 409, "handle_taken"},
		{"holon-labs", 409, "handle_taken"},
		{"holon-anything", 409, "handle_taken"},
		{"test-lab", 409, "handle_taken"},
		{"ab", 201, ""},
		{strings.Repeat("b", 39), 201, ""},
		{"a-b-9", 201, ""},
	} {
		status, out := ta.anonymous().do("POST", "/v0/signup", map[string]any{"handle": tc.handle, "email": "x" + tc.handle + "@example.org"})
		if status != tc.status || (tc.code != "" && errorCode(out) != tc.code) {
			t.Errorf("handle %q: %d %v, want %d %s", tc.handle, status, out, tc.status, tc.code)
		}
	}
	_, out := ta.anonymous().do("POST", "/v0/signup", map[string]any{"handle": "Ann", "email": "ann@example.org"})
	if msg := str(out["error"].(map[string]any)["message"]); !strings.Contains(msg, `"ann"`) {
		t.Errorf("an uppercase handle's message does not say what to use: %q", msg)
	}
}

// Ensure that one email has one account (compared in lowercase), that a
// handle is taken once, that malformed emails are refused, and that a
// refused signup leaves nothing behind: not the handle, not the credit.
func TestSignup_OneAccountPerEmail(t *testing.T) {
	ta := newHostedApp(t)
	ta.signup("ann")
	for _, tc := range []struct {
		handle, email string
		status        int
		code          string
	}{
		{"ann", "other@example.com", 409, "handle_taken"},
		{"ann2", "ANN@example.com", 409, "email_taken"},
		{"ann3", "not-an-email", 400, "invalid_email"},
		{"ann3", "Ann <ann@example.com>", 400, "invalid_email"},
		{"ann3", "ann@localhost", 400, "invalid_email"},
		{"ann3", "", 400, "invalid_email"},
	} {
		status, out := ta.anonymous().do("POST", "/v0/signup", map[string]any{"handle": tc.handle, "email": tc.email})
		if status != tc.status || errorCode(out) != tc.code {
			t.Errorf("signup %s %q: %d %v, want %d %s", tc.handle, tc.email, status, out, tc.status, tc.code)
		}
	}
	err := ta.app.Engine().Store().View(func(tx holon.Tx) error {
		if tx.HasEntry("signup:ann2") {
			t.Error("a refused signup journaled its credit")
		}
		if _, err := tx.Mandate("ann2/sandbox"); err == nil {
			t.Error("a refused signup stored its mandate")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ta.anonymous().must(http.StatusCreated, "POST", "/v0/signup", map[string]any{"handle": "ann2", "email": "ann2@example.com"})
}

// Ensure that a handle that already holds money or mandates (an operator's
// mandates directory names accounts that never signed up) is not handed
// to whoever signs up first, and that a hosted gateway does not load the
// demo mandates unless told to.
func TestSignup_ExistingAccountIsTaken(t *testing.T) {
	ta := newHostedApp(t)
	if _, err := ta.app.Engine().Mandate("alice/bookkeeping-q4"); err == nil {
		t.Error("a hosted gateway loaded the demo mandates")
	}
	ta.restart(func(c *appliance.Config) { c.MandatesDir = "demo" })
	status, out := ta.anonymous().do("POST", "/v0/signup", map[string]any{"handle": "alice", "email": "alice@example.com"})
	if status != http.StatusConflict || errorCode(out) != "handle_taken" {
		t.Errorf("signup as alice, who holds demo credit: %d %v, want 409 handle_taken", status, out)
	}
}

// Ensure that request bodies are strict: unknown fields, NUL characters
// (raw, escaped, or in the query) and oversized bodies are refused with
// their own codes and statuses.
func TestHosted_RequestRules(t *testing.T) {
	ta := newHostedApp(t)
	c := ta.anonymous()
	for _, tc := range []struct {
		name   string
		path   string
		body   []byte
		status int
		code   string
	}{
		{"unknown field", "/v0/signup", []byte(`{"handle":"ann","email":"ann@example.com","admin":true}`), 400, "invalid_request"},
		{"escaped NUL", "/v0/signup", []byte(`{"handle":"ann","email":"ann\u0000@example.com"}`), 400, "nul_character"},
		{"raw NUL", "/v0/signup", []byte("{\"handle\":\"ann\x00\",\"email\":\"ann@example.com\"}"), 400, "nul_character"},
		{"NUL in query", "/v0/agents?q=a%00b", nil, 400, "nul_character"},
		{"too large", "/v0/signup", append([]byte(`{"handle":"`), bytes.Repeat([]byte("a"), 5<<20)...), 413, "body_too_large"},
		{"not JSON", "/v0/signup", []byte(`handle=ann`), 400, "invalid_request"},
	} {
		method := "POST"
		if tc.body == nil {
			method = "GET"
		}
		status, _, b := c.raw(method, tc.path, tc.body)
		if status != tc.status || !bytes.Contains(b, []byte(`"code":"`+tc.code+`"`)) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, b, tc.status, tc.code)
		}
	}
	if status, _, _ := c.raw("GET", "/healthz", nil); status != http.StatusOK {
		t.Errorf("GET /healthz: %d", status)
	}
}

// Ensure that a malformed, unknown or non-Bearer key is refused with 401
// invalid_key (and WWW-Authenticate), even on public endpoints, and that no
// key at all gets 401 unauthenticated on a keyed endpoint.
func TestHosted_InvalidKeys(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	unknown := "hlk_h_" + strings.Repeat("a", 52)
	for _, tc := range []struct {
		name, auth, path string
		code             string
	}{
		{"no key", "", "/v0/me", "unauthenticated"},
		{"malformed", "Bearer hlk_h_short", "/v0/me", "invalid_key"},
		{"unknown", "Bearer " + unknown, "/v0/me", "invalid_key"},
		{"unknown, public endpoint", "Bearer " + unknown, "/v0/agents", "invalid_key"},
		{"wrong kind marker", "Bearer hlk_a_" + ann.humanKey[6:], "/v0/me", "invalid_key"},
		{"basic", "Basic " + ann.humanKey, "/v0/me", "invalid_key"},
		{"admin key with a typo", "Bearer " + testAdminKey + "x", "/v0/admin/log", "invalid_key"},
	} {
		c := ta.anonymous()
		if tc.auth != "" {
			c = c.with("Authorization", tc.auth)
		}
		status, h, b := c.raw("GET", tc.path, nil)
		if status != http.StatusUnauthorized || !bytes.Contains(b, []byte(`"code":"`+tc.code+`"`)) || h.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %d %s (WWW-Authenticate %q), want 401 %s", tc.name, status, b, h.Get("WWW-Authenticate"), tc.code)
		}
	}
}

// Ensure that POST /v0/mandates puts the mandate in the caller's
// namespace with the caller as issuer, EUR and the platform's fx, and
// refuses each field a caller may not set, naming it.
func TestMandates_Create(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	base := func(extra map[string]any) map[string]any {
		b := map[string]any{"id": "books", "grantee": "ann/bot", "budget": map[string]any{"total": "3.00"},
			"allow": map[string]any{"agents": []string{"holon-labs/*"}}}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"fx", base(map[string]any{"fx": map[string]any{"USD": "0.01"}}), "fx"},
		{"currency", base(map[string]any{"currency": "USD"}), "currency"},
		{"issuer", base(map[string]any{"issuer": "bob"}), "issuer"},
		{"namespace", base(map[string]any{"id": "bob/books"}), "id"},
		{"dot", base(map[string]any{"id": "books.r1"}), "id"},
		{"grantee", base(map[string]any{"grantee": "bob/bot"}), "grantee"},
		{"revoked", base(map[string]any{"revoked": true}), "revoked"},
		{"unknown field", base(map[string]any{"budgets": 1}), "budgets"},
		{"bad pattern", base(map[string]any{"allow": map[string]any{"agents": []string{"NOT A PATTERN"}}}), "allow.agents[0]"},
	} {
		status, out := ann.human.do("POST", "/v0/mandates", tc.body)
		fields, _ := out["error"].(map[string]any)["fields"].([]any)
		named := false
		for _, f := range fields {
			if f.(map[string]any)["path"] == tc.field {
				named = true
			}
		}
		if status != http.StatusBadRequest || errorCode(out) != "invalid_mandate" || !named {
			t.Errorf("%s: %d %v, want 400 invalid_mandate naming %s", tc.name, status, out, tc.field)
		}
	}
	out := ann.human.must(http.StatusCreated, "POST", "/v0/mandates", base(nil))
	m := out["mandate"].(map[string]any)
	if m["id"] != "ann/books" || m["issuer"] != "ann" || m["currency"] != "EUR" || str(m["fx"]) != "map[USD:0.92]" || out["remaining"] != "3.00" {
		t.Errorf("created mandate %v", out)
	}
	status, dup := ann.human.do("POST", "/v0/mandates", base(map[string]any{"id": "ann/books"}))
	if status != http.StatusConflict || errorCode(dup) != "mandate_exists" {
		t.Errorf("same id again: %d %v, want 409 mandate_exists", status, dup)
	}
	list := ann.human.must(http.StatusOK, "GET", "/v0/mandates", nil)["mandates"].([]any)
	if len(list) != 2 {
		t.Errorf("GET /v0/mandates lists %d, want 2 (sandbox, books)", len(list))
	}
	// The balance did not get a second signup credit.
	if b := ann.balance(); b != "5.00" {
		t.Errorf("balance %s after creating a mandate, want 5.00", b)
	}
}

// Ensure that an agent key made with POST /v0/keys acts under its mandate
// only, that revoking it stops it at once, and that keys are managed in
// the caller's account only.
func TestKeys_CreateAndRevoke(t *testing.T) {
	ta := newHostedApp(t)
	ann, bob := ta.signup("ann"), ta.signup("bob")
	ann.createMandate("books", map[string]any{"budget": map[string]any{"total": "1.00"}, "allow": map[string]any{"agents": []string{"holon-labs/*"}}})
	status, out := ann.human.do("POST", "/v0/keys", map[string]any{"mandate": "bob/sandbox"})
	if status != http.StatusNotFound {
		t.Errorf("a key on another account's mandate: %d %v, want 404", status, out)
	}
	out = ann.human.must(http.StatusCreated, "POST", "/v0/keys", map[string]any{"mandate": "ann/books"})
	if out["ask_in_client"] != false || out["kind"] != "agent" || !agentKeyRE.MatchString(str(out["key"])) {
		t.Errorf("new key %v: want an agent key, not ask_in_client", out)
	}
	key, prefix := ta.as(str(out["key"])), str(out["prefix"])
	res := key.must(http.StatusOK, "POST", "/v0/calls", lookup(""))
	if r := res["receipt"].(map[string]any); r["mandate"] != "ann/books" {
		t.Errorf("the new key called under %v, want ann/books", r["mandate"])
	}
	if status, out := key.do("POST", "/v0/calls", lookup("ann/sandbox")); status != http.StatusNotFound {
		t.Errorf("the key named another mandate of its account: %d %v, want 404", status, out)
	}
	if status, _ := bob.human.do("DELETE", "/v0/keys/"+prefix, nil); status != http.StatusNotFound {
		t.Errorf("bob revoking ann's key: %d, want 404", status)
	}
	ann.human.must(http.StatusOK, "DELETE", "/v0/keys/"+prefix, nil)
	if status, out := key.do("GET", "/v0/me", nil); status != http.StatusUnauthorized || errorCode(out) != "invalid_key" {
		t.Errorf("revoked key: %d %v, want 401 invalid_key", status, out)
	}
	if status, out := ann.human.do("DELETE", "/v0/keys/"+prefix, nil); status != http.StatusConflict || errorCode(out) != "key_revoked" {
		t.Errorf("revoking twice: %d %v, want 409 key_revoked", status, out)
	}
	if status, _ := ann.human.do("DELETE", "/v0/keys/nonsense", nil); status != http.StatusBadRequest {
		t.Errorf("a malformed prefix: %d, want 400", status)
	}
}

// Ensure that only the issuer's human key decides an approval: the agent
// key of the same mandate sees it and is refused (403), and the human key
// approves and runs it.
func TestApprovals_OnlyTheIssuerDecides(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	ann.createMandate("strict", map[string]any{"budget": map[string]any{"total": "1.00"}, "approval": map[string]any{"above": "0"},
		"allow": map[string]any{"agents": []string{"holon-labs/*"}}})
	agent, _ := ann.newAgentKey("ann/strict")
	held := agent.must(http.StatusAccepted, "POST", "/v0/calls", lookup(""))
	id := str(held["approval"].(map[string]any)["id"])
	agent.must(http.StatusOK, "GET", "/v0/approvals/"+id, nil)
	if status, out := agent.do("POST", "/v0/approvals/"+id, map[string]any{}); status != http.StatusForbidden || errorCode(out) != "forbidden" {
		t.Errorf("agent deciding: %d %v, want 403 forbidden", status, out)
	}
	if status, out := ta.admin().do("POST", "/v0/approvals/"+id, map[string]any{}); status != http.StatusForbidden {
		t.Errorf("admin deciding: %d %v, want 403", status, out)
	}
	ran := ann.human.must(http.StatusOK, "POST", "/v0/approvals/"+id, map[string]any{})
	if ran["output"] == nil {
		t.Errorf("approve and run: no output: %v", ran)
	}
}

// Ensure that the dev gateway keeps its API without keys, and has none of
// the hosted endpoints.
func TestDev_NoHostedEndpoints(t *testing.T) {
	ta := newTestApp(t, "", nil)
	if status, _ := ta.do("POST", "/v0/signup", map[string]any{"handle": "ann", "email": "ann@example.com"}); status != http.StatusNotFound {
		t.Errorf("POST /v0/signup on a dev gateway: %d, want 404", status)
	}
	if status, _ := ta.do("GET", "/v0/mandates/alice/sandbox", nil); status != http.StatusOK {
		t.Errorf("GET a mandate on a dev gateway: %d, want 200", status)
	}
}
