package appliance_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"holon.dev/holon/journal"
)

// Ensure that both metadata documents advertise the three scopes, that a
// 401 from /mcp names the scope /mcp needs, that a client asking for no
// scope (or for none this server offers) gets agents:call, and that the
// token answer says what was granted.
func TestOAuth_ScopesAdvertised(t *testing.T) {
	ta := newHostedApp(t)
	want := []string{"agents:call", "files:upload", "receipts:read"}
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server"} {
		out := ta.anonymous().must(http.StatusOK, "GET", path, nil)
		var got []string
		for _, s := range out["scopes_supported"].([]any) {
			got = append(got, str(s))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: scopes_supported %v, want %v", path, got, want)
		}
	}
	if status, www, _ := mcpInit(t, ta.srv.URL, ""); status != http.StatusUnauthorized || !strings.Contains(www, `scope="agents:call"`) {
		t.Errorf("/mcp without a token: %d %q, want 401 naming scope agents:call", status, www)
	}
	ann := ta.signup("ann")
	for _, asked := range []string{"", "openid offline_access"} {
		f := newOAuthFlow(ta, ann)
		f.scope = asked
		status, out := f.exchange(f.authorize("ann/sandbox"), f.verifier)
		if status != http.StatusOK || out["scope"] != "agents:call" {
			t.Errorf("scope %q asked: %d %v, want agents:call granted", asked, status, out)
		}
	}
}

// Ensure that a token without the files scope gets 403
// insufficient_scope from POST /v0/files, naming the scope in the body
// and in WWW-Authenticate (and the same for the receipts), and that a
// token with it uploads a file whose handle reaches an agent through
// /mcp (a real MCP client, the same token), billed once: the receipts,
// read with receipts:read, show the one call, and the account paid its
// cost.
func TestOAuth_FilesScope(t *testing.T) {
	fa := newFilesApp(t)
	ann := fa.signup("ann")
	mandate := filesMandate(ann)
	doc := []byte("Order 12\nBolts, 100, 4.00\nNuts, 100, 2.00\n")

	// The gateway's public origin, the issuer of its tokens, is the
	// files app's front server.
	f := newOAuthFlow(fa.hostedApp, ann)
	f.issuer = fa.front.URL
	callOnly, _ := f.tokens(mandate)
	as := fa.as(callOnly).with("Content-Type", "text/plain")
	status, www, raw := as.raw("POST", "/v0/files", doc)
	if status != http.StatusForbidden || !strings.Contains(string(raw), `"insufficient_scope"`) || !strings.Contains(string(raw), "files:upload") ||
		!strings.Contains(www.Get("WWW-Authenticate"), `error="insufficient_scope"`) || !strings.Contains(www.Get("WWW-Authenticate"), `scope="files:upload"`) {
		t.Errorf("POST /v0/files with agents:call only: %d %q %s", status, www.Get("WWW-Authenticate"), raw)
	}
	status, out := fa.as(callOnly).do("GET", "/v0/receipts?mandate="+mandate, nil)
	if status != http.StatusForbidden || errorCode(out) != "insufficient_scope" || !strings.Contains(str(out), "receipts:read") {
		t.Errorf("GET /v0/receipts with agents:call only: %d %v", status, out)
	}
	if got := blobs(t, fa.cfg.DB+".files"); len(got) != 0 {
		t.Errorf("a refused upload left bytes: %v", got)
	}

	f = newOAuthFlow(fa.hostedApp, ann)
	f.issuer = fa.front.URL
	f.scope = "agents:call files:upload receipts:read"
	status, tok := f.exchange(f.authorize(mandate), f.verifier)
	if status != http.StatusOK || tok["scope"] != "agents:call files:upload receipts:read" {
		t.Fatalf("exchange with three scopes: %d %v", status, tok)
	}
	token := str(tok["access_token"])
	h := fa.as(token).mustUpload("text/plain", doc)
	if !strings.HasPrefix(h, "holon://files/") {
		t.Fatalf("upload with files:upload: handle %q", h)
	}
	before := ann.balance()
	s := connectMCP(t, fa.srv.URL+"/mcp", token, nil)
	got := s.ok("call_agent", map[string]any{"agent": "holon-labs/text-tables", "input": map[string]any{"file": h}})
	if got["status"] != "succeeded" || !strings.Contains(str(got["output"]), "Bolts") {
		t.Fatalf("call_agent with the uploaded handle: %v", got)
	}
	paid := journal.MustParseAmount(before) - journal.MustParseAmount(ann.balance())
	status, page := fa.as(token).do("GET", "/v0/receipts?mandate="+mandate, nil)
	if status != http.StatusOK {
		t.Fatalf("GET /v0/receipts with receipts:read: %d %v", status, page)
	}
	receipts, _ := page["receipts"].([]any)
	if len(receipts) != 1 {
		t.Fatalf("receipts after one call: %v", page)
	}
	rc := receipts[0].(map[string]any)
	cost := rc["cost"].(map[string]any)
	if rc["status"] != "succeeded" || paid <= 0 || journal.MustParseAmount(str(cost["total"])) != paid {
		t.Errorf("the receipt %v says %v; ann paid %s", rc["id"], cost, paid)
	}
	if status, _ := fa.as(token).do("GET", "/v0/me", nil); status != http.StatusUnauthorized {
		t.Errorf("GET /v0/me with an OAuth token: %d, want 401 (no scope reaches it)", status)
	}
}

// Ensure that the consent page lists each scope the application will get
// with what it lets it do, and says which scopes it asked for that the
// gateway does not offer (not granted); the code it gives carries the
// scopes shown, no more.
func TestOAuth_ConsentShowsScopes(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	f := newOAuthFlow(ta, ann)
	f.scope = "files:upload agents:call everything:admin"
	b := signIn(t, ta, ann.humanKey)
	resp, body := b.get("/console/connect?" + f.consentQuery().Encode())
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("consent page: %d\n%s", resp.StatusCode, body)
	}
	for _, want := range []string{
		`<li id="scope-agents:call"><code>agents:call</code>: search agents and call them through MCP`,
		`<li id="scope-files:upload"><code>files:upload</code>: upload files to your account`,
		`It also asked for <code>everything:admin</code>, which this gateway does not offer: not granted.`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the consent page lacks %q", want)
		}
	}
	if strings.Contains(body, `id="scope-receipts:read"`) {
		t.Errorf("the consent page lists receipts:read, which was not asked for")
	}
	status, out := f.exchange(f.authorize("ann/sandbox"), f.verifier)
	if status != http.StatusOK || out["scope"] != "agents:call files:upload" {
		t.Errorf("exchange: %d %v, want scope agents:call files:upload", status, out)
	}
}
