package appliance_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"holon.dev/holon/appliance"
)

// Ensure that the reference TypeScript SDK's auth() connects through a
// client metadata document instead of registering: its client_id is the
// document's https URL (served on loopback with a test CA), the consent
// page, completed in headless chromium, names the client from the
// document, the browser comes back to the client's port although the
// document lists its loopback redirect URI without one (as Claude Code's
// does), and the tokens list the tools, make an approved, billed call and
// refresh. Nothing was registered.
func TestOAuth_TypeScriptClientMetadataDocument(t *testing.T) {
	node := needNodeClient(t)
	chromium, axe := needBrowser(t)
	docs := newClientDocs(t)
	docURL := docs.put("/holon-test-client.json", map[string]any{
		"client_name": "Holon Doc Client", "redirect_uris": []string{"http://127.0.0.1/callback"},
	})
	ta := newHostedApp(t, func(c *appliance.Config) {
		c.AllowPrivateEndpoints = true // the document's server is on loopback
		c.RemoteRootCAs = docs.roots()
	})
	ann := ta.signup("ann")
	browser := newHeadless(t, chromium)
	tb := newTab(t, browser, ta.srv.URL, axe, "connect-document")

	next, stdin := startOAuthNodeClient(t, node, "HOLON_MCP_URL="+ta.srv.URL+"/mcp", "HOLON_CLIENT_METADATA_URL="+docURL)
	authz := next("authorize")
	u, err := url.Parse(authz.URL)
	if err != nil || u.Query().Get("client_id") != docURL || !strings.HasPrefix(u.Query().Get("redirect_uri"), "http://127.0.0.1:") {
		t.Fatalf("authorization URL %s: want client_id %s and the client's own loopback port", authz.URL, docURL)
	}
	tb.step("open the authorization URL", chromedp.Navigate(authz.URL))
	if p := tb.path(); !strings.HasPrefix(p, "/console/signin?next=") {
		t.Fatalf("not signed in: at %s, want the sign-in page", p)
	}
	tb.fill("#key", ann.humanKey)
	if status := tb.click("#signin-key button[type=submit]"); status != 200 {
		t.Fatalf("sign in: status %d", status)
	}
	if name := tb.text("#client-name"); name != "Holon Doc Client" {
		t.Errorf("consent page names %q, want the document's client_name", name)
	}
	tb.fill("#name", "doc-app", "#total", "2.00", "#per_call", "0.50", "#approval_above", "0.01", "#allow_agents", "test-lab/*")
	if status := tb.click("#allow"); status != 200 {
		t.Fatalf("allow: status %d", status)
	}
	if got := tb.text("#done"); !strings.Contains(got, "connected") {
		t.Fatalf("the browser did not come back to the client: %q at %s", got, tb.path())
	}

	seen := next("connected")
	if seen.ClientID != docURL {
		t.Errorf("the SDK's client_id %q, want the document's URL", seen.ClientID)
	}
	if len(seen.Tools) != 7 || seen.Echo.IsError || seen.Echo.Structured["status"] != "succeeded" ||
		obj(seen.Echo.Structured["receipt"])["mandate"] != "ann/doc-app" {
		t.Errorf("tools %v, echo %v", seen.Tools, seen.Echo)
	}
	if len(seen.Forms) != 1 || !strings.Contains(seen.Forms[0], "test-lab/echo") {
		t.Errorf("approval forms in the client: %q", seen.Forms)
	}
	if seen.Refresh != "AUTHORIZED" || seen.SecondAccess == seen.FirstAccess {
		t.Errorf("refresh %q: tokens did not rotate", seen.Refresh)
	}
	if seen.Budget["mandate"] != "ann/doc-app" || seen.Budget["spent"] != "0.02" {
		t.Errorf("budget: %v", seen.Budget)
	}

	// The connection's key is listed under the document's name; revoked,
	// the client's next request is refused.
	var prefix string
	for _, k := range ann.human.must(http.StatusOK, "GET", "/v0/me", nil)["keys"].([]any) {
		if obj(k)["client"] == "Holon Doc Client" {
			prefix = str(obj(k)["prefix"])
		}
	}
	if prefix == "" {
		t.Fatal("no key connected by Holon Doc Client in GET /v0/me")
	}
	ann.human.must(http.StatusOK, "DELETE", "/v0/keys/"+prefix, nil)
	if _, err := stdin.Write([]byte("revoked\n")); err != nil {
		t.Fatal(err)
	}
	if done := next("done"); done.Status != http.StatusUnauthorized {
		t.Errorf("after revocation: %d %s", done.Status, done.Body)
	}
	if b := ann.balance(); b != "4.98" {
		t.Errorf("balance %s, want 4.98", b)
	}
}
