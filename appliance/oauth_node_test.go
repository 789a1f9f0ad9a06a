package appliance_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// clientEvent is one line the OAuth client script prints.
type clientEvent struct {
	Event string `json:"event"`
	URL   string `json:"url"`

	ClientID  string `json:"clientId"`
	Discovery struct {
		AuthorizationServer string `json:"authorizationServer"`
		Resource            string `json:"resource"`
	} `json:"discovery"`
	StateRoundTripped bool     `json:"stateRoundTripped"`
	Iss               string   `json:"iss"`
	Code              string   `json:"code"`
	FirstAccess       string   `json:"firstAccess"`
	FirstRefresh      string   `json:"firstRefresh"`
	SecondAccess      string   `json:"secondAccess"`
	SecondRefresh     string   `json:"secondRefresh"`
	ExpiresIn         int      `json:"expiresIn"`
	ProtocolVersion   string   `json:"protocolVersion"`
	Tools             []string `json:"tools"`
	Refresh           string   `json:"refresh"`
	Echo              struct {
		IsError    bool           `json:"isError"`
		Structured map[string]any `json:"structured"`
	} `json:"echo"`
	Budget map[string]any `json:"budget"`
	Forms  []string       `json:"forms"`

	Status                int    `json:"status"`
	WWWAuthenticate       string `json:"wwwAuthenticate"`
	Body                  string `json:"body"`
	Call                  string `json:"call"`
	AskedToAuthorizeAgain bool   `json:"askedToAuthorizeAgain"`
}

// Ensure that an MCP client with no key connects through the gateway's
// own authorization server, driven end to end by the reference
// TypeScript SDK's OAuth client and a real browser: the 401 leads it to
// the metadata, it registers, the human signs in and consents in the
// console (creating a mandate from the short form), the client trades
// the code, lists the tools and makes a billed call under that mandate
// (approved in the client's form, as the human allowed), refreshes its
// tokens, and once the human revokes the key in the
// console its next request is refused. No code or token reaches the logs
// or the store file.
func TestOAuth_TypeScriptClientAndBrowser(t *testing.T) {
	node := needNodeClient(t)
	chromium, axe := needBrowser(t)
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	browser := newHeadless(t, chromium)
	tb := newTab(t, browser, ta.srv.URL, axe, "connect")

	next, stdin := startOAuthNodeClient(t, node, "HOLON_MCP_URL="+ta.srv.URL+"/mcp")

	// The client found the authorization endpoint from the 401 and
	// registered; the human is not signed in, so the console asks first
	// and comes back to the consent page.
	authz := next("authorize")
	u, err := url.Parse(authz.URL)
	if err != nil || !strings.HasPrefix(authz.URL, ta.srv.URL+"/oauth/authorize?") ||
		u.Query().Get("code_challenge_method") != "S256" || u.Query().Get("resource") != ta.srv.URL+"/mcp" {
		t.Fatalf("authorization URL %s", authz.URL)
	}
	tb.step("open the authorization URL", chromedp.Navigate(authz.URL))
	if p := tb.path(); !strings.HasPrefix(p, "/console/signin?next=") {
		t.Fatalf("not signed in: at %s, want the sign-in page", p)
	}
	tb.fill("#key", ann.humanKey)
	if status := tb.click("#signin-key button[type=submit]"); status != 200 {
		t.Fatalf("sign in: status %d", status)
	}
	if p := tb.path(); !strings.HasPrefix(p, "/console/connect?") {
		t.Fatalf("after sign-in: at %s, want the consent page", p)
	}
	if name := tb.text("#client-name"); name != "Holon Test Client" || !strings.Contains(tb.text(".notice"), "self-declared") {
		t.Errorf("consent page names %q: %s", name, tb.text(".notice"))
	}
	tb.check("consent")
	tb.fill("#name", "assistant-app", "#total", "2.00", "#per_call", "0.50", "#approval_above", "0.01", "#allow_agents", "test-lab/*")
	if status := tb.click("#allow"); status != 200 {
		t.Fatalf("allow: status %d", status)
	}
	if got := tb.text("#done"); !strings.Contains(got, "connected") {
		t.Fatalf("the browser did not come back to the client: %q at %s", got, tb.path())
	}

	seen := next("connected")
	if seen.Discovery.AuthorizationServer != ta.srv.URL || seen.Discovery.Resource != ta.srv.URL+"/mcp" || !strings.HasPrefix(seen.ClientID, "hoc_") {
		t.Errorf("discovery %+v, client %q", seen.Discovery, seen.ClientID)
	}
	if !seen.StateRoundTripped || seen.Iss != ta.srv.URL {
		t.Errorf("state round-tripped %v, iss %q", seen.StateRoundTripped, seen.Iss)
	}
	if seen.ExpiresIn != 3600 || seen.ProtocolVersion != "2025-11-25" {
		t.Errorf("expires_in %d, protocol %s", seen.ExpiresIn, seen.ProtocolVersion)
	}
	if got := strings.Join(seen.Tools, " "); got != "call_agent get_agent get_approval get_budget get_receipt list_approvals search_agents" {
		t.Errorf("tools: %s", got)
	}
	e := seen.Echo.Structured
	if seen.Echo.IsError || e["status"] != "succeeded" || obj(e["receipt"])["mandate"] != "ann/assistant-app" {
		t.Errorf("echo under the new mandate: %v", seen.Echo)
	}
	// The call was over the approval threshold, and the human allowed
	// approvals in the client: it asked there.
	if len(seen.Forms) != 1 || !strings.Contains(seen.Forms[0], "test-lab/echo") || !strings.Contains(seen.Forms[0], "ann/assistant-app") {
		t.Errorf("approval forms in the client: %q", seen.Forms)
	}
	if seen.Refresh != "AUTHORIZED" || seen.SecondAccess == seen.FirstAccess || seen.SecondRefresh == seen.FirstRefresh {
		t.Errorf("refresh %q: tokens did not rotate", seen.Refresh)
	}
	if seen.Budget["mandate"] != "ann/assistant-app" || seen.Budget["spent"] != "0.02" {
		t.Errorf("budget after the refresh: %v", seen.Budget)
	}

	me := ann.human.must(200, "GET", "/v0/me", nil)
	var listed map[string]any
	for _, k := range me["keys"].([]any) {
		if obj(k)["client"] == "Holon Test Client" {
			listed = obj(k)
		}
	}
	if listed == nil || listed["mandate"] != "ann/assistant-app" || listed["ask_in_client"] != true || listed["kind"] != "agent" || listed["expires"] == nil {
		t.Errorf("the connection's key in GET /v0/me: %v", me["keys"])
	}

	// The key is listed on the mandate's page under the client's name;
	// revoke it there.
	tb.open("/console/mandates/ann/assistant-app")
	if row := tb.text("[data-client]"); row != "connected by Holon Test Client" {
		t.Errorf("key row: %q", row)
	}
	tb.click("form[action^='/console/keys/'] button")
	if _, err := stdin.Write([]byte("revoked\n")); err != nil {
		t.Fatal(err)
	}
	done := next("done")
	if done.Status != 401 || !strings.Contains(done.Body, "revoked") || !strings.Contains(done.WWWAuthenticate, "resource_metadata=") {
		t.Errorf("after revocation: %d %q %s", done.Status, done.WWWAuthenticate, done.Body)
	}
	if !strings.HasPrefix(done.Call, "UnauthorizedError") || !done.AskedToAuthorizeAgain {
		t.Errorf("the client's next call: %s (asked to authorize again: %v)", done.Call, done.AskedToAuthorizeAgain)
	}
	if b := ann.balance(); b != "4.98" {
		t.Errorf("balance %s, want 4.98", b)
	}

	// Codes and tokens are stored as hashes only, and never logged.
	db, err := os.ReadFile(ta.cfg.DB)
	if err != nil {
		t.Fatal(err)
	}
	logs := ta.logs.String()
	for _, s := range []string{seen.Code, seen.FirstAccess, seen.FirstRefresh, seen.SecondAccess, seen.SecondRefresh} {
		if len(s) < 20 {
			t.Fatalf("token %q", s)
		}
		if bytes.Contains(db, []byte(s)) || strings.Contains(logs, s) {
			t.Errorf("a code or token (%.8s…) is in the store file or the logs", s)
		}
	}
}

// startOAuthNodeClient runs oauth.mjs (the TypeScript SDK's OAuth client)
// with env added to the test's, and returns the function that waits for
// its next event of a kind (skipping "authorize" events that come before)
// and its stdin.
func startOAuthNodeClient(t *testing.T, node string, env ...string) (func(want string) clientEvent, io.Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, node, "oauth.mjs")
	cmd.Dir = mcpClientDir
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	events := make(chan clientEvent)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev clientEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("client line %q: %v", sc.Text(), err)
				continue
			}
			events <- ev
		}
	}()
	next := func(want string) clientEvent {
		t.Helper()
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("the client ended before %q:\n%s", want, stderr.String())
				}
				if ev.Event == want {
					return ev
				}
				if ev.Event != "authorize" {
					t.Fatalf("client event %q, want %q", ev.Event, want)
				}
			case <-ctx.Done():
				t.Fatalf("no %q from the client:\n%s", want, stderr.String())
			}
		}
	}
	return next, stdin
}
