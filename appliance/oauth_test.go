package appliance_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/time/rate"

	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/oauth"
	"holon.dev/holon/appliance/web"
)

// oauthFlow is one client's way through the authorization server, driven
// over HTTP as an MCP client would (the consent is given through the API
// the consent page uses, with the human's key).
type oauthFlow struct {
	ta       *hostedApp
	human    account
	clientID string
	redirect string
	verifier string
	// scope is the authorization request's scope parameter (none when
	// empty).
	scope string
	// issuer is the gateway's public origin when it is not the test
	// server's (HOLON_PUBLIC_URL set to another front).
	issuer string
}

// origin is the issuer the flow expects: the gateway's public origin.
func (f *oauthFlow) origin() string {
	if f.issuer != "" {
		return f.issuer
	}
	return f.ta.srv.URL
}

// newOAuthClient registers a public client with one loopback redirect URI.
func newOAuthFlow(ta *hostedApp, human account) *oauthFlow {
	ta.t.Helper()
	out := ta.anonymous().must(http.StatusCreated, "POST", "/oauth/register", map[string]any{
		"client_name": "Test Client", "redirect_uris": []string{"http://127.0.0.1:1234/callback"},
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"token_endpoint_auth_method": "none",
	})
	if out["token_endpoint_auth_method"] != "none" || !strings.HasPrefix(str(out["client_id"]), "hoc_") {
		ta.t.Fatalf("registration: %v", out)
	}
	return &oauthFlow{ta: ta, human: human, clientID: str(out["client_id"]),
		redirect: "http://127.0.0.1:5555/callback", // another port: RFC 8252 §7.3
		verifier: "verifier-" + strings.Repeat("x", 50)}
}

func challengeOf(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// request is the authorization request's parameters.
func (f *oauthFlow) request() map[string]any {
	req := map[string]any{
		"response_type": "code", "client_id": f.clientID, "redirect_uri": f.redirect,
		"code_challenge": challengeOf(f.verifier), "code_challenge_method": "S256", "state": "st-42",
		"resource": f.origin() + "/mcp",
	}
	if f.scope != "" {
		req["scope"] = f.scope
	}
	return req
}

// authorize has the human allow the client under a mandate and returns
// the code the browser would bring back.
func (f *oauthFlow) authorize(mandate string) string {
	t := f.ta.t
	t.Helper()
	body := f.request()
	body["decision"], body["mandate"] = "allow", mandate
	out := f.human.human.must(http.StatusOK, "POST", "/v0/oauth/authorization", body)
	u, err := url.Parse(str(out["redirect"]))
	if err != nil || !strings.HasPrefix(u.String(), f.redirect+"?") {
		t.Fatalf("redirect %v", out)
	}
	q := u.Query()
	if q.Get("state") != "st-42" || q.Get("iss") != f.origin() || !strings.HasPrefix(q.Get("code"), "hlk_c_") {
		t.Fatalf("redirect query %v", q)
	}
	return q.Get("code")
}

// tokenRequest posts a form to the token endpoint.
func (f *oauthFlow) tokenRequest(form url.Values) (int, map[string]any) {
	f.ta.t.Helper()
	if form.Get("client_id") == "" {
		form.Set("client_id", f.clientID)
	}
	resp, err := http.PostForm(f.ta.srv.URL+"/oauth/token", form)
	if err != nil {
		f.ta.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		f.ta.t.Fatalf("token answer %d %q", resp.StatusCode, b)
	}
	return resp.StatusCode, out
}

func (f *oauthFlow) exchange(code, verifier string) (int, map[string]any) {
	return f.tokenRequest(url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"code_verifier": {verifier}, "redirect_uri": {f.redirect}, "resource": {f.origin() + "/mcp"}})
}

func (f *oauthFlow) refresh(token string) (int, map[string]any) {
	return f.tokenRequest(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}, "resource": {f.origin() + "/mcp"}})
}

// tokens runs the flow to its first tokens.
func (f *oauthFlow) tokens(mandate string) (access, refresh string) {
	f.ta.t.Helper()
	status, out := f.exchange(f.authorize(mandate), f.verifier)
	if status != http.StatusOK || out["token_type"] != "Bearer" || out["expires_in"] != float64(3600) {
		f.ta.t.Fatalf("exchange: %d %v", status, out)
	}
	return str(out["access_token"]), str(out["refresh_token"])
}

// mcpInit sends an MCP initialize request to /mcp with a bearer token and
// returns the status and WWW-Authenticate.
func mcpInit(t *testing.T, base, token string) (int, string, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

// Ensure that /mcp answers a request without a token with 401 and the
// header that starts discovery, and that both metadata documents describe
// the gateway as its own authorization server (read with the Go SDK's
// own discovery, which checks them).
func TestOAuth_Discovery(t *testing.T) {
	ta := newHostedApp(t)
	status, www, _ := mcpInit(t, ta.srv.URL, "")
	want := `Bearer resource_metadata="` + ta.srv.URL + `/.well-known/oauth-protected-resource", scope="agents:call"`
	if status != http.StatusUnauthorized || www != want {
		t.Fatalf("/mcp without a token: %d %q, want 401 %q", status, www, want)
	}
	prm := ta.anonymous().must(http.StatusOK, "GET", "/.well-known/oauth-protected-resource", nil)
	if prm["resource"] != ta.srv.URL+"/mcp" || str(prm["authorization_servers"]) != "["+ta.srv.URL+"]" {
		t.Errorf("protected resource metadata: %v", prm)
	}
	asm, err := oauthex.GetAuthServerMeta(context.Background(), ta.srv.URL+"/.well-known/oauth-authorization-server", ta.srv.URL, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if asm.Issuer != ta.srv.URL || asm.RegistrationEndpoint != ta.srv.URL+"/oauth/register" ||
		strings.Join(asm.CodeChallengeMethodsSupported, ",") != "S256" ||
		strings.Join(asm.GrantTypesSupported, ",") != "authorization_code,refresh_token" ||
		strings.Join(asm.TokenEndpointAuthMethodsSupported, ",") != "none" {
		t.Errorf("authorization server metadata: %+v", asm)
	}
	// Browser-based clients may call the cookie-less endpoints from
	// another origin.
	for _, p := range []string{"/oauth/token", "/oauth/register", "/.well-known/oauth-authorization-server"} {
		status, h, _ := ta.anonymous().with("Origin", "https://inspector.example").raw("OPTIONS", p, nil)
		if status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("preflight %s: %d %v", p, status, h)
		}
	}
	// A static key keeps working, and gets no challenge.
	ann := ta.signup("ann")
	if status, www, _ := mcpInit(t, ta.srv.URL, ann.agentKey); status != http.StatusOK || www != "" {
		t.Errorf("/mcp with the agent key: %d %q", status, www)
	}
}

// Ensure that registration refuses redirect URIs a browser could be sent
// to by mistake, and that an authorization request for a redirect URI the
// client did not register is refused without sending the browser there.
func TestOAuth_RedirectURIs(t *testing.T) {
	ta := newHostedApp(t)
	for _, bad := range []string{"http://example.com/cb", "javascript:alert(1)", "https://example.com/cb#frag", "/relative", "data:text/html,x"} {
		status, out := ta.anonymous().do("POST", "/oauth/register", map[string]any{"client_name": "x", "redirect_uris": []string{bad}})
		if status != http.StatusBadRequest || out["error"] != "invalid_redirect_uri" {
			t.Errorf("register %q: %d %v", bad, status, out)
		}
	}
	ann := ta.signup("ann")
	f := newOAuthFlow(ta, ann)
	for _, redirect := range []string{"http://127.0.0.1:5555/other", "http://localhost:5555/callback", "https://evil.example/callback"} {
		q := url.Values{}
		for k, v := range f.request() {
			q.Set(k, str(v))
		}
		q.Set("redirect_uri", redirect)
		status, out := ann.human.do("GET", "/v0/oauth/authorization?"+q.Encode(), nil)
		if status != http.StatusBadRequest || errorCode(out) != oauth.CodeInvalidRedirect {
			t.Errorf("redirect_uri %s: %d %v, want 400 %s", redirect, status, out, oauth.CodeInvalidRedirect)
		}
	}
	// A request without PKCE goes back to the client with an error.
	body := f.request()
	delete(body, "code_challenge")
	body["decision"], body["mandate"] = "allow", "ann/sandbox"
	out := ann.human.must(http.StatusOK, "POST", "/v0/oauth/authorization", body)
	if u, _ := url.Parse(str(out["error_redirect"])); u == nil || u.Query().Get("error") != "invalid_request" || u.Query().Get("state") != "st-42" {
		t.Errorf("no code_challenge: %v", out)
	}
	// The token endpoint checks the redirect URI too.
	code := f.authorize("ann/sandbox")
	status, tok := f.tokenRequest(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {f.verifier}, "redirect_uri": {"http://127.0.0.1:5556/callback"}})
	if status != http.StatusBadRequest || tok["error"] != "invalid_grant" {
		t.Errorf("exchange with another redirect_uri: %d %v", status, tok)
	}
}

// Ensure that the token endpoint refuses a wrong PKCE verifier and a
// reused code (which also revokes what the code gave), that a token works
// only on its scopes' routes (not GET /v0/me), for its own resource,
// until it expires, and that a refresh token used twice revokes the
// whole family.
func TestOAuth_Refusals(t *testing.T) {
	clock := &fixedClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	ta := newHostedApp(t, func(c *appliance.Config) { c.Now = clock.Now })
	ann := ta.signup("ann")
	f := newOAuthFlow(ta, ann)
	var secrets []string

	t.Run("wrong verifier", func(t *testing.T) {
		code := f.authorize("ann/sandbox")
		secrets = append(secrets, code)
		status, out := f.exchange(code, "another-verifier-"+strings.Repeat("y", 40))
		if status != http.StatusBadRequest || out["error"] != "invalid_grant" || !strings.Contains(str(out["error_description"]), "code_verifier") {
			t.Errorf("wrong verifier: %d %v", status, out)
		}
	})
	t.Run("reused code", func(t *testing.T) {
		code := f.authorize("ann/sandbox")
		status, out := f.exchange(code, f.verifier)
		if status != http.StatusOK {
			t.Fatalf("first exchange: %d %v", status, out)
		}
		access := str(out["access_token"])
		secrets = append(secrets, code, access, str(out["refresh_token"]))
		if status, _, _ := mcpInit(t, ta.srv.URL, access); status != http.StatusOK {
			t.Fatalf("/mcp with the token: %d", status)
		}
		status, out = f.exchange(code, f.verifier)
		if status != http.StatusBadRequest || out["error"] != "invalid_grant" {
			t.Errorf("second exchange: %d %v", status, out)
		}
		if status, www, _ := mcpInit(t, ta.srv.URL, access); status != http.StatusUnauthorized || !strings.Contains(www, `error="invalid_token"`) {
			t.Errorf("/mcp after the code came back: %d %q, want 401 invalid_token", status, www)
		}
	})
	t.Run("for its scopes' routes only", func(t *testing.T) {
		access, refresh := f.tokens("ann/sandbox")
		secrets = append(secrets, access, refresh)
		status, out := ta.as(access).do("GET", "/v0/me", nil)
		if status != http.StatusUnauthorized || !strings.Contains(str(out), "reaches only /mcp") {
			t.Errorf("GET /v0/me with an access token: %d %v", status, out)
		}
		status, tok := f.tokenRequest(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "resource": {"https://other.example/mcp"}})
		if status != http.StatusBadRequest || tok["error"] != "invalid_target" {
			t.Errorf("refresh for another resource: %d %v", status, tok)
		}
	})
	t.Run("expired", func(t *testing.T) {
		access, refresh := f.tokens("ann/sandbox")
		secrets = append(secrets, access, refresh)
		clock.mu.Lock()
		clock.now = clock.now.Add(time.Hour)
		clock.mu.Unlock()
		status, www, body := mcpInit(t, ta.srv.URL, access)
		if status != http.StatusUnauthorized || !strings.Contains(www, `error="invalid_token"`) || !strings.Contains(body, "expired") {
			t.Errorf("/mcp with an expired token: %d %q %s", status, www, body)
		}
		status, out := f.refresh(refresh)
		if status != http.StatusOK {
			t.Fatalf("refresh: %d %v", status, out)
		}
		secrets = append(secrets, str(out["access_token"]), str(out["refresh_token"]))
		if status, _, _ := mcpInit(t, ta.srv.URL, str(out["access_token"])); status != http.StatusOK {
			t.Errorf("/mcp with the refreshed token: %d", status)
		}
	})
	t.Run("refresh twice", func(t *testing.T) {
		_, refresh := f.tokens("ann/sandbox")
		status, first := f.refresh(refresh)
		if status != http.StatusOK || first["refresh_token"] == refresh {
			t.Fatalf("refresh: %d %v", status, first)
		}
		status, out := f.refresh(refresh)
		if status != http.StatusBadRequest || out["error"] != "invalid_grant" {
			t.Errorf("the used refresh token again: %d %v", status, out)
		}
		// The whole family is revoked: the token of the first refresh, and
		// its refresh token.
		if status, _, _ := mcpInit(t, ta.srv.URL, str(first["access_token"])); status != http.StatusUnauthorized {
			t.Errorf("/mcp with the family's newest token: %d", status)
		}
		if status, out := f.refresh(str(first["refresh_token"])); status != http.StatusBadRequest || !strings.Contains(str(out), "revoked") {
			t.Errorf("the family's newest refresh token: %d %v", status, out)
		}
		secrets = append(secrets, refresh, str(first["access_token"]), str(first["refresh_token"]))
	})
	t.Run("idle connection", func(t *testing.T) {
		_, refresh := f.tokens("ann/sandbox")
		count := func() int {
			n := 0
			for _, k := range ann.human.must(http.StatusOK, "GET", "/v0/me", nil)["keys"].([]any) {
				if obj(k)["client"] == "Test Client" {
					n++
				}
			}
			return n
		}
		before := count()
		clock.mu.Lock()
		clock.now = clock.now.Add(30 * 24 * time.Hour)
		clock.mu.Unlock()
		if status, out := f.refresh(refresh); status != http.StatusBadRequest || !strings.Contains(str(out), "expired") {
			t.Errorf("refresh after 30 idle days: %d %v", status, out)
		}
		if after := count(); before < 1 || after != 0 {
			t.Errorf("connection keys listed: %d before, %d after 30 idle days", before, after)
		}
	})
	t.Run("another resource", func(t *testing.T) {
		access, _ := f.tokens("ann/sandbox")
		old := ta.srv.URL
		ta.restart(func(c *appliance.Config) { c.PublicURL = "https://gw.example.com" })
		status, www, body := mcpInit(t, ta.srv.URL, access)
		if status != http.StatusUnauthorized || !strings.Contains(body, old+"/mcp") || !strings.Contains(www, "https://gw.example.com/.well-known/oauth-protected-resource") {
			t.Errorf("/mcp of another resource: %d %q %s", status, www, body)
		}
	})
	t.Run("disabled account", func(t *testing.T) {
		ta.restart(func(c *appliance.Config) { c.PublicURL = "" })
		access, refresh := f.tokens("ann/sandbox")
		// A code the human granted before the disable, traded after it.
		code := f.authorize("ann/sandbox")
		secrets = append(secrets, access, refresh, code)
		ta.admin().must(http.StatusOK, "POST", "/v0/admin/accounts/ann/disable", map[string]any{"reason": "test"})
		if status, out := f.exchange(code, f.verifier); status != http.StatusBadRequest || out["error"] != "invalid_grant" ||
			!strings.Contains(str(out["error_description"]), "disabled") || out["access_token"] != nil {
			t.Errorf("a code granted before the disable, traded after: %d %v, want invalid_grant naming the disable", status, out)
		}
		if status, _, _ := mcpInit(t, ta.srv.URL, access); status != http.StatusUnauthorized {
			t.Errorf("/mcp of a disabled account: %d", status)
		}
		if status, out := f.refresh(refresh); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
			t.Errorf("refresh of a disabled account: %d %v", status, out)
		}
	})
	logs := ta.logs.String()
	for _, s := range secrets {
		if s == "" || strings.Contains(logs, s) || strings.Contains(logs, s[:20]) {
			t.Errorf("a code or token (%.8s…) is in the logs", s)
		}
	}
}

// Ensure that client registrations count against the signup limit of the
// client's address: anonymous writes are bounded.
func TestOAuth_RegistrationRateLimited(t *testing.T) {
	ta := newHostedApp(t, func(c *appliance.Config) {
		c.Limits.Signup = appliance.Limit{Rate: rate.Every(time.Hour), Burst: 1}
	})
	reg := map[string]any{"client_name": "x", "redirect_uris": []string{"http://127.0.0.1/cb"}}
	ta.anonymous().must(http.StatusCreated, "POST", "/oauth/register", reg)
	status, out := ta.anonymous().do("POST", "/oauth/register", reg)
	if status != http.StatusTooManyRequests || errorCode(out) != web.CodeRateLimited {
		t.Errorf("second registration: %d %v, want 429", status, out)
	}
}
