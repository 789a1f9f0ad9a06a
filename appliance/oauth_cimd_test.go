package appliance_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/oauth"
)

// clientDocs serves OAuth clients' metadata documents over https on
// loopback, as a client's website would.
type clientDocs struct {
	srv  *httptest.Server
	mu   sync.Mutex
	docs map[string][]byte
	hits map[string]int
}

func newClientDocs(t *testing.T) *clientDocs {
	d := &clientDocs{docs: map[string][]byte{}, hits: map[string]int{}}
	d.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		b, ok := d.docs[r.URL.Path]
		d.hits[r.URL.Path]++
		d.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *clientDocs) url(path string) string { return d.srv.URL + path }

func (d *clientDocs) roots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(d.srv.Certificate())
	return p
}

// put serves a document at path; fields override the defaults (a nil
// value deletes one): a client like Claude Code's, whose loopback
// redirect URIs have no port, and one https redirect.
func (d *clientDocs) put(path string, fields map[string]any) string {
	doc := map[string]any{
		"client_id": d.url(path), "client_name": "Doc Client", "client_uri": "https://client.example",
		"redirect_uris":              []string{"http://localhost/callback", "http://127.0.0.1/callback", "https://client.example/oauth/callback"},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	}
	for k, v := range fields {
		if v == nil {
			delete(doc, k)
		} else {
			doc[k] = v
		}
	}
	b, _ := json.Marshal(doc)
	d.mu.Lock()
	d.docs[path] = b
	d.mu.Unlock()
	return d.url(path)
}

// Ensure that the authorization server advertises Client ID Metadata
// Documents and public clients (read with the Go SDK's discovery), and
// keeps dynamic registration.
func TestOAuth_ClientMetadataAdvertised(t *testing.T) {
	ta := newHostedApp(t)
	asm, err := oauthex.GetAuthServerMeta(context.Background(), ta.srv.URL+"/.well-known/oauth-authorization-server", ta.srv.URL, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if !asm.ClientIDMetadataDocumentSupported || !strings.Contains(","+strings.Join(asm.TokenEndpointAuthMethodsSupported, ",")+",", ",none,") ||
		asm.RegistrationEndpoint != ta.srv.URL+"/oauth/register" {
		t.Errorf("authorization server metadata: %+v", asm)
	}
}

// Ensure that a client whose client_id is the URL of its metadata
// document connects without registering: the consent page names it from
// its document, a port-less loopback redirect URI in it matches the port
// the client listens on (RFC 8252 §7.3), and the code becomes tokens that
// work at /mcp and refresh.
func TestOAuth_ClientMetadataDocument(t *testing.T) {
	docs := newClientDocs(t)
	ta := newHostedApp(t, func(c *appliance.Config) {
		c.AllowPrivateEndpoints = true // the document's server is on loopback
		c.RemoteRootCAs = docs.roots()
	})
	ann := ta.signup("ann")
	f := &oauthFlow{ta: ta, human: ann, clientID: docs.put("/oauth/client.json", nil),
		redirect: "http://127.0.0.1:49152/callback", verifier: "verifier-" + strings.Repeat("d", 50)}
	for _, redirect := range []string{"http://127.0.0.1:49152/callback", "http://localhost:8/callback", "http://127.0.0.1/callback", "https://client.example/oauth/callback"} {
		q := url.Values{}
		for k, v := range f.request() {
			q.Set(k, str(v))
		}
		q.Set("redirect_uri", redirect)
		out := ann.human.must(http.StatusOK, "GET", "/v0/oauth/authorization?"+q.Encode(), nil)
		if out["client_id"] != f.clientID || out["client_name"] != "Doc Client" || out["redirect_uri"] != redirect {
			t.Errorf("redirect %s: consent page reads %v", redirect, out)
		}
	}
	access, refresh := f.tokens("ann/sandbox")
	if status, _, body := mcpInit(t, ta.srv.URL, access); status != http.StatusOK {
		t.Fatalf("/mcp with the document client's token: %d %s", status, body)
	}
	if status, out := f.refresh(refresh); status != http.StatusOK || str(out["access_token"]) == "" {
		t.Errorf("refresh: %d %v", status, out)
	}
	// The key it made is listed as connected by the name in its document.
	connected := 0
	for _, k := range ann.human.must(http.StatusOK, "GET", "/v0/me", nil)["keys"].([]any) {
		if obj(k)["client"] == "Doc Client" {
			connected++
		}
	}
	if connected != 1 {
		t.Errorf("%d keys connected by Doc Client, want 1", connected)
	}
}

// Ensure that an authorization request is refused, on the consent page
// and with nothing sent to the client, when the client's document names
// another client_id, lists no such redirect URI (other than a loopback
// one's port, redirect URIs match exactly), is too large, is not JSON,
// asks for a secret, lists a redirect URI registration would refuse, or
// is on a private address while the gateway guards them.
func TestOAuth_ClientMetadataRefusals(t *testing.T) {
	docs := newClientDocs(t)
	ta := newHostedApp(t, func(c *appliance.Config) {
		c.AllowPrivateEndpoints = true
		c.RemoteRootCAs = docs.roots()
	})
	ann := ta.signup("ann")
	ask := func(t *testing.T, ta *hostedApp, human client, clientID, redirect, wantCode, wantText string) {
		t.Helper()
		f := &oauthFlow{ta: ta, clientID: clientID, redirect: redirect, verifier: "verifier-" + strings.Repeat("r", 50)}
		body := f.request()
		body["decision"], body["mandate"] = "allow", "ann/sandbox"
		status, out := human.do("POST", "/v0/oauth/authorization", body)
		msg := ""
		if e, ok := out["error"].(map[string]any); ok {
			msg, _ = e["message"].(string)
		}
		if status != http.StatusBadRequest || errorCode(out) != wantCode || !strings.Contains(msg, wantText) {
			t.Errorf("client %s, redirect %s: %d %v; want 400 %s saying %q", clientID, redirect, status, out, wantCode, wantText)
		}
		if out["redirect"] != nil || out["error_redirect"] != nil {
			t.Errorf("client %s: the browser is sent to the client: %v", clientID, out)
		}
	}
	good := docs.put("/good.json", nil)
	for _, redirect := range []string{
		"https://client.example/oauth/callback/x", "https://client.example:8443/oauth/callback",
		"https://evil.example/oauth/callback", "http://127.0.0.1:5555/other", "http://[::1]:5555/callback",
		"http://client.example/oauth/callback",
	} {
		ask(t, ta, ann.human, good, redirect, oauth.CodeInvalidRedirect, "not among the redirect URIs")
	}
	const loop = "http://127.0.0.1:5555/callback"
	ask(t, ta, ann.human, docs.put("/other.json", map[string]any{"client_id": "https://other.example/client.json"}), loop,
		oauth.CodeInvalidClient, `its client_id is "https://other.example/client.json", not the URL it was fetched from`)
	ask(t, ta, ann.human, docs.put("/large.json", map[string]any{"client_name": strings.Repeat("x", 6000)}), loop,
		oauth.CodeInvalidClient, "more than the 5120 bytes")
	ask(t, ta, ann.human, docs.put("/secret.json", map[string]any{"client_secret": "s"}), loop,
		oauth.CodeInvalidClient, "carries a client_secret")
	ask(t, ta, ann.human, docs.put("/js.json", map[string]any{"redirect_uris": []string{"javascript:alert(1)"}}), loop,
		oauth.CodeInvalidClient, "is not a redirect scheme")
	ask(t, ta, ann.human, docs.url("/missing.json"), loop, oauth.CodeInvalidClient, "answered 404")
	ask(t, ta, ann.human, "https://client.example", loop, oauth.CodeInvalidClient, "has no path")

	// A gateway that guards private addresses (as in production) refuses
	// a document on loopback before connecting.
	guarded := newHostedApp(t, func(c *appliance.Config) { c.RemoteRootCAs = docs.roots() })
	bob := guarded.signup("bob")
	ask(t, guarded, bob.human, good, loop, oauth.CodeInvalidClient, "not on the public internet (127.0.0.1, loopback)")

	// At the token endpoint, a document client with a code it was never
	// given gets invalid_grant, and nothing is fetched for it.
	f := &oauthFlow{ta: ta, clientID: docs.url("/never.json"), redirect: loop, verifier: "verifier-" + strings.Repeat("t", 50)}
	if status, out := f.exchange("hlk_c_"+strings.Repeat("q", 52), f.verifier); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Errorf("token endpoint, made-up code: %d %v", status, out)
	}
	docs.mu.Lock()
	defer docs.mu.Unlock()
	if n := docs.hits["/never.json"]; n != 0 {
		t.Errorf("the token endpoint fetched the document %d times", n)
	}
}
