package appliance_test

import (
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// Ensure that a human signed in to the console who arrives at the consent
// page from another site (as from claude.ai or ChatGPT: a cross-site
// navigation) is still signed in there and can allow the connection,
// while a form that other site posts to the consent page is refused and
// gives it no code.
func TestConsole_ConsentFromAnotherSite(t *testing.T) {
	chromium, axe := needBrowser(t)
	ta := newHostedApp(t)
	ann := ta.signup("ann")

	// The other site: on loopback, named localhost, which is another site
	// than the gateway's 127.0.0.1 to the browser.
	var mu sync.Mutex
	var callbacks []url.Values
	mux := http.NewServeMux()
	site := httptest.NewServer(mux)
	defer site.Close()
	_, port, _ := net.SplitHostPort(site.Listener.Addr().String())
	siteOrigin := "http://localhost:" + port
	redirect := siteOrigin + "/callback"
	reg := ta.anonymous().must(http.StatusCreated, "POST", "/oauth/register", map[string]any{
		"client_name": "Other Site Assistant", "redirect_uris": []string{redirect},
	})
	params := url.Values{
		"response_type": {"code"}, "client_id": {str(reg["client_id"])}, "redirect_uri": {redirect},
		"code_challenge": {challengeOf("verifier-" + strings.Repeat("s", 50))}, "code_challenge_method": {"S256"},
		"state": {"st-x"}, "resource": {ta.srv.URL + "/mcp"},
	}
	authorize := ta.srv.URL + "/oauth/authorize?" + params.Encode()
	page := func(w http.ResponseWriter, body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><title>Other site</title></head><body>%s</body></html>`, body)
	}
	mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) {
		page(w, `<a id="go" href="`+html.EscapeString(authorize)+`">Connect Holon</a>`)
	})
	mux.HandleFunc("/forge", func(w http.ResponseWriter, r *http.Request) {
		var fields strings.Builder
		for k := range params {
			fmt.Fprintf(&fields, `<input type="hidden" name="%s" value="%s">`, k, html.EscapeString(params.Get(k)))
		}
		page(w, `<form method="post" action="`+ta.srv.URL+`/console/connect">`+fields.String()+
			`<input type="hidden" name="csrf" value="`+strings.Repeat("A", 43)+`">`+
			`<input type="hidden" name="mandate" value="ann/sandbox">`+
			`<button id="forge" type="submit" name="decision" value="allow">Win a prize</button></form>`)
	})
	mux.HandleFunc("/callback", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		callbacks = append(callbacks, r.URL.Query())
		mu.Unlock()
		page(w, `<p id="done">back at the other site</p>`)
	})

	browser := newHeadless(t, chromium)
	tb := newTab(t, browser, ta.srv.URL, axe, "crosssite")
	tb.open("/console/signin")
	tb.fill("#key", ann.humanKey)
	if status := tb.click("#signin-key button[type=submit]"); status != 200 {
		t.Fatalf("sign in: status %d", status)
	}

	// A form the other site posts to the consent page is refused.
	tb.step("open the other site's form", chromedp.Navigate(siteOrigin+"/forge"))
	if status := tb.click("#forge"); status != http.StatusForbidden {
		t.Errorf("a consent posted from another site: status %d, want 403", status)
	}
	mu.Lock()
	if len(callbacks) != 0 {
		t.Errorf("the forged consent reached the client: %v", callbacks)
	}
	mu.Unlock()

	// A link on the other site lands on the consent page, signed in.
	tb.step("open the other site", chromedp.Navigate(siteOrigin+"/start"))
	if status := tb.click("#go"); status != 200 {
		t.Fatalf("follow the link: status %d", status)
	}
	if p := tb.path(); !strings.HasPrefix(p, "/console/connect?") {
		t.Fatalf("arriving from another site: at %s, want the consent page, signed in", p)
	}
	if name := tb.text("#client-name"); name != "Other Site Assistant" {
		t.Errorf("consent page names %q", name)
	}
	tb.step("pick ann/sandbox", chromedp.Click(chromedp.CSS(`input[value="ann/sandbox"]`)))
	if status := tb.click("#allow"); status != 200 {
		t.Fatalf("allow: status %d", status)
	}
	if got := tb.text("#done"); got != "back at the other site" {
		t.Fatalf("the browser did not go back to the other site: %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(callbacks) != 1 || !strings.HasPrefix(callbacks[0].Get("code"), "hlk_c_") || callbacks[0].Get("state") != "st-x" {
		t.Errorf("callbacks %v, want one with a code", callbacks)
	}
}
