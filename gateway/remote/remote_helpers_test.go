package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/gateway/remote"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// This file holds what the remote-runtime tests share: a gateway whose mcp
// and webhook runners reach real servers on loopback, and whose money is
// checked at cleanup; and a real MCP agent server (go-sdk) that records
// what it is sent.

// rmMandate is the mandate the remote tests call under: 50.00 EUR in all,
// 10.00 per call, acme's agents and any capability, no approval.
const rmMandate = `
id: tess/remote
issuer: tess
grantee: tess/assistant
currency: EUR
budget: { total: "50.00", per_call: "10.00" }
allow: { agents: ["acme/*"], capabilities: ["*"] }
`

// rmGateway is an engine on a temporary store with the remote runners.
type rmGateway struct {
	eng     *gateway.Engine
	store   holon.Store
	mcp     *remote.MCPRunner
	webhook *remote.WebhookRunner
	dev     *gateway.DevRuntime
}

// rmConfig is what openRemote builds a gateway from.
type rmConfig struct {
	manifests []string
	// remote configures both runners; Guard.AllowPrivate is set unless
	// guarded is true.
	remote  remote.Config
	guarded bool
	// shipped lists the manifests as shipped with the gateway.
	shipped   bool
	publicURL string
	handlers  map[string]gateway.DevHandler
}

// openRemote opens a gateway with the given agents and the rmMandate. At
// cleanup it closes the runners and checks the money: the journal
// verifies, and no hold, reservation or held amount is left.
func openRemote(t *testing.T, cfg rmConfig) *rmGateway {
	t.Helper()
	reg := gateway.NewRegistry()
	var ms []*contract.Manifest
	for _, doc := range cfg.manifests {
		m, err := contract.ParseManifest([]byte(doc))
		if err != nil {
			t.Fatalf("manifest: %v\n%s", err, doc)
		}
		ms = append(ms, m)
	}
	if err := reg.AddAll(ms, contract.AgentFacts{}, cfg.shipped); err != nil {
		t.Fatalf("registry: %v", err)
	}
	rc := cfg.remote
	if !cfg.guarded {
		rc.Guard.AllowPrivate = true
	}
	g := &rmGateway{mcp: remote.NewMCPRunner(rc), webhook: remote.NewWebhookRunner(rc), dev: gateway.NewDevRuntime()}
	for name, h := range cfg.handlers {
		g.dev.Register(name, h)
	}
	s, err := kv.Open(filepath.Join(t.TempDir(), "holon.db"), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g.store = s.Holon()
	g.eng = gateway.New(gateway.Config{
		Store: g.store, Registry: reg, SignupCredit: journal.MustParseAmount("100.00"), PublicURL: cfg.publicURL,
		Runners: map[string]gateway.Runner{contract.RuntimeMCP: g.mcp, contract.RuntimeWebhook: g.webhook, contract.RuntimeDev: g.dev},
	})
	mandate, err := contract.ParseMandate([]byte(rmMandate))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.eng.PutMandate(context.Background(), mandate); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.mcp.Close()
		g.webhook.Close()
		storetest.CheckMoney(t, g.store)
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return g
}

// call calls an agent under the rmMandate.
func (g *rmGateway) call(t *testing.T, agent, input string, maxCost string) *gateway.CallResult {
	t.Helper()
	in := gateway.CallInput{Mandate: "tess/remote", Agent: agent, Input: json.RawMessage(input)}
	if maxCost != "" {
		mc := journal.MustParseAmount(maxCost)
		in.MaxCost = &mc
	}
	res, err := g.eng.Call(context.Background(), in)
	if err != nil {
		t.Fatalf("Call(%s): %v", agent, err)
	}
	return res
}

// balance is an account's balance.
func (g *rmGateway) balance(t *testing.T, account string) journal.Amount {
	t.Helper()
	accts, err := g.eng.Accounts()
	if err != nil {
		t.Fatal(err)
	}
	return accts[account].Balance
}

// billing is what a receipt says of one call's money.
type billing struct {
	status, code string
	billed       bool
	own          string
}

func (b billing) String() string {
	return fmt.Sprintf("%s/%s billed=%v own=%s", b.status, b.code, b.billed, b.own)
}

func billingOf(r *holon.Receipt) billing {
	b := billing{status: r.Status, billed: r.Billed, own: r.Cost.Own.String()}
	if r.Error != nil {
		b.code = *r.Error
	}
	return b
}

// countingListener counts the TCP connections a server accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// mcpAgent is a real MCP server (go-sdk, stateful Streamable HTTP) on
// loopback, recording what its tools are sent.
type mcpAgent struct {
	srv    *httptest.Server
	ln     *countingListener
	server *mcp.Server

	mu    sync.Mutex
	calls []mcpCall
	auth  []string
}

// mcpCall is one tools/call as the server saw it.
type mcpCall struct {
	Tool string
	Args json.RawMessage
	Meta map[string]any
}

// newMCPAgent serves the tools on a loopback address (addr "" picks one).
func newMCPAgent(t *testing.T, addr string, tools map[string]mcp.ToolHandler) *mcpAgent {
	t.Helper()
	return newMCPAgentWrapped(t, addr, tools, nil)
}

// newMCPAgentWrapped is newMCPAgent on a listener wrapped by wrap.
func newMCPAgentWrapped(t *testing.T, addr string, tools map[string]mcp.ToolHandler, wrap func(net.Listener) net.Listener) *mcpAgent {
	t.Helper()
	a := &mcpAgent{server: mcp.NewServer(&mcp.Implementation{Name: "test-agent", Version: "v1"}, nil)}
	for name, h := range tools {
		a.server.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}, a.record(name, h))
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	a.ln = &countingListener{Listener: ln}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return a.server }, nil)
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.auth = append(a.auth, r.Header.Get("Authorization"))
		a.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	a.srv.Listener = a.ln
	a.srv.Start()
	t.Cleanup(a.srv.Close)
	return a
}

func (a *mcpAgent) URL() string { return a.srv.URL + "/mcp" }

func (a *mcpAgent) record(name string, h mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a.mu.Lock()
		a.calls = append(a.calls, mcpCall{Tool: name, Args: append(json.RawMessage(nil), req.Params.Arguments...), Meta: req.Params.GetMeta()})
		a.mu.Unlock()
		return h(ctx, req)
	}
}

func (a *mcpAgent) Calls() []mcpCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]mcpCall(nil), a.calls...)
}

func (a *mcpAgent) Auth() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.auth...)
}

// argsOf decodes a tool's arguments.
func argsOf(req *mcp.CallToolRequest) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(req.Params.Arguments, &m)
	return m
}

// mcpManifest is an mcp agent of acme at endpoint, calling tool, with a
// 10 s timeout.
func mcpManifest(name, endpoint, tool, pricing string, extra string) string {
	return mcpManifestT(name, endpoint, tool, pricing, 10, extra)
}

// mcpManifestT is mcpManifest with a timeout in seconds.
func mcpManifestT(name, endpoint, tool, pricing string, timeout int, extra string) string {
	return rmDoc("acme/"+name, fmt.Sprintf(`
interface:
  input: {type: object}
  output: {type: object}
  errors:
    quota: {billed: true, description: Out of quota.}
    bad_doc: {billed: false, description: Unreadable.}
    over_budget: {billed: false, description: Above max_cost.}
pricing: %s
runtime: {kind: mcp, endpoint: %q, tool: %s, limits: {timeout_s: %d}}
%s`, pricing, endpoint, tool, timeout, extra))
}

// webhookManifest is a webhook agent of acme at endpoint, with a 10 s
// timeout.
func webhookManifest(name, endpoint, pricing, extra string) string {
	return webhookManifestT(name, endpoint, pricing, 10, extra)
}

// webhookManifestT is webhookManifest with a timeout in seconds.
func webhookManifestT(name, endpoint, pricing string, timeout int, extra string) string {
	return rmDoc("acme/"+name, fmt.Sprintf(`
interface:
  input: {type: object}
  output: {type: object}
  errors:
    quota: {billed: true, description: Out of quota.}
    bad_doc: {billed: false, description: Unreadable.}
pricing: %s
runtime: {kind: webhook, endpoint: %q, limits: {timeout_s: %d}}
%s`, pricing, endpoint, timeout, extra))
}

// rmDoc is a manifest of version 1.0.0: the identity, then body.
func rmDoc(id, body string) string {
	return fmt.Sprintf("id: %s\nversion: 1.0.0\nsummary: A remote test agent.\nlicense: proprietary\n%s", id, body)
}

// killableListener hands out connections that can be killed as a server
// that closed them would: once killed, a connection closes without an
// answer the next time a request comes in on it.
type killableListener struct {
	net.Listener
	gen    atomic.Int64 // generation of the next connection
	killed atomic.Int64 // connections of a lower generation are dead
}

func (l *killableListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &killableConn{Conn: c, l: l, gen: l.gen.Add(1) - 1}, nil
}

// killAll kills every connection accepted so far.
func (l *killableListener) killAll() { l.killed.Store(l.gen.Load()) }

type killableConn struct {
	net.Conn
	l   *killableListener
	gen int64
}

func (c *killableConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.gen < c.l.killed.Load() {
		c.Conn.Close()
		return 0, io.EOF
	}
	return n, err
}
