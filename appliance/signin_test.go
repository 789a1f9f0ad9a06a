package appliance_test

import (
	"bytes"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/signin"
	"holon.dev/holon/appliance/web"
)

// Ensure that a first sign-in with GitHub creates the account (handle =
// the login in lowercase) with a 30-day human key and an agent key, that
// the state cookie is HttpOnly and SameSite=Lax, that a second sign-in
// finds the same account by its GitHub id and mints a new human key only,
// and that the GitHub token is kept nowhere.
func TestSignIn_GitHub_Success(t *testing.T) {
	g := newGitHubApp(t)
	g.gh.AddUser(4242, "Octo-Cat", "octo@users.example.com", true)
	g.gh.SignIn("Octo-Cat")
	b := g.newBrowser()
	resp, loc := b.get(g.srv.URL + "/v0/auth/github")
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("start: %d", resp.StatusCode)
	}
	cookies := resp.Header.Values("Set-Cookie")
	if len(cookies) != 1 || !containsAll(cookies[0], "holon_github_state=", "HttpOnly", "SameSite=Lax", "Max-Age=600") || strings.Contains(cookies[0], "Secure") {
		t.Errorf("state cookie %q: want HttpOnly, SameSite=Lax, 10 minutes, not Secure on http", cookies)
	}
	au, _ := url.Parse(loc)
	state := au.Query().Get("state")
	if len(state) < 40 || !strings.Contains(cookies[0], "="+state+";") || au.Query().Get("redirect_uri") != g.srv.URL+"/v0/auth/github/callback" {
		t.Errorf("authorize URL %s: want the cookie's state and the callback", loc)
	}
	code := g.loginCode(b.callback(b.authorize(loc)))
	out := b.mustExchange(code)
	if out["handle"] != "octo-cat" || out["new_account"] != true || out["mandate"] != "octo-cat/sandbox" {
		t.Fatalf("exchange: %v", out)
	}
	exp, _ := time.Parse(time.RFC3339, str(out["expires"]))
	if want := g.clock.Now().Add(30 * 24 * time.Hour); !exp.Equal(want) {
		t.Errorf("human key expires %v, want %v", exp, want)
	}
	human, agent := g.as(str(out["human_key"])), g.as(str(out["agent_key"]))
	me := human.must(http.StatusOK, "GET", "/v0/me", nil)
	if gh, _ := me["github"].(map[string]any); me["email"] != "octo@users.example.com" || me["kind"] != "human" || gh["login"] != "Octo-Cat" || gh["id"] != float64(4242) {
		t.Errorf("GET /v0/me: %v", me)
	}
	if me := agent.must(http.StatusOK, "GET", "/v0/me", nil); me["kind"] != "agent" {
		t.Errorf("agent key: %v", me)
	}
	again := g.signInAs("Octo-Cat")
	if again["handle"] != "octo-cat" || again["new_account"] != false || again["agent_key"] != nil || again["human_key"] == out["human_key"] {
		t.Errorf("second sign-in: %v, want the same account, a new human key and no agent key", again)
	}
	g.as(str(again["human_key"])).must(http.StatusOK, "GET", "/v0/me", nil)
	// A 30-day key: it stops working after.
	g.advance(30*24*time.Hour + time.Second)
	if st, o := human.do("GET", "/v0/me", nil); st != http.StatusUnauthorized || errorCode(o) != web.CodeInvalidKey {
		t.Errorf("after 30 days: %d %v", st, o)
	}
	if code := errorCode(agent.must(http.StatusOK, "GET", "/v0/me", nil)); code != "" {
		t.Errorf("the agent key does not expire: %s", code)
	}
	// The GitHub tokens the fake issued are in no store byte.
	tokens := g.gh.Tokens()
	if len(tokens) != 2 {
		t.Fatalf("tokens issued: %d", len(tokens))
	}
	g.shutdown(true)
	raw, err := os.ReadFile(g.cfg.DB)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range tokens {
		if bytes.Contains(raw, []byte(tok)) || strings.Contains(g.logs.String(), tok) {
			t.Errorf("the GitHub token %s… is stored or logged", tok[:8])
		}
	}
	for _, key := range []string{str(out["human_key"]), str(out["agent_key"])} {
		if bytes.Contains(raw, []byte(key)) {
			t.Errorf("a key is stored in clear")
		}
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// Ensure that the state is accepted once, from the browser that started
// the sign-in only, within 10 minutes: a replayed state, a state from
// another browser (with no cookie, or with a cookie of its own sign-in)
// and an expired state each end on the console with their reason, and a
// refused callback burns neither the state of the browser that started
// nor the other browser's own.
func TestSignIn_GitHub_State(t *testing.T) {
	g := newGitHubApp(t)
	g.gh.AddUser(7, "ada", "ada@users.example.com", true)
	g.gh.SignIn("ada")

	b := g.newBrowser()
	cb := b.authorize(b.start())
	if frag := g.newBrowser().callback(cb); frag != "login_error=state_mismatch" {
		t.Errorf("another browser: %q, want login_error=state_mismatch", frag)
	}
	// Another browser with a sign-in of its own under way: its cookie
	// holds another state. Refused, and its own sign-in still finishes.
	other := g.newBrowser()
	otherCB := other.authorize(other.start())
	if frag := other.callback(cb); frag != "login_error=state_mismatch" {
		t.Errorf("another browser with its own state cookie: %q, want login_error=state_mismatch", frag)
	}
	if frag := other.callback(otherCB); !strings.HasPrefix(frag, "login=") {
		t.Errorf("the other browser's own sign-in, after a refused callback: %q", frag)
	}
	u, _ := url.Parse(cb)
	cookieURL, _ := url.Parse(g.srv.URL + "/v0/auth/github")
	saved := b.client.Jar.Cookies(cookieURL)
	if frag := b.callback(cb); !strings.HasPrefix(frag, "login=") {
		t.Fatalf("the browser that started: %q", frag)
	}
	// Replayed, cookie and all.
	b.client.Jar.SetCookies(cookieURL, saved)
	if frag := b.callback(cb); frag != "login_error=state_invalid" {
		t.Errorf("replayed state: %q, want login_error=state_invalid", frag)
	}
	// A state of our making, with a matching cookie: never issued.
	forged := u.Query()
	forged.Set("state", "forged-state")
	b.client.Jar.SetCookies(cookieURL, []*http.Cookie{{Name: "holon_github_state", Value: "forged-state"}})
	if frag := b.callback(g.srv.URL + "/v0/auth/github/callback?" + forged.Encode()); frag != "login_error=state_invalid" {
		t.Errorf("forged state: %q", frag)
	}
	// Expired: the 10 minutes run out between start and callback.
	b2 := g.newBrowser()
	cb2 := b2.authorize(b2.start())
	g.advance(10*time.Minute + time.Second)
	if frag := b2.callback(cb2); frag != "login_error=state_expired" {
		t.Errorf("expired state: %q, want login_error=state_expired", frag)
	}
	// A code GitHub never issued, with a good state: GitHub refuses it.
	b4 := g.newBrowser()
	cb4, _ := url.Parse(b4.authorize(b4.start()))
	q4 := cb4.Query()
	q4.Set("code", "forged-code")
	if frag := b4.callback(g.srv.URL + cb4.Path + "?" + q4.Encode()); frag != "login_error=github_error" {
		t.Errorf("forged code: %q, want login_error=github_error", frag)
	}
	// The user refuses on GitHub.
	g.gh.SetDeny(true)
	b3 := g.newBrowser()
	if frag := b3.callback(b3.authorize(b3.start())); frag != "login_error=access_denied" {
		t.Errorf("denied: %q", frag)
	}
}

// Ensure that a state handed out before a restart is still accepted after
// it (sign-in state is stored).
func TestSignIn_GitHub_AcrossRestart(t *testing.T) {
	// A public origin keeps the callback URL the same across the restart.
	g := newGitHubApp(t, func(c *appliance.Config) { c.PublicURL = "http://gateway.test" })
	g.gh.AddUser(8, "grace", "grace@users.example.com", true)
	g.gh.SignIn("grace")
	b := g.newBrowser()
	authorize := b.start()
	g.restart()
	cb := b.authorize(authorize)
	// The restarted gateway listens elsewhere: the callback goes there.
	u, _ := url.Parse(cb)
	code := g.loginCode(b.callback(g.srv.URL + u.Path + "?" + u.RawQuery))
	g.restart()
	b.mustExchange(code)
}

// Ensure that a login code is traded once, within 2 minutes, by the
// browser the callback handed it to only: another browser, with no login
// cookie or with its own, is refused (the login CSRF: a link to
// /console#login=<someone else's code>) without burning the code.
func TestSignIn_GitHub_ExchangeCode(t *testing.T) {
	g := newGitHubApp(t)
	g.gh.AddUser(9, "linus", "linus@users.example.com", true)
	g.gh.SignIn("linus")
	b := g.newBrowser()
	code := g.loginCode(b.callback(b.authorize(b.start())))
	other := g.newBrowser()
	g.loginCode(other.callback(other.authorize(other.start()))) // its own cookie, its own code
	if st, out := g.anonymous().do("POST", "/v0/auth/exchange", map[string]any{"code": code}); st != http.StatusForbidden || errorCode(out) != signin.CodeLoginCodeOtherBrowser || out["human_key"] != nil {
		t.Errorf("another browser (no login cookie): %d %v, want 403 %s", st, out, signin.CodeLoginCodeOtherBrowser)
	}
	if st, out := other.exchange(code); st != http.StatusForbidden || errorCode(out) != signin.CodeLoginCodeOtherBrowser || out["human_key"] != nil {
		t.Errorf("another browser (its own login cookie): %d %v, want 403 %s", st, out, signin.CodeLoginCodeOtherBrowser)
	}
	b.mustExchange(code)
	st, out := b.exchange(code)
	if st != http.StatusBadRequest || errorCode(out) != signin.CodeLoginCodeInvalid {
		t.Errorf("reused code: %d %v", st, out)
	}
	code2 := g.loginCode(b.callback(b.authorize(b.start())))
	g.advance(2*time.Minute + time.Second)
	st, out = b.exchange(code2)
	if st != http.StatusBadRequest || errorCode(out) != signin.CodeLoginCodeExpired || out["human_key"] != nil {
		t.Errorf("expired code: %d %v", st, out)
	}
	st, out = b.exchange(code2)
	if st != http.StatusBadRequest || errorCode(out) != signin.CodeLoginCodeInvalid {
		t.Errorf("expired code, again: %d %v", st, out)
	}
	if st, out := g.anonymous().do("POST", "/v0/auth/exchange", map[string]any{}); st != http.StatusBadRequest || !strings.Contains(str(out), "code is required") {
		t.Errorf("no code: %d %v", st, out)
	}
}

// Ensure that an account made by email is linked, not duplicated, when
// GitHub has verified the same email (its signup's keys revoked); that an unverified email links
// nothing; and that a taken or reserved login is refused with its reason.
func TestSignIn_GitHub_EmailLinking(t *testing.T) {
	g := newGitHubApp(t)
	ada := g.signup("ada")
	g.gh.AddUser(11, "ada-gh", "unverified@example.com", false)
	g.gh.SignIn("ada-gh")
	b := g.newBrowser()
	if frag := b.callback(b.authorize(b.start())); frag != "login_error=email_unverified" {
		t.Errorf("unverified email: %q", frag)
	}
	g.gh.AddUser(12, "Ada-Lovelace", "ADA@example.com", true)
	out := g.signInAs("Ada-Lovelace")
	if out["handle"] != "ada" || out["new_account"] != false || out["agent_key"] != nil {
		t.Fatalf("linking: %v, want the email account ada", out)
	}
	if me := g.as(str(out["human_key"])).must(http.StatusOK, "GET", "/v0/me", nil); me["handle"] != "ada" {
		t.Errorf("linked key: %v", me)
	}
	// The signup never proved the email: its keys stop working
	// (TestSignIn_GitHub_ClaimRevokesEarlierKeys).
	if st, o := ada.human.do("GET", "/v0/me", nil); st != http.StatusUnauthorized {
		t.Errorf("the signup's key after the link: %d %v, want 401", st, o)
	}
	// Another GitHub account with the same email cannot take the account.
	g.gh.AddUser(13, "ada-impostor", "ada@example.com", true)
	g.gh.SignIn("ada-impostor")
	if frag := b.callback(b.authorize(b.start())); frag != "login_error=email_linked_elsewhere" {
		t.Errorf("second GitHub account, same email: %q", frag)
	}
	// The login maps to a handle that is taken (by ada's email account) or reserved.
	g.gh.AddUser(14, "ADA", "other@example.com", true)
	g.gh.SignIn("ADA")
	if frag := b.callback(b.authorize(b.start())); frag != "login_error=handle_taken" {
		t.Errorf("handle taken: %q", frag)
	}
	g.gh.AddUser(15, "admin", "root@example.com", true)
	g.gh.SignIn("admin")
	if frag := b.callback(b.authorize(b.start())); frag != "login_error=handle_taken" {
		t.Errorf("reserved handle: %q", frag)
	}
}

// Ensure that a disabled account gets no key: neither from a new sign-in
// nor from a code minted just before it was disabled.
func TestSignIn_GitHub_DisabledAccount(t *testing.T) {
	g := newGitHubApp(t)
	g.author(21, "mallory")
	g.gh.SignIn("mallory")
	b := g.newBrowser()
	code := g.loginCode(b.callback(b.authorize(b.start())))
	g.admin().must(http.StatusOK, "POST", "/v0/admin/accounts/mallory/disable", map[string]any{"reason": "spam"})
	st, out := b.exchange(code)
	if st != http.StatusForbidden || errorCode(out) != accounts.CodeAccountDisabled || out["human_key"] != nil {
		t.Errorf("code minted before the disable: %d %v", st, out)
	}
	if frag := b.callback(b.authorize(b.start())); frag != "login_error=account_disabled" {
		t.Errorf("sign-in of a disabled account: %q", frag)
	}
}

// Ensure that GitHub being down (a 503 from it) ends the sign-in cleanly
// on the console, and that without a GitHub app sign-in answers 503 with
// its code while the rest of the gateway serves.
func TestSignIn_GitHub_Unavailable(t *testing.T) {
	g := newGitHubApp(t)
	g.gh.AddUser(31, "ken", "ken@users.example.com", true)
	g.gh.SignIn("ken")
	b := g.newBrowser()
	cb := b.authorize(b.start())
	g.gh.SetDown(true)
	if frag := b.callback(cb); frag != "login_error=github_unavailable" {
		t.Errorf("GitHub down: %q", frag)
	}
	g.anonymous().must(http.StatusOK, "GET", "/healthz", nil)
	g.gh.SetDown(false)
	if frag := b.callback(b.authorize(b.start())); !strings.HasPrefix(frag, "login=") {
		t.Errorf("GitHub back: %q", frag)
	}

	off := newHostedApp(t)
	for _, req := range []struct{ method, path string }{
		{"GET", "/v0/auth/github"}, {"POST", "/v0/auth/exchange"}, {"POST", "/v0/agents"},
	} {
		st, out := off.anonymous().do(req.method, req.path, nil)
		if req.path == "/v0/agents" {
			st, out = off.signup("pat").human.do(req.method, req.path, map[string]any{})
		}
		if st != http.StatusServiceUnavailable || errorCode(out) != signin.CodeGitHubNotConfigured || !strings.Contains(str(out), "HOLON_GITHUB_CLIENT_ID") {
			t.Errorf("%s %s without a GitHub app: %d %v", req.method, req.path, st, out)
		}
	}
	off.anonymous().must(http.StatusOK, "GET", "/v0/agents", nil)
}

// Ensure that sign-ins that create accounts count against the signups'
// rate limit of the address, and returning sign-ins do not.
func TestSignIn_GitHub_SignupRateLimit(t *testing.T) {
	g := newGitHubApp(t, func(c *appliance.Config) {
		c.Limits.Signup = appliance.Limit{Rate: rate.Every(time.Hour), Burst: 1}
	})
	g.author(41, "first")
	g.gh.AddUser(42, "second", "second@users.example.com", true)
	g.gh.SignIn("second")
	b := g.newBrowser()
	if frag := b.callback(b.authorize(b.start())); frag != "login_error=rate_limited" {
		t.Errorf("a second new account from the address: %q", frag)
	}
	if out := g.signInAs("first"); out["handle"] != "first" {
		t.Errorf("a returning sign-in: %v", out)
	}
}
