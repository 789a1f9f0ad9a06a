package appliance_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/signin"
	"holon.dev/holon/backup/pgtest"
)

// balancedPair is two hosted gateways on one PostgreSQL store behind one
// public URL: a load balancer (lb) sends each request to the gateway the
// test routes it to, as a deployment of several gateways behind one name
// sees it. Both gateways read one clock, and each keeps its own listener
// (srv) besides, which the API clients use.
type balancedPair struct {
	a, b   *hostedApp
	lb     *httptest.Server
	public string
	clock  *fixedClock

	mu     sync.Mutex
	to     *hostedApp
	served map[*hostedApp]int
}

func newBalancedPair(t *testing.T, db string) *balancedPair {
	t.Helper()
	url := pgtest.Start(t).CreateDB(t, db)
	g := &balancedPair{clock: &fixedClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}, served: map[*hostedApp]int{}}
	g.lb = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		to := g.to
		g.served[to]++
		g.mu.Unlock()
		to.app.Handler().ServeHTTP(w, r)
	}))
	g.public = "http://" + g.lb.Listener.Addr().String()
	same := func(c *appliance.Config) {
		c.PublicURL = g.public
		c.Now = g.clock.Now
	}
	g.a = newHostedApp(t, onPostgres(url), same)
	g.b = newHostedApp(t, onPostgres(url), same)
	g.to = g.a
	g.lb.Start()
	t.Cleanup(g.lb.Close) // before the gateways close
	return g
}

// route sends the load balancer's next requests to ta.
func (g *balancedPair) route(ta *hostedApp) {
	g.mu.Lock()
	g.to = ta
	g.mu.Unlock()
}

// servedBoth fails the test unless each gateway served requests through
// the load balancer.
func (g *balancedPair) servedBoth(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.served[g.a] == 0 || g.served[g.b] == 0 {
		t.Errorf("the load balancer sent %d requests to A and %d to B, want both", g.served[g.a], g.served[g.b])
	}
}

func (g *balancedPair) advance(d time.Duration) {
	g.clock.mu.Lock()
	g.clock.now = g.clock.now.Add(d)
	g.clock.mu.Unlock()
}

// signIn signs a new browser in with a key through the load balancer, on
// the gateway routed to.
func (g *balancedPair) signIn(t *testing.T, key string) *browser {
	t.Helper()
	br := newBrowser(t, g.lb.URL)
	br.get("/console/signin")
	if resp, body := br.post("/console/signin", url.Values{"key": {key}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d\n%s", resp.StatusCode, body)
	}
	return br
}

// replay is a new browser that carries only a session cookie.
func (g *balancedPair) replay(t *testing.T, session string) *browser {
	br := newBrowser(t, g.lb.URL)
	u, _ := url.Parse(g.lb.URL)
	br.c.Jar.SetCookies(u, []*http.Cookie{{Name: signin.SessionCookie, Value: session}})
	return br
}

// signedIn reports whether a browser's session opens the console's
// overview as handle, and fails the test on any other answer than that or
// the redirect to sign in.
func signedIn(t *testing.T, br *browser, handle string) bool {
	t.Helper()
	resp, body := br.get("/console/")
	switch {
	case resp.StatusCode == http.StatusOK && strings.Contains(body, handle+"/sandbox"):
		return true
	case resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/console/signin"):
		return false
	}
	t.Fatalf("console overview: %d %s\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	return false
}

// Ensure that on two gateways sharing one PostgreSQL store behind one
// public URL a console session is the store's, not a process's: a signup
// on one gateway opens the console on the other; signing out on either
// ends it on both; a sign-in on one replaces the browser's session made
// on the other; a session's expiry ends it on both; and revoking the key
// through one gateway ends its session on the other.
func TestConsole_SessionSharedAcrossGateways(t *testing.T) {
	g := newBalancedPair(t, "sessions")
	br := newBrowser(t, g.lb.URL)

	// Signup on A; the session works on B.
	g.route(g.a)
	br.get("/console/signin")
	resp, body := br.post("/console/signup", url.Values{"handle": {"ada"}, "email": {"ada@example.com"}})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("signup on A: %d\n%s", resp.StatusCode, body)
	}
	keys := keyInPage.FindAllStringSubmatch(body, -1)
	if len(keys) != 2 {
		t.Fatalf("signup page shows %d keys, want 2", len(keys))
	}
	humanKey := keys[0][1]
	first := br.cookie(signin.SessionCookie)
	if first == "" {
		t.Fatal("the signup on A set no session cookie")
	}
	g.route(g.b)
	if !signedIn(t, br, "ada") {
		t.Fatal("a session started on A does not open the console on B")
	}

	// Sign out on B ends the session on A.
	if resp, _ := br.post("/console/signout", url.Values{}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out on B: %d", resp.StatusCode)
	}
	g.route(g.a)
	if signedIn(t, g.replay(t, first), "ada") {
		t.Error("a session signed out on B still opens the console on A")
	}

	// A sign-in on B works on A; signing in again on A (the same browser)
	// replaces B's session on B too.
	g.route(g.b)
	br = g.signIn(t, humanKey)
	onB := br.cookie(signin.SessionCookie)
	g.route(g.a)
	if !signedIn(t, br, "ada") {
		t.Fatal("a session started on B does not open the console on A")
	}
	br.get("/console/signin")
	if resp, _ := br.post("/console/signin", url.Values{"key": {humanKey}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in again on A: %d", resp.StatusCode)
	}
	if br.cookie(signin.SessionCookie) == onB {
		t.Fatal("signing in again kept the session id")
	}
	g.route(g.b)
	if signedIn(t, g.replay(t, onB), "ada") {
		t.Error("a session replaced by a sign-in on A still opens the console on B")
	}
	if !signedIn(t, br, "ada") {
		t.Error("the session that replaced it, started on A, does not open the console on B")
	}

	// A session ends at its expiry on both.
	g.advance(signin.SessionTTL + time.Second)
	for _, ta := range []*hostedApp{g.a, g.b} {
		g.route(ta)
		if signedIn(t, br, "ada") {
			t.Errorf("an expired session still opens the console on %s", nameOf(g, ta))
		}
	}

	// Revoking the key through B ends the session started on A.
	g.route(g.a)
	br = g.signIn(t, humanKey)
	g.route(g.b)
	if !signedIn(t, br, "ada") {
		t.Fatal("a new session started on A does not open the console on B")
	}
	g.b.as(humanKey).must(http.StatusOK, "DELETE", "/v0/keys/"+humanKey[:14], nil)
	g.route(g.a)
	if signedIn(t, br, "ada") {
		t.Error("the session of a key revoked through B still opens the console on A")
	}
	g.servedBoth(t)
}

func nameOf(g *balancedPair, ta *hostedApp) string {
	if ta == g.a {
		return "A"
	}
	return "B"
}

// Ensure that on two gateways sharing one PostgreSQL store behind one
// public URL the /mcp authorization server's state is the store's: a
// client registered on A is known on B; a console session started on A
// shows B's consent page; a code issued by A is traded at B's token
// endpoint once, a second trade (at A, or at B of a code traded at A)
// fails, and so does one of two trades sent to both at once; the access
// token works on both gateways' /mcp; a refresh at B works on A, where the
// token it replaced stops; and a code presented again at A revokes what B
// issued for it.
func TestOAuth_SharedAcrossGateways(t *testing.T) {
	g := newBalancedPair(t, "oauth")
	ann := g.a.signup("ann")
	f := newOAuthFlow(g.a, ann) // registered on A
	f.issuer = g.public
	atB := *f
	atB.ta = g.b

	// The human consents in the console: the page on B, the form on A.
	br := g.signIn(t, ann.humanKey) // on A
	g.route(g.b)
	q := f.consentQuery()
	resp, body := br.get("/console/connect?" + q.Encode())
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Test Client") {
		t.Fatalf("consent page on B, signed in on A: %d %s\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	g.route(g.a)
	form := f.consentQuery()
	form.Set("decision", "allow")
	form.Set("mandate", "ann/sandbox")
	resp, _ = br.post("/console/connect", form)
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc == nil || loc.Query().Get("iss") != g.public || !strings.HasPrefix(loc.Query().Get("code"), "hlk_c_") {
		t.Fatalf("consent on A: %d %v", resp.StatusCode, loc)
	}
	code := loc.Query().Get("code")

	// Traded at B; the token works on both.
	status, out := atB.exchange(code, f.verifier)
	if status != http.StatusOK {
		t.Fatalf("a code issued by A, traded at B: %d %v", status, out)
	}
	access, refresh := str(out["access_token"]), str(out["refresh_token"])
	for _, ta := range []*hostedApp{g.b, g.a} {
		if status, www, body := mcpInit(t, ta.srv.URL, access); status != http.StatusOK {
			t.Errorf("/mcp on %s with the token B issued: %d %q %s", nameOf(g, ta), status, www, body)
		}
	}
	// A refresh at B; the token it replaced stops on A, the new one works.
	status, out = atB.refresh(refresh)
	if status != http.StatusOK {
		t.Fatalf("refresh at B: %d %v", status, out)
	}
	refreshed := str(out["access_token"])
	if status, _, _ := mcpInit(t, g.a.srv.URL, access); status != http.StatusUnauthorized {
		t.Errorf("/mcp on A with the token replaced by a refresh at B: %d, want 401", status)
	}
	if status, _, body := mcpInit(t, g.a.srv.URL, refreshed); status != http.StatusOK {
		t.Errorf("/mcp on A with the token refreshed at B: %d %s", status, body)
	}
	// The code again, at A: refused, and what B issued for it is revoked.
	if status, out := f.exchange(code, f.verifier); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Errorf("a code traded at B, traded again at A: %d %v, want 400 invalid_grant", status, out)
	}
	if status, _, _ := mcpInit(t, g.b.srv.URL, refreshed); status != http.StatusUnauthorized {
		t.Errorf("/mcp on B after the code came back at A: %d, want 401", status)
	}

	// A code traded at A is refused at B.
	code = f.authorize("ann/sandbox")
	if status, out := f.exchange(code, f.verifier); status != http.StatusOK {
		t.Fatalf("a code traded at A: %d %v", status, out)
	}
	if status, out := atB.exchange(code, f.verifier); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Errorf("a code traded at A, traded again at B: %d %v, want 400 invalid_grant", status, out)
	}

	// One code sent to both token endpoints at once: one trade only.
	trade := func(ta *hostedApp, code string) (int, string) {
		form := url.Values{"grant_type": {"authorization_code"}, "client_id": {f.clientID}, "code": {code},
			"code_verifier": {f.verifier}, "redirect_uri": {f.redirect}, "resource": {g.public + "/mcp"}}
		resp, err := http.PostForm(ta.srv.URL+"/oauth/token", form)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Errorf("token answer: %d, not JSON: %v", resp.StatusCode, err)
		}
		return resp.StatusCode, str(out["error"])
	}
	for i := 0; i < 5; i++ {
		code := f.authorize("ann/sandbox")
		var wg sync.WaitGroup
		start := make(chan struct{})
		statuses := make([]int, 2)
		errs := make([]string, 2)
		for j, ta := range []*hostedApp{g.a, g.b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				statuses[j], errs[j] = trade(ta, code)
			}()
		}
		close(start)
		wg.Wait()
		ok, refused := 0, 0
		for j := range statuses {
			switch {
			case statuses[j] == http.StatusOK:
				ok++
			case statuses[j] == http.StatusBadRequest && errs[j] == "invalid_grant":
				refused++
			}
		}
		if ok != 1 || refused != 1 {
			t.Errorf("one code traded at A and B at once: A %d %s, B %d %s; want one 200 and one invalid_grant", statuses[0], errs[0], statuses[1], errs[1])
		}
	}
	g.servedBoth(t)
}
