package appliance_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
)

// Ensure that keys are shown once: after the response that created it, no
// response (body or header) carries a key, not even to its owner; that the
// logs never hold a key, an input or an output; that no receipt holds a
// key; and that the database holds keys only as SHA-256 hashes. The
// session goes through every endpoint with every kind of key, failures
// included.
func TestSecrets_KeysNeverRepeated(t *testing.T) {
	ta := newHostedApp(t)
	ann, bob := ta.signup("ann"), ta.signup("bob")
	ann.createMandate("strict", map[string]any{"budget": map[string]any{"total": "1.00"}, "approval": map[string]any{"above": "0"},
		"allow": map[string]any{"agents": []string{"holon-labs/*"}}})
	extra, extraPrefix := ann.newAgentKey("ann/strict")
	extraKey := extra.key

	for _, c := range []client{ann.human, ann.agent, extra, bob.human, bob.agent} {
		c.do("GET", "/v0/me", nil)
		c.do("GET", "/v0/receipts", nil)
		c.do("GET", "/v0/approvals", nil)
		c.do("GET", "/v0/accounts", nil)
		c.do("GET", "/v0/mandates", nil)
		c.do("GET", "/v0/agents?q=company", nil)
	}
	ann.human.with("Idempotency-Key", "s-1").do("POST", "/v0/calls", lookup("ann/sandbox"))
	ann.human.with("Idempotency-Key", "s-1").do("POST", "/v0/calls", lookup("ann/sandbox"))
	ann.agent.do("POST", "/v0/calls", lookup(""))
	held := extra.must(http.StatusAccepted, "POST", "/v0/calls", lookup(""))
	approval := str(held["approval"].(map[string]any)["id"])
	extra.do("POST", "/v0/approvals/"+approval, map[string]any{})
	ann.human.do("POST", "/v0/approvals/"+approval, map[string]any{})
	bob.human.do("GET", "/v0/approvals/"+approval, nil)
	bob.agent.do("POST", "/v0/calls", lookup("ann/sandbox"))
	ann.human.do("DELETE", "/v0/keys/"+extraPrefix, nil)
	extra.do("GET", "/v0/me", nil) // revoked: the refusal names the prefix only
	ta.as(ann.humanKey+"x").do("GET", "/v0/me", nil)
	ann.human.do("DELETE", "/v0/keys/"+ann.agentKey, nil) // the whole key where its prefix goes
	ta.anonymous().do("GET", "/v0/nothing/"+ann.humanKey, nil)
	ta.anonymous().do("PUT", "/v0/me?key="+ann.humanKey, nil)
	ta.admin().do("GET", "/v0/admin/accounts?q=ann", nil)
	ta.admin().do("GET", "/v0/admin/log", nil)
	ta.admin().do("POST", "/v0/admin/credit", map[string]any{"account": "bob", "amount": "1.00"})
	ta.admin().do("POST", "/v0/admin/accounts/bob/disable", map[string]any{"reason": "test"})
	bob.human.do("GET", "/v0/me", nil)
	bob.agent.do("POST", "/v0/calls", lookup(""))
	ta.admin().do("GET", "/v0/accounts", nil)
	for _, c := range []client{ann.human, ann.agent} {
		c.do("GET", "/v0/receipts?limit=500", nil)
		c.do("GET", "/v0/me", nil)
	}

	keys := map[string]string{"ann human": ann.humanKey, "ann agent": ann.agentKey, "ann extra": extraKey,
		"bob human": bob.humanKey, "bob agent": bob.agentKey}
	ta.mu.Lock()
	transcript := append([]exchange(nil), ta.transcript...)
	ta.mu.Unlock()
	text := func(x exchange) string {
		var b strings.Builder
		b.Write(x.body)
		for k, vs := range x.header {
			b.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
		}
		return b.String()
	}
	for name, key := range keys {
		shown := -1
		for i, x := range transcript {
			if strings.Contains(text(x), key) {
				if shown >= 0 {
					t.Errorf("%s key shown again by %s %s (%d), after %s %s", name, x.method, x.path, x.status, transcript[shown].method, transcript[shown].path)
					break
				}
				shown = i
			}
		}
		if shown < 0 {
			t.Errorf("%s key was never shown, not even when created", name)
		} else if p := transcript[shown].path; p != "/v0/signup" && p != "/v0/keys" {
			t.Errorf("%s key first shown by %s, not by the request that created it", name, p)
		}
	}
	for _, x := range transcript {
		if strings.Contains(text(x), testAdminKey) {
			t.Errorf("the admin key is in the answer to %s %s", x.method, x.path)
		}
	}

	logs := ta.logs.String()
	if !strings.Contains(logs, `"key":"`+extraPrefix+`"`) || !strings.Contains(logs, `"path":"/v0/calls"`) {
		t.Fatalf("the logs do not have the request lines this test reads:\n%s", logs)
	}
	for name, secret := range map[string]string{"ann human": ann.humanKey, "ann agent": ann.agentKey, "ann extra": extraKey,
		"bob human": bob.humanKey, "bob agent": bob.agentKey, "admin": testAdminKey,
		"an input": "Globex", "an output": "HRB 208731", "an email": "ann@example.com"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the logs hold %s", name)
		}
	}

	page, err := ta.app.Engine().Receipts("", "", 500)
	if err != nil {
		t.Fatal(err)
	}
	receipts, _ := json.Marshal(page)
	if len(page.Receipts) < 4 {
		t.Fatalf("%d receipts, the session made more", len(page.Receipts))
	}
	for name, key := range keys {
		if bytes.Contains(receipts, []byte(key)) || bytes.Contains(receipts, []byte(key[:14])) {
			t.Errorf("a receipt holds the %s key", name)
		}
	}

	// The database file, read raw after closing: hashes, never keys.
	db := ta.cfg.DB
	ta.letGo()
	ta.shutdown(true)
	raw, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range keys {
		sum := sha256.Sum256([]byte(key))
		if !bytes.Contains(raw, []byte(hex.EncodeToString(sum[:]))) {
			t.Errorf("the %s key's hash is not in the database: the scan below would prove nothing", name)
		}
		if bytes.Contains(raw, []byte(key)) || bytes.Contains(raw, []byte(key[14:])) {
			t.Errorf("the database holds the %s key", name)
		}
	}
	if bytes.Contains(raw, []byte(testAdminKey)) {
		t.Error("the database holds the admin key")
	}
}
