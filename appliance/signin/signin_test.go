package signin_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/github"
	"holon.dev/holon/appliance/githubtest"
	"holon.dev/holon/appliance/origin"
	"holon.dev/holon/appliance/ratelimit"
	"holon.dev/holon/appliance/signin"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
	"holon.dev/holon/kv"
)

// room is the sign-in room alone on a store, its routes on a router of
// their own, signed in to a fake GitHub, on a clock the test moves.
type room struct {
	t        *testing.T
	store    holon.Store
	accounts *accounts.Repo
	svc      *signin.Service
	gh       *githubtest.Server
	srv      *httptest.Server
	mu       sync.Mutex
	now      time.Time
}

const adminKey = "an-admin-key-of-at-least-32-characters-long"

func newRoom(t *testing.T) *room {
	t.Helper()
	rm := &room{t: t, now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	store, err := kv.OpenStore(filepath.Join(t.TempDir(), "holon.db"), holon.StoreOptions{NoSync: true, Now: rm.clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	engine := gateway.New(gateway.Config{Store: store, Registry: gateway.NewRegistry(), Now: rm.clock, Logger: slog.New(slog.DiscardHandler)})
	rm.store = store
	rm.accounts = accounts.New(accounts.Config{Store: store, Engine: engine, Now: rm.clock, Rand: rand.Reader})
	rm.gh = githubtest.New()
	t.Cleanup(rm.gh.Close)
	rm.svc = signin.New(signin.Config{
		Store: store, Accounts: rm.accounts, Origin: origin.New("", false),
		GitHub:  github.New(github.Options{URL: rm.gh.URL, APIURL: rm.gh.APIURL, ClientID: rm.gh.ClientID, ClientSecret: rm.gh.ClientSecret, Now: rm.clock}),
		Signups: ratelimit.NewSet(ratelimit.Limit{Rate: 1, Burst: 100}, 100, rm.clock), AdminKey: token.Sum(adminKey),
		Now: rm.clock, Rand: rand.Reader, Log: slog.New(slog.DiscardHandler),
	})
	router := web.NewRouter()
	rm.svc.Mount(&auth.Mount{Router: router, Chain: auth.NewChain(false), Log: slog.New(slog.DiscardHandler)})
	rm.srv = httptest.NewServer(router)
	t.Cleanup(rm.srv.Close)
	return rm
}

func (rm *room) clock() time.Time {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return rm.now
}

func (rm *room) advance(d time.Duration) {
	rm.mu.Lock()
	rm.now = rm.now.Add(d)
	rm.mu.Unlock()
}

// browser is one browser: its own cookies, redirects taken one at a time.
type browser struct {
	rm     *room
	client *http.Client
}

func (rm *room) browser() *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		rm.t.Fatal(err)
	}
	return &browser{rm: rm, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// redirect GETs u, wanting a 302, and returns its Location.
func (b *browser) redirect(u string) string {
	b.rm.t.Helper()
	resp, err := b.client.Get(u)
	if err != nil {
		b.rm.t.Fatalf("GET %s: %v", u, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		b.rm.t.Fatalf("GET %s: %d, want 302", u, resp.StatusCode)
	}
	return resp.Header.Get("Location")
}

// startAndAuthorize starts a sign-in and passes GitHub's page: the
// callback URL GitHub sends this browser back to.
func (b *browser) startAndAuthorize() string {
	b.rm.t.Helper()
	cb := b.redirect(b.redirect(b.rm.srv.URL + "/v0/auth/github"))
	if !strings.Contains(cb, "/v0/auth/github/callback?") {
		b.rm.t.Fatalf("GitHub sent the browser to %q, want the callback", cb)
	}
	return cb
}

// callback follows GitHub's redirect back and returns the console's
// fragment: "login=<code>" or "login_error=<reason>".
func (b *browser) callback(cb string) string {
	b.rm.t.Helper()
	loc := b.redirect(cb)
	console, frag, ok := strings.Cut(loc, "#")
	if !ok || console != "/console" {
		b.rm.t.Fatalf("the callback sent the browser to %q, want /console#…", loc)
	}
	return frag
}

// code is the login code of a "login=<code>" fragment.
func (b *browser) code(frag string) string {
	b.rm.t.Helper()
	c, ok := strings.CutPrefix(frag, "login=")
	if !ok {
		b.rm.t.Fatalf("the sign-in ended with %q, want login=<code>", frag)
	}
	c, err := url.QueryUnescape(c)
	if err != nil {
		b.rm.t.Fatal(err)
	}
	return c
}

// exchange trades a login code with this browser's cookies.
func (b *browser) exchange(code string) (int, map[string]any) {
	b.rm.t.Helper()
	body, _ := json.Marshal(map[string]string{"code": code})
	resp, err := b.client.Post(b.rm.srv.URL+"/v0/auth/exchange", "application/json", bytes.NewReader(body))
	if err != nil {
		b.rm.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		b.rm.t.Fatalf("decode the exchange's answer: %v", err)
	}
	return resp.StatusCode, out
}

func errorCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// Ensure that a login code is traded only by the browser the callback
// handed it to: another browser, whether it has no login cookie or one
// of its own sign-in, gets 403 login_code_other_browser and burns
// nothing; the browser it belongs to then trades it once for a human
// key, and a second trade is login_code_invalid.
func TestExchange_BoundToTheBrowser(t *testing.T) {
	rm := newRoom(t)
	rm.gh.AddUser(7, "ada", "ada@users.example.com", true)
	rm.gh.AddUser(8, "mallory", "mallory@users.example.com", true)

	rm.gh.SignIn("mallory")
	attacker := rm.browser()
	code := attacker.code(attacker.callback(attacker.startAndAuthorize()))

	// The victim, with a sign-in of its own (its own login cookie).
	rm.gh.SignIn("ada")
	victim := rm.browser()
	own := victim.code(victim.callback(victim.startAndAuthorize()))
	for name, b := range map[string]*browser{"no login cookie": rm.browser(), "its own login cookie": victim} {
		if status, out := b.exchange(code); status != http.StatusForbidden || errorCode(out) != signin.CodeLoginCodeOtherBrowser {
			t.Errorf("another browser, %s: %d %v, want 403 %s", name, status, out, signin.CodeLoginCodeOtherBrowser)
		}
	}
	status, out := attacker.exchange(code)
	if status != http.StatusOK || out["handle"] != "mallory" || !strings.HasPrefix(str(out["human_key"]), "hlk_h_") {
		t.Fatalf("the browser the code was handed to: %d %v, want mallory's human key", status, out)
	}
	if status, out := attacker.exchange(code); status != http.StatusBadRequest || errorCode(out) != signin.CodeLoginCodeInvalid {
		t.Errorf("the code traded again: %d %v, want 400 %s", status, out, signin.CodeLoginCodeInvalid)
	}
	if status, out := victim.exchange(own); status != http.StatusOK || out["handle"] != "ada" {
		t.Errorf("the victim's own code: %d %v, want ada's keys", status, out)
	}
}

// Ensure that a login code lasts 2 minutes: traded later by its own
// browser, it is login_code_expired.
func TestExchange_Expires(t *testing.T) {
	rm := newRoom(t)
	rm.gh.AddUser(7, "ada", "ada@users.example.com", true)
	rm.gh.SignIn("ada")
	b := rm.browser()
	code := b.code(b.callback(b.startAndAuthorize()))
	rm.advance(2*time.Minute + time.Second)
	if status, out := b.exchange(code); status != http.StatusBadRequest || errorCode(out) != signin.CodeLoginCodeExpired {
		t.Errorf("a code 2 min 1 s old: %d %v, want 400 %s", status, out, signin.CodeLoginCodeExpired)
	}
}

// Ensure that the callback compares the state GitHub returns with the
// browser's own state cookie: a browser whose cookie holds another state
// (a sign-in of its own under way) is refused with state_mismatch, its
// own sign-in still finishes, and the browser that started the first one
// finishes it.
func TestCallback_StateOfAnotherBrowser(t *testing.T) {
	rm := newRoom(t)
	rm.gh.AddUser(7, "ada", "ada@users.example.com", true)
	rm.gh.SignIn("ada")
	first, second := rm.browser(), rm.browser()
	firstCB, secondCB := first.startAndAuthorize(), second.startAndAuthorize()
	if frag := second.callback(firstCB); frag != "login_error=state_mismatch" {
		t.Errorf("the first browser's callback in a browser with another state cookie: %q, want login_error=state_mismatch", frag)
	}
	if frag := second.callback(secondCB); !strings.HasPrefix(frag, "login=") {
		t.Errorf("the second browser's own callback after the refusal: %q, want login=<code>", frag)
	}
	if frag := first.callback(firstCB); !strings.HasPrefix(frag, "login=") {
		t.Errorf("the first browser's own callback: %q, want login=<code>", frag)
	}
}

// Ensure what a console session is: a live human key or the admin key
// starts one (an agent key or something else does not), its cookie is
// HttpOnly and names the session, not the key; the session is its key's
// principal until the key is revoked, the session ends or expires; and a
// new sign-in in the same browser replaces the earlier session.
func TestSessions(t *testing.T) {
	rm := newRoom(t)
	ctx := context.Background()
	humanKey, human, err := rm.accounts.DrawKey(token.KindHuman, "ada", "", false)
	if err != nil {
		t.Fatal(err)
	}
	agentKey, agent, err := rm.accounts.DrawKey(token.KindAgent, "ada", "ada/sandbox", false)
	if err != nil {
		t.Fatal(err)
	}
	err = rm.store.Update(ctx, func(tx holon.Tx) error {
		if err := accounts.Put(tx, &accounts.Account{Handle: "ada", Email: "ada@example.com", Created: rm.clock()}); err != nil {
			return err
		}
		if err := accounts.PutKey(tx, human); err != nil {
			return err
		}
		return accounts.PutKey(tx, agent)
	})
	if err != nil {
		t.Fatal(err)
	}
	// start signs in with key and returns the session cookie it set.
	start := func(key string, with *http.Cookie) (*http.Cookie, error) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/console/signin", nil)
		if with != nil {
			r.AddCookie(with)
		}
		if _, err := rm.svc.Start(w, r, key); err != nil {
			return nil, err
		}
		for _, c := range w.Result().Cookies() {
			if c.Name == signin.SessionCookie {
				return c, nil
			}
		}
		t.Fatalf("no %s cookie set", signin.SessionCookie)
		return nil, nil
	}
	principal := func(c *http.Cookie) *auth.Principal {
		t.Helper()
		r := httptest.NewRequest("GET", "/console/", nil)
		r.AddCookie(c)
		p, err := rm.svc.Principal(r)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	for name, key := range map[string]string{"agent key": agentKey, "not a key": "hello", "a human key never issued": "hlk_h_" + strings.Repeat("a", token.BodyLen)} {
		if _, err := start(key, nil); holon.ErrorCode(err) != web.CodeInvalidKey {
			t.Errorf("%s: %v, want %s", name, err, web.CodeInvalidKey)
		}
	}
	c, err := start(humanKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || strings.Contains(humanKey, c.Value) || c.Value == "" {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Lax, a value that is not the key", c)
	}
	if p := principal(c); p == nil || p.Kind != token.KindHuman || p.Account != "ada" {
		t.Fatalf("the session's principal: %+v, want ada's human key", p)
	}
	// A new sign-in in the same browser replaces the earlier session.
	c2, err := start(humanKey, c)
	if err != nil {
		t.Fatal(err)
	}
	if p := principal(c); p != nil {
		t.Errorf("the replaced session: %+v, want none", p)
	}
	if p := principal(c2); p == nil || p.Account != "ada" {
		t.Errorf("the new session: %+v, want ada", p)
	}
	// Ended.
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/console/signout", nil)
	r.AddCookie(c2)
	if err := rm.svc.End(w, r); err != nil {
		t.Fatal(err)
	}
	if p := principal(c2); p != nil {
		t.Errorf("an ended session: %+v, want none", p)
	}
	// Its key revoked.
	c3, err := start(humanKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = rm.store.Update(ctx, func(tx holon.Tx) error {
		_, err := accounts.RevokeLiveKeys(tx, "ada", rm.clock())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := principal(c3); p != nil {
		t.Errorf("the session of a revoked key: %+v, want none", p)
	}
	// The admin key, for SessionTTL.
	ca, err := start(adminKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := principal(ca); p == nil || p.Kind != auth.KindAdmin {
		t.Errorf("the admin key's session: %+v, want the operator", p)
	}
	rm.advance(signin.SessionTTL - time.Second)
	if p := principal(ca); p == nil {
		t.Error("the admin session a second before it expires: none")
	}
	rm.advance(time.Second)
	if p := principal(ca); p != nil {
		t.Errorf("the admin session at its expiry: %+v, want none", p)
	}
}

func str(v any) string { s, _ := v.(string); return s }
