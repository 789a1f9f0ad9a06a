package appliance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// waitJS polls a JavaScript condition for up to 10 s, across the page
// loads under way, and reports whether it came true.
func (tb *tab) waitJS(cond string) bool {
	tb.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(tb.ctx, 2*time.Second)
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(function () { try { return !!(%s); } catch (e) { return false; } })()`, cond)))
		cancel()
		if err == nil && v {
			return true
		}
	}
	return false
}

// Ensure, in a real browser, that signing in with GitHub works end to end
// (the login cookie the callback sets reaches the exchange); that a link
// to /console#login=<someone else's code> does not sign a fresh browser
// into that someone's account (login CSRF); and that a sign-in's next
// parameter cannot send the browser to another origin, even spelled with
// a tab the browser drops (/\t/host/ is //host/ to it).
func TestSignIn_Browser(t *testing.T) {
	chromium, axe := needBrowser(t)
	browser := newHeadless(t, chromium)
	g := newGitHubApp(t)

	t.Run("github", func(t *testing.T) {
		g.gh.AddUser(31, "Vera", "vera@users.example.com", true)
		g.gh.SignIn("Vera")
		tb := newTab(t, browser, g.srv.URL, axe, "signin-github")
		tb.step("sign in with GitHub", chromedp.Navigate(g.srv.URL+"/v0/auth/github"))
		if !tb.waitJS(`document.querySelector(".who") && document.querySelector(".who").textContent.trim() === "vera"`) {
			t.Fatalf("after GitHub sign-in: at %s, %q", tb.path(), tb.text("main"))
		}
		tb.open("/console/")
		if who := tb.text(".who"); who != "vera" {
			t.Errorf("signed in as %q, want vera", who)
		}
	})

	t.Run("login csrf", func(t *testing.T) {
		// The attacker signs in with their own GitHub account and keeps the
		// code instead of trading it.
		g.gh.AddUser(32, "mallory", "mallory@users.example.com", true)
		g.gh.SignIn("mallory")
		attacker := g.newBrowser()
		code := g.loginCode(attacker.callback(attacker.authorize(attacker.start())))
		// A victim with a fresh profile follows the attacker's link.
		tb := newTab(t, browser, g.srv.URL, axe, "signin-csrf")
		tb.step("follow the link", chromedp.Navigate(g.srv.URL+"/console#login="+code))
		if !tb.waitJS(`/failed/.test((document.getElementById("exchange-status") || {}).textContent) || (document.querySelector(".who") || {}).textContent`) {
			t.Fatalf("the exchange did not end: at %s", tb.path())
		}
		if got := tb.text("#exchange-status"); !strings.Contains(got, "GitHub sign-in failed") || !strings.Contains(got, "not to this one") {
			t.Errorf("the victim's page says %q, want the refusal", got)
		}
		time.Sleep(200 * time.Millisecond) // a form the script might have sent
		tb.open("/console/")
		if p, who := tb.path(), tb.text(".who"); !strings.HasPrefix(p, "/console/signin") || who == "mallory" {
			t.Errorf("the victim's browser is at %s as %q: signed into the attacker's account", p, who)
		}
		// The code is not burnt for the browser it was handed to.
		if st, out := attacker.exchange(code); st != http.StatusOK || out["handle"] != "mallory" {
			t.Errorf("the attacker's own exchange: %d %v", st, out)
		}
	})

	t.Run("open redirect", func(t *testing.T) {
		var hits atomic.Int32
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			fmt.Fprint(w, "<!doctype html><title>elsewhere</title>")
		}))
		t.Cleanup(evil.Close)
		elsewhere := strings.TrimPrefix(evil.URL, "http://")
		olga := g.signup("olga")
		for _, next := range []string{"/%09/" + elsewhere + "/", "/%0A/" + elsewhere + "/", "/%09%09/" + elsewhere + "/"} {
			tb := newTab(t, browser, g.srv.URL, axe, "signin-next")
			// The Location of the sign-in's 303, as it came over the wire.
			var mu sync.Mutex
			var locations []string
			go func() {
				for ev, err := range chromedp.Events(tb.ctx, network.ResponseReceivedExtraInfo) {
					if err != nil {
						return
					}
					if ev.StatusCode == http.StatusSeeOther {
						mu.Lock()
						locations = append(locations, fmt.Sprint(ev.Headers["Location"]))
						mu.Unlock()
					}
				}
			}()
			tb.open("/console/signin?next=" + next)
			tb.fill(`#key`, olga.humanKey)
			tb.step("sign in", chromedp.Click(chromedp.CSS(`#signin-key button`), chromedp.NodeVisible))
			tb.waitJS(`document.readyState === "complete" && location.pathname !== "/console/signin"`)
			mu.Lock()
			got := append([]string(nil), locations...)
			mu.Unlock()
			if len(got) != 1 {
				t.Fatalf("next=%s: the sign-in answered %d redirects (%q), want one", next, len(got), got)
			}
			// Read by the browser's own URL parser, and followed as a
			// link would be (the console's form-action policy may stop
			// a form's redirect in this browser; not in every one).
			q, _ := json.Marshal(got[0])
			if o := evalIn[string](tb, fmt.Sprintf(`new URL(%s, location.href).origin`, q)); o != g.srv.URL {
				t.Errorf("next=%s: the sign-in redirects to %q, which the browser reads as origin %s", next, got[0], o)
			}
			tb.step("follow the redirect", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.assign(%s)`, q)))
			tb.waitJS(`document.readyState === "complete"`)
			if o := evalIn[string](tb, `location.origin`); o != g.srv.URL {
				t.Errorf("next=%s: following the sign-in's redirect, the browser is at %s%s", next, o, tb.path())
			}
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("the other origin was visited %d times", n)
		}
	})
}
