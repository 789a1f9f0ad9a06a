package appliance_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/publishing"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// authorServer is an author's server on loopback over https: an MCP
// endpoint (/mcp, tool "run") and a webhook (/run), both answering
// {"echo": <text>}, recording the Authorization header of every request
// and refusing (401) any request without the token it wants, when it
// wants one.
type authorServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	auth map[string][]string // path → Authorization headers
	want string
}

func newAuthorServer(t *testing.T) *authorServer {
	t.Helper()
	a := &authorServer{auth: map[string][]string{}}
	server := mcp.NewServer(&mcp.Implementation{Name: "author", Version: "v1"}, nil)
	server.AddTool(&mcp.Tool{Name: "run", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &in)
		return &mcp.CallToolResult{StructuredContent: map[string]any{"echo": in["text"]}}, nil
	})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		a.mu.Lock()
		a.auth[r.URL.Path] = append(a.auth[r.URL.Path], got)
		want := a.want
		a.mu.Unlock()
		if want != "" && got != "Bearer "+want {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error": {"code": "unauthorized", "message": "wrong token"}}`)
			return
		}
		if r.URL.Path == "/run" {
			var in map[string]any
			_ = json.NewDecoder(r.Body).Decode(&in)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"echo": in["text"]})
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	a.srv.StartTLS()
	t.Cleanup(a.srv.Close)
	return a
}

func (a *authorServer) requireToken(tok string) { a.mu.Lock(); a.want = tok; a.mu.Unlock() }

func (a *authorServer) authorizations(path string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.auth[path]...)
}

func (a *authorServer) roots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(a.srv.Certificate())
	return p
}

// withAuthorServer lets the gateway reach the author's loopback server:
// private endpoints allowed (this test only) and its certificate trusted.
func withAuthorServer(a *authorServer) func(*appliance.Config) {
	return func(c *appliance.Config) {
		c.AllowPrivateEndpoints = true
		c.RemoteRootCAs = a.roots()
	}
}

// Ensure that an endpoint credential, set before the first version, reaches
// the author's server as a bearer token on every call of every version,
// MCP and webhook alike; that it is write-only; that DELETE removes it; and
// that it never appears in a response, a log line, a receipt, a backup line
// or the raw bytes of the database file.
func TestCredential_BearerAndNeverShown(t *testing.T) {
	srv := newAuthorServer(t)
	g := newGitHubApp(t, withAuthorServer(srv))
	lena := g.author(101, "lena")
	const token = "tok-Zq8Lw3Vn6Kx1Pb4Ry7Tc2Hm5Jd9Gs0Aa"
	srv.requireToken(token)

	// Refusals first: someone else's namespace, a bad token, an agent key.
	for _, c := range []struct {
		who    client
		path   string
		body   any
		status int
		code   string
	}{
		{lena.human, "/v0/agents/bob/x/credential", map[string]any{"token": token}, 403, publishing.CodeNotYourNamespace},
		{lena.human, "/v0/agents/lena/x@1.0.0/credential", map[string]any{"token": token}, 400, holon.CodeInvalidRequest},
		{lena.human, "/v0/agents/lena/x/credential", map[string]any{"token": ""}, 400, publishing.CodeInvalidCredential},
		{lena.human, "/v0/agents/lena/x/credential", map[string]any{"token": "has space"}, 400, publishing.CodeInvalidCredential},
		{lena.human, "/v0/agents/lena/x/credential", map[string]any{"token": strings.Repeat("a", 4097)}, 400, publishing.CodeInvalidCredential},
		{lena.agent, "/v0/agents/lena/x/credential", map[string]any{"token": token}, 403, web.CodeForbidden},
	} {
		if st, out := c.who.do("PUT", c.path, c.body); st != c.status || errorCode(out) != c.code {
			t.Errorf("PUT %s: %d %v, want %d %s", c.path, st, out, c.status, c.code)
		}
	}
	// Set before the first version is published.
	for _, name := range []string{"mcp-agent", "hook-agent"} {
		out := lena.human.must(200, "PUT", "/v0/agents/lena/"+name+"/credential", map[string]any{"token": token})
		if out["credential_set"] != true {
			t.Errorf("PUT credential: %v", out)
		}
	}
	mcpRuntime := set("runtime", map[string]any{"kind": "mcp", "endpoint": srv.srv.URL + "/mcp", "tool": "run"})
	hookRuntime := set("runtime.endpoint", srv.srv.URL+"/run")
	for _, m := range []map[string]any{
		pubManifest("lena/mcp-agent", "1.0.0", proprietary, mcpRuntime),
		pubManifest("lena/mcp-agent", "1.1.0", proprietary, mcpRuntime),
		pubManifest("lena/hook-agent", "1.0.0", proprietary, hookRuntime),
	} {
		if out := lena.human.must(201, "POST", "/v0/agents", m); out["credential_set"] != true {
			t.Errorf("publish: %v, want credential_set", out)
		}
	}
	carol := g.signup("carol")
	carol.createMandate("pub", map[string]any{"budget": map[string]any{"total": "2.00"},
		"allow": map[string]any{"agents": []string{"lena/*"}}})
	for _, agent := range []string{"lena/mcp-agent@1.0.0", "lena/mcp-agent@1.1.0", "lena/hook-agent"} {
		out := carol.human.must(200, "POST", "/v0/calls", map[string]any{"mandate": "carol/pub", "agent": agent, "input": map[string]any{"text": "hi"}})
		if o, _ := out["output"].(map[string]any); o["echo"] != "hi" {
			t.Errorf("%s: output %v", agent, out["output"])
		}
	}
	for _, path := range []string{"/mcp", "/run"} {
		auths := srv.authorizations(path)
		if len(auths) == 0 {
			t.Errorf("%s: no request reached the server", path)
		}
		for _, a := range auths {
			if a != "Bearer "+token {
				t.Errorf("%s: Authorization %q, want the bearer token", path, a)
			}
		}
	}
	// Deleted: calls go without it (and this server refuses them).
	lena.human.must(200, "DELETE", "/v0/agents/lena/hook-agent/credential", nil)
	if st, _ := lena.human.do("DELETE", "/v0/agents/lena/hook-agent/credential", nil); st != 404 {
		t.Errorf("second DELETE: %d, want 404", st)
	}
	srv.requireToken("")
	carol.human.must(200, "POST", "/v0/calls", map[string]any{"mandate": "carol/pub", "agent": "lena/hook-agent", "input": map[string]any{"text": "hi"}})
	if auths := srv.authorizations("/run"); auths[len(auths)-1] != "" {
		t.Errorf("after DELETE the webhook got Authorization %q", auths[len(auths)-1])
	}
	// Across a restart the sealed token opens again; with another secret it does not.
	srv.requireToken(token)
	g.restart()
	carol.human.must(200, "POST", "/v0/calls", map[string]any{"mandate": "carol/pub", "agent": "lena/mcp-agent", "input": map[string]any{"text": "again"}})
	if st, _, b := g.admin().raw("GET", "/v0/admin/backup", nil); st != 200 || !bytes.Contains(b, []byte(`"t":"credentials"`)) {
		t.Errorf("backup: %d, no credentials line", st) // the backup goes into the transcript, checked below
	}
	g.restart(func(c *appliance.Config) { c.FileSecret = "fs-another-secret-9Qw2Ex4Rt6Yu8Io0Pa" })
	if st, out := carol.human.do("POST", "/v0/calls", map[string]any{"mandate": "carol/pub", "agent": "lena/mcp-agent", "input": map[string]any{"text": "x"}}); st == 200 {
		t.Errorf("with another HOLON_FILE_SECRET the token still went: %v", out)
	}
	if !strings.Contains(g.logs.String(), "must set it again") {
		t.Error("a token that no longer opens is not logged")
	}

	// Nowhere in clear: responses (receipts and the backup included), logs, the file.
	g.mu.Lock()
	for _, ex := range g.transcript {
		if bytes.Contains(ex.body, []byte(token)) || strings.Contains(strings.Join(headerValues(ex.header), " "), token) {
			t.Errorf("%s %s answered the token", ex.method, ex.path)
		}
	}
	g.mu.Unlock()
	if strings.Contains(g.logs.String(), token) {
		t.Error("the token is in the logs")
	}
	g.shutdown(true)
	raw, err := os.ReadFile(g.cfg.DB)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(token)) {
		t.Error("the token is in the database file in clear")
	}
	if !bytes.Contains(raw, []byte(`"sealed"`)) {
		t.Error("no sealed credential in the database file: the test checks nothing")
	}
}

func headerValues(h http.Header) []string {
	var out []string
	for k, vs := range h {
		out = append(out, k)
		out = append(out, vs...)
	}
	return out
}

// Ensure that without HOLON_FILE_SECRET a credential cannot be set (503,
// with what to do) while publishing keeps working.
func TestCredential_NeedsFileSecret(t *testing.T) {
	g := newGitHubApp(t, func(c *appliance.Config) { c.FileSecret = "" })
	lena := g.author(101, "lena")
	st, out := lena.human.do("PUT", "/v0/agents/lena/x/credential", map[string]any{"token": "abc"})
	if st != 503 || errorCode(out) != publishing.CodeCredentialsOff || !strings.Contains(str(out), "HOLON_FILE_SECRET") {
		t.Errorf("PUT without a secret: %d %v", st, out)
	}
}

// Ensure that a backup of a gateway with published versions, a yank, an
// endpoint credential and a GitHub link restores into a gateway that lists
// the same versions, still sends the token (sealed in the backup, opened
// with the same HOLON_FILE_SECRET), keeps the link, and verifies.
func TestPublish_BackupRestore(t *testing.T) {
	srv := newAuthorServer(t)
	g := newGitHubApp(t, withAuthorServer(srv))
	lena := g.author(101, "lena")
	const token = "tok-Backup4Xq9Lw2Vn7Kc1Pm"
	srv.requireToken(token)
	lena.human.must(200, "PUT", "/v0/agents/lena/hook/credential", map[string]any{"token": token})
	for _, v := range []string{"1.0.0", "1.1.0"} {
		lena.human.must(201, "POST", "/v0/agents", pubManifest("lena/hook", v, proprietary, set("runtime.endpoint", srv.srv.URL+"/run")))
	}
	lena.human.must(200, "DELETE", "/v0/agents/lena/hook@1.1.0", nil)
	st, _, b := g.admin().raw("GET", "/v0/admin/backup", nil)
	if st != 200 || bytes.Contains(b, []byte(token)) {
		t.Fatalf("backup: %d, token in clear: %v", st, bytes.Contains(b, []byte(token)))
	}
	restored := filepath.Join(t.TempDir(), "restored.db")
	if _, err := backup.Restore(bytes.NewReader(b), restored, nil); err != nil {
		t.Fatal(err)
	}
	g.restart(func(c *appliance.Config) { c.DB = restored })
	rep, err := backup.Verify(kv.Unwrap(g.app.Engine().Store()))
	if err != nil || !rep.OK() {
		var out bytes.Buffer
		rep.WriteTo(&out)
		t.Fatalf("verify after restore: %v\n%s", err, out.String())
	}
	if d := g.anonymous().must(200, "GET", "/v0/agents/lena/hook", nil); str(d["versions"]) != "[1.0.0]" {
		t.Errorf("versions after restore: %v", d["versions"])
	}
	carol := g.signup("carol")
	carol.createMandate("pub", map[string]any{"budget": map[string]any{"total": "1.00"}, "allow": map[string]any{"agents": []string{"lena/*"}}})
	carol.human.must(200, "POST", "/v0/calls", map[string]any{"mandate": "carol/pub", "agent": "lena/hook", "input": map[string]any{"text": "restored"}})
	lena.human.must(201, "POST", "/v0/agents", pubManifest("lena/hook", "1.2.0", proprietary, set("runtime.endpoint", srv.srv.URL+"/run")))
	lena.human.must(409, "POST", "/v0/agents", pubManifest("lena/hook", "1.1.0", proprietary, set("runtime.endpoint", srv.srv.URL+"/run")))
	if again := g.signInAs("lena"); again["handle"] != "lena" || again["new_account"] != false {
		t.Errorf("sign-in after restore: %v", again)
	}
}
