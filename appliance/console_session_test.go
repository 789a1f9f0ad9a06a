package appliance_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/signin"
)

// browser is a cookie-keeping HTTP client that does not follow redirects,
// so a test sees each answer of the console as a browser gets it.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (b *browser) get(path string) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest("GET", b.base+path, nil)
	req.Header.Set("Accept", "text/html")
	return b.send(req)
}

// post sends a form with the browser's CSRF token (read from its cookie,
// as the console's pages embed it).
func (b *browser) post(path string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	if form.Get("csrf") == "" {
		form.Set("csrf", b.cookie("holon_csrf"))
	}
	req, _ := http.NewRequest("POST", b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.send(req)
}

func (b *browser) send(req *http.Request) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func (b *browser) cookie(name string) string {
	u, _ := url.Parse(b.base)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

var keyInPage = regexp.MustCompile(`value="(hlk_[ha]_[A-Za-z0-9]+)"`)

// Ensure that an email signup in the console shows both keys once, signs
// the human in with a session cookie that holds no key, scopes pages to the
// account, and that signing out (or revoking the key) ends the session.
func TestConsole_SignupSession(t *testing.T) {
	ta := newHostedApp(t)
	b := newBrowser(t, ta.srv.URL)

	resp, _ := b.get("/console/")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/console/signin") {
		t.Fatalf("signed out: %d %s, want a redirect to sign in", resp.StatusCode, resp.Header.Get("Location"))
	}
	b.get("/console/signin")
	if b.cookie("holon_csrf") == "" {
		t.Fatal("the sign-in page set no CSRF cookie")
	}
	// A form without the token is refused, and nothing is created.
	resp, _ = b.post("/console/signup", url.Values{"handle": {"ada"}, "email": {"ada@example.com"}, "csrf": {"forged"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("forged CSRF token: %d, want 403", resp.StatusCode)
	}
	// A bad handle comes back beside its field.
	resp, body := b.post("/console/signup", url.Values{"handle": {"A"}, "email": {"ada@example.com"}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `id="handle-error"`) {
		t.Fatalf("bad handle: %d, want 400 with the message beside the field:\n%s", resp.StatusCode, body)
	}
	resp, body = b.post("/console/signup", url.Values{"handle": {"ada"}, "email": {"ada@example.com"}})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("signup: %d\n%s", resp.StatusCode, body)
	}
	keys := keyInPage.FindAllStringSubmatch(body, -1)
	if len(keys) != 2 || !strings.Contains(body, "you will not see them again") {
		t.Fatalf("signup page shows %d keys, want the human and the agent key shown once:\n%s", len(keys), body)
	}
	humanKey := keys[0][1]
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("the page with the keys is cacheable: %q", resp.Header.Get("Cache-Control"))
	}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == signin.SessionCookie {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || strings.Contains(session.Value, humanKey) || strings.HasPrefix(session.Value, "hlk_") {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Lax (a link from another site arrives signed in; forms keep their CSRF token), and no key in it", session)
	}
	resp, body = b.get("/console/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "ada/sandbox") || !strings.Contains(body, `data-balance="ada">5.00`) {
		t.Fatalf("overview: %d, want ada's sandbox and balance:\n%s", resp.StatusCode, body)
	}
	if strings.Contains(body, humanKey) {
		t.Error("the overview shows the human key again")
	}
	// Another account's mandate is as unknown to the page as to the API.
	ta.anonymous().must(201, "POST", "/v0/signup", map[string]string{"handle": "bob", "email": "bob@example.com"})
	if resp, _ := b.get("/console/mandates/bob/sandbox"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob's mandate from ada's session: %d, want 404", resp.StatusCode)
	}

	// Sign out ends the session server-side: the old cookie is refused.
	old := session.Value
	resp, _ = b.post("/console/signout", url.Values{})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	replay := newBrowser(t, ta.srv.URL)
	u, _ := url.Parse(ta.srv.URL)
	replay.c.Jar.SetCookies(u, []*http.Cookie{{Name: signin.SessionCookie, Value: old}})
	if resp, _ := replay.get("/console/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a signed-out session still opens the console: %d", resp.StatusCode)
	}

	// Sign in again by pasting the key; revoking that key ends the session.
	b.get("/console/signin")
	resp, _ = b.post("/console/signin", url.Values{"key": {humanKey}, "next": {"/console/receipts"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/receipts" {
		t.Fatalf("sign in with the key: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := b.get("/console/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("after pasting the key: %d", resp.StatusCode)
	}
	prefix := humanKey[:14]
	ta.as(humanKey).must(200, "DELETE", "/v0/keys/"+prefix, nil)
	if resp, _ := b.get("/console/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the session of a revoked key still opens the console: %d", resp.StatusCode)
	}
	// An agent key does not sign in.
	resp, body = b.post("/console/signin", url.Values{"key": {keys[1][1]}})
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "agent key") {
		t.Errorf("agent key: %d, want 401 saying agent keys do not sign in:\n%s", resp.StatusCode, body)
	}
}

// Ensure that a browser asking for / is sent to the console while an API
// client keeps its JSON answer.
func TestConsole_RootRedirect(t *testing.T) {
	ta := newHostedApp(t)
	b := newBrowser(t, ta.srv.URL)
	if resp, _ := b.get("/"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/" {
		t.Errorf("browser at /: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	status, out := ta.anonymous().do("GET", "/", nil)
	if status != http.StatusNotFound || errorCode(out) != "not_found" {
		t.Errorf("API client at /: %d %v", status, out)
	}
}

// Ensure that a console session ends after its lifetime, that signing in
// again replaces the browser's session, and that expired sessions are
// cleared from the store.
func TestConsole_SessionLifetime(t *testing.T) {
	clock := &fixedClock{now: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}
	ta := newHostedApp(t, func(c *appliance.Config) { c.Now = clock.Now })
	ann := ta.signup("ann")
	sessions := func() int {
		n := 0
		_ = ta.app.Engine().Store().View(func(tx holon.Tx) error {
			return tx.ForEach(holon.BucketSessions, "", func(string, json.RawMessage) (bool, error) { n++; return true, nil })
		})
		return n
	}
	b := signIn(t, ta, ann.humanKey)
	signIn(t, ta, ann.humanKey) // another browser
	b.get("/console/signin")
	b.post("/console/signin", url.Values{"key": {ann.humanKey}}) // the first again: replaces its session
	if n := sessions(); n != 2 {
		t.Errorf("%d sessions stored, want 2 (two browsers)", n)
	}
	clock.mu.Lock()
	clock.now = clock.now.Add(7*24*time.Hour + time.Second)
	clock.mu.Unlock()
	if resp, _ := b.get("/console/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("an expired session still opens the console: %d", resp.StatusCode)
	}
	signIn(t, ta, ann.humanKey)
	if n := sessions(); n != 1 {
		t.Errorf("%d sessions stored after expiry and a new sign-in, want 1", n)
	}
}

var assetLink = regexp.MustCompile(`(?:href|src)="(/console/static/[^"]+)"`)

// Ensure that every console page carries the strict CSP, its assets are
// served under checksummed names with a year's cache lifetime (and an old
// or made-up name is a 404), and that over https the cookies are Secure.
func TestConsole_Headers(t *testing.T) {
	ta := newHostedApp(t, trustProxy(true)) // behind a proxy that terminates TLS (below)
	b := newBrowser(t, ta.srv.URL)
	resp, body := b.get("/console/signin")
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "form-action 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "http") {
		t.Errorf("CSP allows inline code or another origin: %q", csp)
	}
	links := assetLink.FindAllStringSubmatch(body, -1)
	if len(links) != 2 {
		t.Fatalf("%d asset links, want the stylesheet and the script", len(links))
	}
	for _, l := range links {
		if !regexp.MustCompile(`\.[0-9a-f]{12}\.(css|js)$`).MatchString(l[1]) {
			t.Errorf("asset %s has no checksum in its name", l[1])
		}
		resp, _ := b.get(l[1])
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
			t.Errorf("%s: %d %q", l[1], resp.StatusCode, resp.Header.Get("Cache-Control"))
		}
	}
	if resp, _ := b.get("/console/static/console.000000000000.css"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a made-up asset name: %d", resp.StatusCode)
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, " style=") || strings.Contains(body, " onclick=") {
		t.Error("the page has inline script or style")
	}
	// Behind a proxy that terminates TLS.
	ann := ta.signup("ann")
	req, _ := http.NewRequest("POST", ta.srv.URL+"/console/signin", strings.NewReader(url.Values{"key": {ann.humanKey}, "csrf": {b.cookie("holon_csrf")}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	req.AddCookie(&http.Cookie{Name: "holon_csrf", Value: b.cookie("holon_csrf")})
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var secure bool
	for _, c := range resp.Cookies() {
		if c.Name == signin.SessionCookie {
			secure = c.Secure
		}
	}
	if resp.StatusCode != http.StatusSeeOther || !secure {
		t.Errorf("sign-in over https: %d, session cookie Secure %v", resp.StatusCode, secure)
	}
	// A form sent from another origin is refused even with the token.
	req, _ = http.NewRequest("POST", ta.srv.URL+"/console/signup", strings.NewReader(url.Values{"handle": {"eve"}, "email": {"eve@example.com"}, "csrf": {b.cookie("holon_csrf")}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	req.AddCookie(&http.Cookie{Name: "holon_csrf", Value: b.cookie("holon_csrf")})
	if resp, _ := b.send(req); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-origin form: %d, want 403", resp.StatusCode)
	}
	if out := ta.admin().must(http.StatusOK, "GET", "/v0/admin/accounts?q=eve", nil); len(out["accounts"].([]any)) != 0 {
		t.Error("the cross-origin signup created an account")
	}
}
