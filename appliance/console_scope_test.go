package appliance_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"holon.dev/holon/appliance"
)

// evilRegistry holds an agent whose author wrote markup into its texts.
var evilRegistry = map[string]string{"evil.yaml": `
id: evil-lab/echo
version: 1.0.0
summary: <script>alert("summary")</script><img src=x onerror=alert(1)>
description: "</p><script>alert('description')</script>"
license: Apache-2.0
source: { repository: "https://github.com/evil-lab/agents", commit: "0000000000000000000000000000000000000000" }
capabilities: [test.evil]
interface:
  input: { type: object, required: [text], additionalProperties: false, properties: { text: { type: string } } }
  output: { type: object, required: [text], properties: { text: { type: string } } }
pricing: { model: per_run, amount: "0.02", currency: EUR }
runtime: { kind: dev, tool: echo }
data: { retention: none, regions: [eu], training: false }
`}

// signIn opens a console session for a key, as a browser would.
func signIn(t *testing.T, ta *hostedApp, key string) *browser {
	t.Helper()
	b := newBrowser(t, ta.srv.URL)
	b.get("/console/signin")
	resp, body := b.post("/console/signin", url.Values{"key": {key}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d\n%s", resp.StatusCode, body)
	}
	return b
}

// Ensure that a console session sees exactly what its key sees through the
// API: another account's mandate, approval, receipt and key answer 404 on
// both, and a page cannot decide or revoke what the API would refuse.
func TestConsole_SameScopeAsAPI(t *testing.T) {
	ta := newHostedApp(t)
	ann, bob := ta.signup("ann"), ta.signup("bob")
	bob.createMandate("lab", map[string]any{
		"budget":   map[string]any{"total": "1.00"},
		"approval": map[string]any{"above": "0.01"},
		"allow":    map[string]any{"agents": []string{"test-lab/*"}},
	})
	bobKey, bobPrefix := bob.newAgentKey("bob/lab")
	out := bobKey.must(http.StatusAccepted, "POST", "/v0/calls", map[string]any{"agent": "test-lab/echo", "input": map[string]any{"text": "bob's secret"}})
	approvalID := out["approval"].(map[string]any)["id"].(string)
	receiptID := out["receipt"].(map[string]any)["id"].(string)

	b := signIn(t, ta, ann.humanKey)
	for _, c := range []struct{ page, api string }{
		{"/console/mandates/bob/lab", "/v0/mandates/bob/lab"},
		{"/console/approvals/" + approvalID, "/v0/approvals/" + approvalID},
		{"/console/approvals/" + approvalID + "?show=input", "/v0/approvals/" + approvalID},
		{"/console/receipts/" + receiptID, "/v0/receipts/" + receiptID},
		{"/console/receipts?mandate=bob/lab", "/v0/receipts?mandate=bob/lab"},
	} {
		status, _ := ann.human.do("GET", c.api, nil)
		resp, body := b.get(c.page)
		if status != http.StatusNotFound || resp.StatusCode != status {
			t.Errorf("%s: API %d, console %d; want 404 on both", c.page, status, resp.StatusCode)
		}
		if strings.Contains(body, "bob&#39;s secret") || strings.Contains(body, "bob's secret") {
			t.Errorf("%s shows bob's input to ann", c.page)
		}
	}
	if resp, _ := b.post("/console/approvals/"+approvalID, url.Values{"decision": {"run"}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("ann approving bob's call: %d, want 404", resp.StatusCode)
	}
	if resp, _ := b.post("/console/keys/"+bobPrefix+"/revoke", url.Values{}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("ann revoking bob's key: %d, want 404", resp.StatusCode)
	}
	if status, ap := bob.human.do("GET", "/v0/approvals/"+approvalID, nil); status != http.StatusOK || ap["status"] != "pending" {
		t.Errorf("bob's approval after ann's attempts: %d %v", status, ap["status"])
	}
	bobKey.must(http.StatusOK, "GET", "/v0/me", nil)
	// The operator's page is the admin key's only.
	if resp, _ := b.get("/console/operator"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("ann on the operator's page: %d, want 403", resp.StatusCode)
	}
	// Bob rejects his own call in his console: the input is gone after.
	bb := signIn(t, ta, bob.humanKey)
	if resp, body := bb.get("/console/approvals/" + approvalID + "?show=input"); resp.StatusCode != http.StatusOK || !strings.Contains(body, "bob&#39;s secret") {
		t.Fatalf("bob's own approval with its input: %d", resp.StatusCode)
	}
	if resp, body := bb.post("/console/approvals/"+approvalID, url.Values{"decision": {"reject"}}); resp.StatusCode != http.StatusOK || !strings.Contains(body, "Rejected") {
		t.Errorf("bob rejecting: %d\n%s", resp.StatusCode, body)
	}
	if _, ap := bob.human.do("GET", "/v0/approvals/"+approvalID, nil); ap["status"] != "rejected" || ap["input"] != nil {
		t.Errorf("after rejecting: %v", ap)
	}
}

// Ensure that text written by agent authors, agents' outputs and error
// messages reach the page escaped, never as markup.
func TestConsole_EscapesUntrustedText(t *testing.T) {
	ta := newHostedApp(t, func(c *appliance.Config) { c.Registry = append(c.Registry, writeRegistry(t, evilRegistry)) })
	ann := ta.signup("ann")
	ann.createMandate("lab", map[string]any{
		"budget": map[string]any{"total": "1.00"},
		"allow":  map[string]any{"agents": []string{"evil-lab/*"}},
	})
	b := signIn(t, ta, ann.humanKey)
	raw := []string{`<script>alert(`, `<img src=x`}
	for _, page := range []string{"/console/agents", "/console/agents?q=%3Cscript%3E", "/console/agents/evil-lab/echo"} {
		resp, body := b.get(page)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "&lt;script&gt;alert(") {
			t.Errorf("%s: %d, the summary is not shown escaped", page, resp.StatusCode)
		}
		for _, r := range raw {
			if strings.Contains(body, r) {
				t.Errorf("%s contains %q unescaped", page, r)
			}
		}
	}
	// An output with markup, through "try it".
	resp, body := b.post("/console/agents/evil-lab/echo/try", url.Values{"mandate": {"ann/lab"}, "input": {`{"text": "</pre><script>alert('output')</script>"}`}})
	if resp.StatusCode != http.StatusOK || strings.Contains(body, "<script>alert('output')") || !strings.Contains(body, "&lt;/pre&gt;&lt;script&gt;") {
		t.Errorf("try it with markup in the output: %d\n%s", resp.StatusCode, body)
	}
	// An error message that repeats what was typed.
	resp, body = b.post("/console/mandates", url.Values{"name": {"x"}, "total": {"<b>bold</b>"}})
	if resp.StatusCode != http.StatusBadRequest || strings.Contains(body, "<b>bold</b>") || !strings.Contains(body, "&lt;b&gt;bold&lt;/b&gt;") {
		t.Errorf("an error echoing markup: %d\n%s", resp.StatusCode, body)
	}
	// A path with markup in it.
	if _, body := b.get("/console/nowhere%3Cscript%3E"); strings.Contains(body, "nowhere<script>") {
		t.Error("the not-found page echoes the path unescaped")
	}
}
