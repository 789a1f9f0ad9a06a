package appliance_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// consentQuery is the flow's authorization request as a query string.
func (f *oauthFlow) consentQuery() url.Values {
	q := url.Values{}
	for k, v := range f.request() {
		q.Set(k, str(v))
	}
	return q
}

// Ensure that the consent page sends nobody to sign in and back, shows an
// unknown client or redirect URI to the human without sending the browser
// anywhere, sends a denial back to the client with its state, keeps the
// short form's errors beside its fields without issuing a code, and that
// its form may send the browser on to the client's origin only.
func TestOAuth_ConsentPage(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	f := newOAuthFlow(ta, ann)
	q := f.consentQuery()

	resp, _ := newBrowser(t, ta.srv.URL).get("/oauth/authorize?" + q.Encode())
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/connect?"+q.Encode() {
		t.Fatalf("authorize: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _ = newBrowser(t, ta.srv.URL).get("/console/connect?" + q.Encode())
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/console/signin?next="+url.QueryEscape("/console/connect?"+q.Encode()) {
		t.Fatalf("signed out: %d %s", resp.StatusCode, loc)
	}

	b := signIn(t, ta, ann.humanKey)
	resp, body := b.get("/console/connect?" + q.Encode())
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Test Client") || !strings.Contains(body, "self-declared") ||
		!strings.Contains(csp, "form-action 'self' http://127.0.0.1:5555;") {
		t.Fatalf("consent page: %d, CSP %q\n%s", resp.StatusCode, csp, body)
	}

	for name, change := range map[string][2]string{
		"unknown client":         {"client_id", "hoc_nobody"},
		"unregistered redirect":  {"redirect_uri", "https://evil.example/cb"},
		"redirect on other path": {"redirect_uri", "http://127.0.0.1:5555/elsewhere"},
	} {
		bad := f.consentQuery()
		bad.Set(change[0], change[1])
		resp, body := b.get("/console/connect?" + bad.Encode())
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" || !strings.Contains(body, "oauth_invalid_") {
			t.Errorf("%s: %d %s", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	bad := f.consentQuery()
	bad.Set("code_challenge_method", "plain")
	if resp, _ := b.get("/console/connect?" + bad.Encode()); resp.StatusCode != http.StatusSeeOther ||
		!strings.HasPrefix(resp.Header.Get("Location"), "http://127.0.0.1:5555/callback?") || !strings.Contains(resp.Header.Get("Location"), "error=invalid_request") {
		t.Errorf("plain PKCE: %d %s, want the client told invalid_request", resp.StatusCode, resp.Header.Get("Location"))
	}

	form := f.consentQuery()
	form.Set("decision", "deny")
	resp, _ = b.post("/console/connect", form)
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc == nil || loc.Query().Get("error") != "access_denied" || loc.Query().Get("state") != "st-42" || loc.Query().Has("code") {
		t.Errorf("deny: %d %v", resp.StatusCode, loc)
	}

	form = f.consentQuery()
	for k, v := range map[string]string{"decision": "allow", "mandate": "new", "name": "app", "total": "lots", "allow_agents": "test-lab/*"} {
		form.Set(k, v)
	}
	resp, body = b.post("/console/connect", form)
	if resp.StatusCode/100 != 4 || resp.Header.Get("Location") != "" || !strings.Contains(body, `id="total-error"`) {
		t.Errorf("a bad budget: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if status, _ := ann.human.do("GET", "/v0/mandates/ann/app", nil); status != http.StatusNotFound {
		t.Errorf("the refused mandate: %d, want 404", status)
	}

	form.Set("total", "1.50")
	form.Set("ask_in_client", "on")
	resp, _ = b.post("/console/connect", form)
	loc, _ = url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc == nil || !strings.HasPrefix(loc.Query().Get("code"), "hlk_c_") {
		t.Fatalf("allow: %d %v", resp.StatusCode, loc)
	}
	if status, out := f.exchange(loc.Query().Get("code"), f.verifier); status != http.StatusOK {
		t.Fatalf("exchange: %d %v", status, out)
	}
	m := ann.human.must(http.StatusOK, "GET", "/v0/mandates/ann/app", nil)
	if str(obj(obj(m["mandate"])["budget"])["total"]) != "1.50" || obj(m["mandate"])["grantee"] != "ann/test-client" {
		t.Errorf("the new mandate: %v", m)
	}
}
