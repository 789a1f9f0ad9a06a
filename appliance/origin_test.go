package appliance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/front"
	"holon.dev/holon/appliance/signin"
	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// hostRequest sends a request to base with another Host header (and an
// Origin when origin is set) and returns the status and the error code.
func hostRequest(t *testing.T, method, base, path, host, origin, key string, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, errorCode(out)
}

// devAppAt is a dev gateway (no authentication) with a public URL.
func devAppAt(t *testing.T, publicURL string) *httptest.Server {
	t.Helper()
	app, err := appliance.Open(context.Background(), appliance.Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler,
		DB: filepath.Join(t.TempDir(), "holon.db"), Registry: []string{"agents", "examples"}, PublicURL: publicURL, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(func() {
		srv.Close()
		app.Close()
	})
	return srv
}

const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// Ensure that a gateway without authentication answers, on every route,
// only the loopback names and its public URL's host: a page whose name
// re-resolves to 127.0.0.1 (DNS rebinding) reads no balance, no console
// page and no metric, and cannot drive /mcp; one rule answers for all.
func TestDevGateway_AnswersOnlyItsNames(t *testing.T) {
	srv := devAppAt(t, "https://gw.example.com")
	port := srv.URL[strings.LastIndexByte(srv.URL, ':'):]
	routes := []struct{ method, path, body string }{
		{"GET", "/v0/accounts", ""}, {"GET", "/console/", ""}, {"GET", "/console/approvals", ""},
		{"POST", "/v0/calls", `{}`}, {"GET", "/v0/agents", ""}, {"GET", "/healthz", ""},
		{"GET", "/metrics", ""}, {"POST", "/mcp?mandate=alice/bookkeeping-q4", mcpInitialize},
	}
	for _, rt := range routes {
		for _, host := range []string{"rebind.evil.example", "rebind.evil.example" + port, "localhost.evil.example", "127.0.0.1.nip.example", "gw.example.com.evil.example"} {
			status, code := hostRequest(t, rt.method, srv.URL, rt.path, host, "", "", rt.body)
			if status != http.StatusMisdirectedRequest || code != front.CodeHostNotAllowed {
				t.Errorf("%s %s with Host %s: %d %q, want 421 %s", rt.method, rt.path, host, status, code, front.CodeHostNotAllowed)
			}
		}
		for _, host := range []string{"", "localhost" + port, "LOCALHOST" + port, "127.0.0.1" + port, "[::1]" + port, "127.0.0.2" + port, "gw.example.com", "GW.example.com:443"} {
			if status, code := hostRequest(t, rt.method, srv.URL, rt.path, host, "", "", rt.body); status == http.StatusMisdirectedRequest || code == front.CodeHostNotAllowed {
				t.Errorf("%s %s with Host %q: %d %s, want it served", rt.method, rt.path, host, status, code)
			}
		}
	}
	// The refusal says what to do.
	req, _ := http.NewRequest("GET", srv.URL+"/v0/accounts", nil)
	req.Host = "rebind.evil.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !containsAll(string(b), "localhost", "gw.example.com", "HOLON_PUBLIC_URL", `\"rebind.evil.example\"`) {
		t.Errorf("refusal: %s", b)
	}
}

// Ensure that /mcp answers 403 to a request whose Origin is present and
// not the gateway's own, in both modes (MCP 2025-11-25, transports: "If
// the Origin header is present and invalid, servers MUST respond with
// HTTP 403"), before anything else; that no Origin (a client that is not
// a browser) and the gateway's own origin pass; and that loopback origins
// pass in dev mode only.
func TestMCP_Origin(t *testing.T) {
	evil := []string{"http://evil.example.com", "null", "https://127.0.0.1.evil.example", "file://", "not a url"}
	t.Run("dev", func(t *testing.T) {
		srv := devAppAt(t, "")
		const path = "/mcp?mandate=alice/bookkeeping-q4"
		for _, o := range evil {
			if status, code := hostRequest(t, "POST", srv.URL, path, "", o, "", mcpInitialize); status != http.StatusForbidden || code != front.CodeOriginNotAllowed {
				t.Errorf("Origin %q: %d %q, want 403 %s", o, status, code, front.CodeOriginNotAllowed)
			}
		}
		for _, o := range []string{"", srv.URL, "http://localhost:6274", "http://127.0.0.1:8080", "http://[::1]:3000"} {
			if status, code := hostRequest(t, "POST", srv.URL, path, "", o, "", mcpInitialize); status != http.StatusOK {
				t.Errorf("Origin %q: %d %q, want 200", o, status, code)
			}
		}
	})
	t.Run("hosted", func(t *testing.T) {
		ta := newHostedApp(t)
		key := ta.signup("ann").agentKey
		for _, o := range append(evil, "http://localhost:6274", strings.Replace(ta.srv.URL, "http://", "https://", 1)) {
			// Refused before the key is looked at: with it and without.
			for _, k := range []string{key, ""} {
				if status, code := hostRequest(t, "POST", ta.srv.URL, "/mcp", "", o, k, mcpInitialize); status != http.StatusForbidden || code != front.CodeOriginNotAllowed {
					t.Errorf("Origin %q (key %t): %d %q, want 403 %s", o, k != "", status, code, front.CodeOriginNotAllowed)
				}
			}
		}
		for _, o := range []string{"", ta.srv.URL, strings.ToUpper(ta.srv.URL)} {
			if status, code := hostRequest(t, "POST", ta.srv.URL, "/mcp", "", o, key, mcpInitialize); status != http.StatusOK {
				t.Errorf("Origin %q: %d %q, want 200", o, status, code)
			}
		}
		// Behind its public URL, the gateway's origin is that URL's.
		ta.restart(func(c *appliance.Config) { c.PublicURL = "https://gw.example.com" })
		for o, want := range map[string]int{"https://gw.example.com": http.StatusOK, "https://gw.example.com:443": http.StatusOK,
			"http://gw.example.com": http.StatusForbidden, ta.srv.URL: http.StatusForbidden} {
			if status, code := hostRequest(t, "POST", ta.srv.URL, "/mcp", "", o, key, mcpInitialize); status != want {
				t.Errorf("public URL, Origin %q: %d %q, want %d", o, status, code, want)
			}
		}
	})
}

// Ensure that one rule answers "is this https, what is our origin" for
// the console's cookies and CSRF check, sign-in's redirect to GitHub and
// the OAuth issuer, and that it reads X-Forwarded-Proto only behind a
// trusted proxy (HOLON_TRUST_PROXY=1): a client that sends the header to
// a gateway exposed directly changes none of them.
func TestOrigin_ForwardedProtoOnlyBehindATrustedProxy(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		t.Run(fmt.Sprintf("trusted=%v", trusted), func(t *testing.T) {
			g := newGitHubApp(t, trustProxy(trusted))
			own := g.srv.URL
			if trusted {
				own = strings.Replace(own, "http://", "https://", 1)
			}
			b := newBrowser(t, g.srv.URL)
			forwarded := func(req *http.Request) *http.Request {
				req.Header.Set("X-Forwarded-Proto", "https")
				return req
			}
			secure := func(resp *http.Response, name string) (found, secure bool) {
				for _, c := range resp.Cookies() {
					if c.Name == name {
						return true, c.Secure
					}
				}
				return false, false
			}
			// The console's CSRF cookie.
			req, _ := http.NewRequest("GET", g.srv.URL+"/console/signin", nil)
			resp, _ := b.send(forwarded(req))
			if found, s := secure(resp, "holon_csrf"); !found || s != trusted {
				t.Errorf("CSRF cookie: set %v, Secure %v, want Secure %v", found, s, trusted)
			}
			// A form from the origin the header claims: the gateway's own
			// only when a trusted proxy said so.
			ann := g.signup("ann")
			csrf := b.cookie("holon_csrf")
			req, _ = http.NewRequest("POST", g.srv.URL+"/console/signin", strings.NewReader(url.Values{"key": {ann.humanKey}, "csrf": {csrf}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", strings.Replace(g.srv.URL, "http://", "https://", 1))
			resp, _ = b.send(forwarded(req))
			if want := map[bool]int{false: http.StatusForbidden, true: http.StatusSeeOther}[trusted]; resp.StatusCode != want {
				t.Errorf("a form from %s: %d, want %d", req.Header.Get("Origin"), resp.StatusCode, want)
			}
			// The session cookie.
			req, _ = http.NewRequest("POST", g.srv.URL+"/console/signin", strings.NewReader(url.Values{"key": {ann.humanKey}, "csrf": {csrf}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, _ = b.send(forwarded(req))
			if found, s := secure(resp, signin.SessionCookie); resp.StatusCode != http.StatusSeeOther || !found || s != trusted {
				t.Errorf("sign-in: %d, session cookie set %v, Secure %v, want Secure %v", resp.StatusCode, found, s, trusted)
			}
			// Sign-in with GitHub: the callback GitHub is sent back to, and
			// the state cookie.
			req, _ = http.NewRequest("GET", g.srv.URL+"/v0/auth/github", nil)
			resp, _ = b.send(forwarded(req))
			loc, _ := url.Parse(resp.Header.Get("Location"))
			if got := loc.Query().Get("redirect_uri"); resp.StatusCode != http.StatusFound || got != own+"/v0/auth/github/callback" {
				t.Errorf("GitHub sign-in: %d, redirect_uri %q, want %s/v0/auth/github/callback", resp.StatusCode, got, own)
			}
			if found, s := secure(resp, "holon_github_state"); !found || s != trusted {
				t.Errorf("state cookie: set %v, Secure %v, want Secure %v", found, s, trusted)
			}
			// The OAuth issuer.
			req, _ = http.NewRequest("GET", g.srv.URL+"/.well-known/oauth-authorization-server", nil)
			_, body := b.send(forwarded(req))
			var meta struct {
				Issuer string `json:"issuer"`
			}
			if err := json.Unmarshal([]byte(body), &meta); err != nil || meta.Issuer != own {
				t.Errorf("OAuth issuer: %q (%v), want %s", meta.Issuer, err, own)
			}
		})
	}
}
