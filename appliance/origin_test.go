package appliance_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"holon.dev/holon/appliance"
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
			if status != http.StatusMisdirectedRequest || code != appliance.CodeHostNotAllowed {
				t.Errorf("%s %s with Host %s: %d %q, want 421 %s", rt.method, rt.path, host, status, code, appliance.CodeHostNotAllowed)
			}
		}
		for _, host := range []string{"", "localhost" + port, "LOCALHOST" + port, "127.0.0.1" + port, "[::1]" + port, "127.0.0.2" + port, "gw.example.com", "GW.example.com:443"} {
			if status, code := hostRequest(t, rt.method, srv.URL, rt.path, host, "", "", rt.body); status == http.StatusMisdirectedRequest || code == appliance.CodeHostNotAllowed {
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
			if status, code := hostRequest(t, "POST", srv.URL, path, "", o, "", mcpInitialize); status != http.StatusForbidden || code != appliance.CodeOriginNotAllowed {
				t.Errorf("Origin %q: %d %q, want 403 %s", o, status, code, appliance.CodeOriginNotAllowed)
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
				if status, code := hostRequest(t, "POST", ta.srv.URL, "/mcp", "", o, k, mcpInitialize); status != http.StatusForbidden || code != appliance.CodeOriginNotAllowed {
					t.Errorf("Origin %q (key %t): %d %q, want 403 %s", o, k != "", status, code, appliance.CodeOriginNotAllowed)
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
