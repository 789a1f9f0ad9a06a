package appliance_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/publishing"
	"holon.dev/holon/gateway/contract"
)

// gatedEchoServer is an author's MCP server on loopback over https: tool
// "run" answers {"echo": <text>} once the test opens its gate, and every
// request without "Authorization: Bearer <token>" is refused (401). It
// records the Authorization header and the input text of each tool call.
type gatedEchoServer struct {
	srv   *httptest.Server
	token string
	gate  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	auths []string
	texts []string
}

func newGatedEchoServer(t *testing.T, token string) *gatedEchoServer {
	t.Helper()
	g := &gatedEchoServer{token: token, gate: make(chan struct{})}
	server := mcp.NewServer(&mcp.Implementation{Name: "lena-echo", Version: "v1"}, nil)
	server.AddTool(&mcp.Tool{Name: "run", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct{ Text string }
		_ = json.Unmarshal(req.Params.Arguments, &in)
		g.mu.Lock()
		g.texts = append(g.texts, in.Text)
		g.mu.Unlock()
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &mcp.CallToolResult{StructuredContent: map[string]any{"echo": in.Text}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	g.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		g.mu.Lock()
		g.auths = append(g.auths, got)
		g.mu.Unlock()
		if got != "Bearer "+g.token {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error": {"code": "unauthorized", "message": "wrong token"}}`)
			return
		}
		h.ServeHTTP(w, r)
	}))
	g.srv.StartTLS()
	t.Cleanup(g.srv.Close)
	return g
}

func (g *gatedEchoServer) open() { g.once.Do(func() { close(g.gate) }) }

func (g *gatedEchoServer) seen() (auths, texts []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.auths...), append([]string(nil), g.texts...)
}

// echoSuite is an operator's private test.published suite: one public
// case and one hidden one, whose id and input must never show.
const echoSuite = `
capability: test.published
cases:
  - id: says-hi
    public: true
    input: { text: hi }
    expect: { output_contains: { echo: hi } }
  - id: holdout-secret-3
    public: false
    input: { text: zebra-holdout }
    expect: { output_contains: { echo: zebra-holdout } }
`

// Ensure that publishing over the API is evaluated end to end: an MCP
// agent published with POST /v0/agents answers 201 while its evaluation
// runs in the background; until it passed, a mandate with
// require.evaluated refuses it; the evaluation's requests reach the
// author's server with the endpoint credential as a bearer token (the
// server refuses any other); and the results reach the catalogue and the
// author's view, hidden cases as counts only.
func TestPublish_EvaluatedEndToEnd(t *testing.T) {
	private := t.TempDir()
	if err := os.MkdirAll(filepath.Join(private, "test.published"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(private, "test.published", "suite.yaml"), []byte(echoSuite), 0o644); err != nil {
		t.Fatal(err)
	}
	const token = "tok-Eval7Qx2Lm9Vb4Nc1Zr8"
	srv := newGatedEchoServer(t, token)
	roots := x509.NewCertPool()
	roots.AddCert(srv.srv.Certificate())
	g := newGitHubApp(t, func(c *appliance.Config) {
		c.AllowPrivateEndpoints = true // this test only: the author's server is on loopback
		c.RemoteRootCAs = roots
		c.PrivateEvals = private
	})
	lena := g.author(101, "lena")
	lena.human.must(200, "PUT", "/v0/agents/lena/echo/credential", map[string]any{"token": token})
	carol := g.signup("carol")
	carol.createMandate("strict", map[string]any{"budget": map[string]any{"total": "1.00"},
		"allow": map[string]any{"agents": []string{"lena/*"}}, "require": map[string]any{"evaluated": true}})
	call := func() (int, map[string]any) {
		return carol.human.do("POST", "/v0/calls", map[string]any{"mandate": "carol/strict", "agent": "lena/echo", "input": map[string]any{"text": "yo"}})
	}

	out := lena.human.must(201, "POST", "/v0/agents", pubManifest("lena/echo", "1.0.0", proprietary,
		set("runtime", map[string]any{"kind": "mcp", "endpoint": srv.srv.URL + "/mcp", "tool": "run"})))
	if out["credential_set"] != true {
		t.Errorf("publish: %v", out)
	}
	// Answered while the server still holds the evaluation: in the background.
	if st, out := call(); st != http.StatusForbidden || errorCode(out) != holon.CodeRequirementNotMet {
		t.Fatalf("before the evaluation passed: %d %v, want 403 requirement_not_met", st, out)
	}
	cat := g.anonymous().must(http.StatusOK, "GET", "/v0/catalog?q=lena", nil)
	if ev, _ := firstAgent(t, cat)["measured"].(map[string]any)["evaluation"].(map[string]any); ev["queued"] != true {
		t.Errorf("catalogue during the evaluation: %v, want queued", ev)
	}
	srv.open()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.app.WaitEvaluations(ctx); err != nil {
		t.Fatal(err)
	}
	auths, texts := srv.seen()
	if !strings.Contains(strings.Join(texts, " "), "zebra-holdout") {
		t.Fatalf("the hidden case did not reach the author's server (inputs %q): the private suite was not run", texts)
	}
	for _, a := range auths {
		if a != "Bearer "+token {
			t.Errorf("the evaluation sent Authorization %q, want the endpoint credential as a bearer token", a)
		}
	}
	if st, out := call(); st != http.StatusOK || out["output"].(map[string]any)["echo"] != "yo" {
		t.Fatalf("after it passed: %d %v, want 200", st, out)
	}

	raw := g.anonymous().mustRaw(http.StatusOK, "GET", "/v0/catalog?q=lena")
	assertNoHidden(t, "catalogue", raw)
	measured := firstAgent(t, decodeObject(t, raw))["measured"].(map[string]any)
	if measured["evaluated"] != "1/1 public, 1/1 hidden" {
		t.Errorf("catalogue: evaluated %v, want 1/1 public, 1/1 hidden", measured["evaluated"])
	}
	raw = lena.human.mustRaw(http.StatusOK, "GET", "/v0/me/agents")
	assertNoHidden(t, "author's view", raw)
	versions := decodeObject(t, raw)["versions"].([]any)
	if len(versions) != 1 {
		t.Fatalf("author's view: %s", raw)
	}
	ev := versions[0].(map[string]any)["evaluation"].(map[string]any)
	suite := ev["suites"].([]any)[0].(map[string]any)
	if ev["passed"] != true || suite["source"] != "private" || len(suite["cases"].([]any)) != 1 {
		t.Errorf("author's view of the evaluation: %v", ev)
	}
	if h := suite["hidden"].(map[string]any); h["passed"] != float64(1) || h["failed"] != float64(0) {
		t.Errorf("hidden counts %v, want 1 passed", h)
	}
}

// Ensure that RegisterVersion and POST /v0/agents are one path: a version
// registered is stored as published (listed again after a restart), its
// number is taken for publishing and the other way round (version_exists
// both ways), and the OnPublished hooks hear of both.
func TestRegisterVersion_SamePathAsPublishing(t *testing.T) {
	g, lena := publishWorld(t)
	heard := make(chan string, 4)
	g.app.OnPublished(func(ref string) { heard <- ref })
	manifest := func(id, version string) *contract.Manifest {
		b, err := json.Marshal(pubManifest(id, version, proprietary))
		if err != nil {
			t.Fatal(err)
		}
		m, err := contract.ParseManifest(b)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ctx := context.Background()
	if err := g.app.RegisterVersion(ctx, manifest("lena/reg", "1.0.0")); err != nil {
		t.Fatal(err)
	}
	if st, out := lena.human.do("POST", "/v0/agents", pubManifest("lena/reg", "1.0.0", proprietary)); st != http.StatusConflict || errorCode(out) != publishing.CodeVersionExists {
		t.Errorf("publishing a registered version: %d %v, want 409 version_exists", st, out)
	}
	lena.human.must(http.StatusCreated, "POST", "/v0/agents", pubManifest("lena/pub", "1.0.0", proprietary))
	if err := g.app.RegisterVersion(ctx, manifest("lena/pub", "1.0.0")); holon.ErrorCode(err) != publishing.CodeVersionExists {
		t.Errorf("registering a published version: %v, want version_exists", err)
	}
	got := map[string]bool{}
	for range 2 {
		select {
		case ref := <-heard:
			got[ref] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("the hooks heard only of %v", got)
		}
	}
	if !got["lena/reg@1.0.0"] || !got["lena/pub@1.0.0"] {
		t.Errorf("the hooks heard of %v, want both versions", got)
	}
	g.restart()
	if _, ok := g.app.Engine().Registry().Get("lena/reg@1.0.0"); !ok {
		t.Error("a registered version is not listed after a restart: it was not stored as published")
	}
	out := lena.human.must(http.StatusOK, "GET", "/v0/me/agents", nil)
	if vs, _ := out["versions"].([]any); len(vs) != 2 {
		t.Errorf("the author's view lists %v, want both versions", out["versions"])
	}
}
