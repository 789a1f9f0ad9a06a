package appliance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/githubtest"
)

// fakeDNS is a resolver the test controls: names map to addresses, and a
// name can be rebound to another address between two lookups.
type fakeDNS struct {
	mu    sync.Mutex
	names map[string][]netip.Addr
}

func newFakeDNS() *fakeDNS { return &fakeDNS{names: map[string][]netip.Addr{}} }

func (d *fakeDNS) set(host string, addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var as []netip.Addr
	for _, a := range addrs {
		as = append(as, netip.MustParseAddr(a))
	}
	d.names[host] = as
}

func (d *fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	as, ok := d.names[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return as, nil
}

// ghApp is a hosted appliance signed in to a fake GitHub, on a clock the
// test moves, resolving names through a fake DNS.
type ghApp struct {
	*hostedApp
	gh    *githubtest.Server
	clock *fixedClock
	dns   *fakeDNS
}

func newGitHubApp(t *testing.T, opts ...func(*appliance.Config)) *ghApp {
	t.Helper()
	gh := githubtest.New()
	t.Cleanup(gh.Close)
	g := &ghApp{gh: gh, clock: &fixedClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}, dns: newFakeDNS()}
	all := append([]func(*appliance.Config){func(c *appliance.Config) {
		c.GitHubClientID, c.GitHubClientSecret = gh.ClientID, gh.ClientSecret
		c.GitHubURL, c.GitHubAPIURL = gh.URL, gh.APIURL
		c.Now = g.clock.Now
		c.FileSecret = testFileSecret
		c.Resolver = g.dns
	}}, opts...)
	g.hostedApp = newHostedApp(t, all...)
	return g
}

func (g *ghApp) advance(d time.Duration) {
	g.clock.mu.Lock()
	g.clock.now = g.clock.now.Add(d)
	g.clock.mu.Unlock()
}

// ghBrowser is one browser: its own cookies, redirects taken one at a time.
type ghBrowser struct {
	g      *ghApp
	client *http.Client
}

func (g *ghApp) newBrowser() *ghBrowser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		g.t.Fatal(err)
	}
	return &ghBrowser{g: g, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// get requests a URL and returns the status and the Location header.
func (b *ghBrowser) get(u string) (*http.Response, string) {
	b.g.t.Helper()
	resp, err := b.client.Get(u)
	if err != nil {
		b.g.t.Fatalf("GET %s: %v", u, err)
	}
	resp.Body.Close()
	return resp, resp.Header.Get("Location")
}

// start opens GET /v0/auth/github and returns GitHub's authorize URL.
func (b *ghBrowser) start() string {
	b.g.t.Helper()
	resp, loc := b.get(b.g.srv.URL + "/v0/auth/github")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, b.g.gh.URL+"/login/oauth/authorize?") {
		b.g.t.Fatalf("GET /v0/auth/github: %d to %q, want a redirect to GitHub", resp.StatusCode, loc)
	}
	return loc
}

// authorize passes GitHub's authorize page and returns the callback URL.
func (b *ghBrowser) authorize(u string) string {
	b.g.t.Helper()
	resp, loc := b.get(u)
	if resp.StatusCode != http.StatusFound || !strings.Contains(loc, "/v0/auth/github/callback?") {
		b.g.t.Fatalf("GitHub authorize: %d to %q, want a redirect to the callback", resp.StatusCode, loc)
	}
	return loc
}

// callback follows GitHub's redirect back and returns the console
// fragment: "login=<code>" or "login_error=<reason>".
func (b *ghBrowser) callback(u string) string {
	b.g.t.Helper()
	resp, loc := b.get(u)
	console, frag, ok := strings.Cut(loc, "#")
	if resp.StatusCode != http.StatusFound || !ok || !strings.HasSuffix(console, "/console") {
		b.g.t.Fatalf("callback: %d to %q, want a redirect to /console#…", resp.StatusCode, loc)
	}
	return frag
}

// exchange trades a login code in this browser (with its cookies), as
// the console's script does, and returns the status and the answer.
func (b *ghBrowser) exchange(code string) (int, map[string]any) {
	b.g.t.Helper()
	body, _ := json.Marshal(map[string]any{"code": code})
	resp, err := b.client.Post(b.g.srv.URL+"/v0/auth/exchange", "application/json", bytes.NewReader(body))
	if err != nil {
		b.g.t.Fatalf("POST /v0/auth/exchange: %v", err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		b.g.t.Fatalf("POST /v0/auth/exchange: decode: %v", err)
	}
	return resp.StatusCode, out
}

// mustExchange trades a login code in this browser, wanting 200.
func (b *ghBrowser) mustExchange(code string) map[string]any {
	b.g.t.Helper()
	status, out := b.exchange(code)
	if status != http.StatusOK {
		b.g.t.Fatalf("POST /v0/auth/exchange: %d %v", status, out)
	}
	return out
}

// loginCode is the code of a "login=<code>" fragment, or fails.
func (g *ghApp) loginCode(frag string) string {
	g.t.Helper()
	code, ok := strings.CutPrefix(frag, "login=")
	if !ok {
		g.t.Fatalf("sign-in ended with %q, want login=<code>", frag)
	}
	c, err := url.QueryUnescape(code)
	if err != nil {
		g.t.Fatal(err)
	}
	return c
}

// signInAs runs the whole flow in a new ghBrowser as a GitHub login and
// returns the exchange's answer.
func (g *ghApp) signInAs(login string) map[string]any {
	g.t.Helper()
	g.gh.SignIn(login)
	b := g.newBrowser()
	code := g.loginCode(b.callback(b.authorize(b.start())))
	return b.mustExchange(code)
}

// author is an account signed in with GitHub: a GitHub user with id,
// login and a verified email, and the human key the sign-in gave.
func (g *ghApp) author(id int64, login string) account {
	g.t.Helper()
	g.gh.AddUser(id, login, strings.ToLower(login)+"@users.example.com", true)
	out := g.signInAs(login)
	hk, _ := out["human_key"].(string)
	ak, _ := out["agent_key"].(string)
	handle, _ := out["handle"].(string)
	return account{handle: handle, human: g.as(hk), agent: g.as(ak), humanKey: hk, agentKey: ak}
}
