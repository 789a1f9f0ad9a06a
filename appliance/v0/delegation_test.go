package v0_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon"
	"holon.dev/holon/appliance/agents"
	"holon.dev/holon/appliance/v0"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/gateway/remote"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// delegationGateway is an engine whose remote agents delegate through the
// real POST /v0/calls of withDelegatedCalls, served on loopback; it records
// the delegation tokens it is sent.
type delegationGateway struct {
	eng *gateway.Engine
	srv *httptest.Server
	mu  sync.Mutex
	tok []string
}

const dgMandate = `
id: dora/books
issuer: dora
grantee: dora/assistant
currency: EUR
budget: { total: "50.00", per_call: "5.00" }
allow: { agents: ["holon-labs/*", "acme/*"], capabilities: ["extraction.*"] }
`

// newDelegationGateway lists the manifests given (remote agents), and in
// process (dev) csv-profile and the demo agents text-tables and
// company-lookup unless given. At cleanup it
// checks that the journal verifies and no hold is left.
func newDelegationGateway(t *testing.T, remotes ...*contract.Manifest) *delegationGateway {
	t.Helper()
	reg := gateway.NewRegistry()
	examples, err := agents.Load(agents.SetExamples)
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := agents.Load(agents.SetAgents)
	if err != nil {
		t.Fatal(err)
	}
	local := agents.Without(shipped, agents.DefaultExclude)
	for _, m := range examples {
		if m.ID != "holon-labs/invoice-pipeline" && !slices.ContainsFunc(remotes, func(r *contract.Manifest) bool { return r.ID == m.ID }) {
			local = append(local, m)
		}
	}
	if err := reg.AddAll(local, contract.AgentFacts{}, true); err != nil {
		t.Fatal(err)
	}
	if err := reg.AddAll(remotes, contract.AgentFacts{}, false); err != nil {
		t.Fatal(err)
	}
	dev := gateway.NewDevRuntime()
	agents.Register(dev)
	runner := remote.NewMCPRunner(remote.Config{Guard: remote.NetGuard{AllowPrivate: true}})
	s, err := kv.OpenStore(filepath.Join(t.TempDir(), "holon.db"), holon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := &delegationGateway{}
	g.srv = httptest.NewUnstartedServer(nil)
	g.srv.Start()
	g.eng = gateway.New(gateway.Config{Store: s, Registry: reg, PublicURL: g.srv.URL, SignupCredit: journal.MustParseAmount("10.00"),
		Runners: map[string]gateway.Runner{contract.RuntimeDev: dev, contract.RuntimeMCP: runner}})
	api := v0.WithDelegatedCalls(g.eng, slog.New(slog.DiscardHandler), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		web.Error(w, http.StatusUnauthorized, holon.Errorf(web.CodeUnauthenticated, "the API behind: no key"))
	}))
	g.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := web.Bearer(r); ok && strings.HasPrefix(tok, gateway.DelegationTokenPrefix) {
			g.mu.Lock()
			g.tok = append(g.tok, tok)
			g.mu.Unlock()
		}
		api.ServeHTTP(w, r)
	})
	m, err := contract.ParseMandate([]byte(dgMandate))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.eng.PutMandate(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.srv.Close()
		runner.Close()
		storetest.CheckMoney(t, s)
		s.Close()
	})
	return g
}

func (g *delegationGateway) tokens() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.tok...)
}

func (g *delegationGateway) call(t *testing.T, agent, input string) *gateway.CallResult {
	t.Helper()
	res, err := g.eng.Call(context.Background(), gateway.CallInput{Mandate: "dora/books", Agent: agent, Input: json.RawMessage(input)})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// post sends a request to the gateway with a bearer token, and decodes
// the JSON answer.
func post(method, url, token, idemKey string, body any) (int, http.Header, map[string]any, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(method, url, bytes.NewReader(b))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		return resp.StatusCode, resp.Header, nil, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode, resp.Header, out, nil
}

func errorCodeOf(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// Ensure that the demo agents, served over MCP by the agent host on
// loopback, run the delegated invoice of gateway.md §4, the orchestrator
// delegating through its token and the real POST /v0/calls: the same
// receipt tree and costs as in process; and that its token, reused after the parent settled,
// is refused with 401 invalid_token.
func TestDelegatedCalls_InvoicePipelineOverMCP(t *testing.T) {
	examples, err := agents.Load(agents.SetExamples)
	if err != nil {
		t.Fatal(err)
	}
	rt := gateway.NewDevRuntime()
	agents.Register(rt)
	host, err := agents.NewHost(agents.HostConfig{Manifests: examples, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	hostSrv := httptest.NewServer(host)
	defer hostSrv.Close()
	// Every demo agent runs on the host: the pipeline's downstream calls
	// come back to the same endpoint, on sessions of their own.
	var remote []*contract.Manifest
	for _, m := range examples {
		rm, err := agents.RemoteManifest(m, hostSrv.URL+"/mcp")
		if err != nil {
			t.Fatal(err)
		}
		remote = append(remote, rm)
	}
	g := newDelegationGateway(t, remote...)
	res := g.call(t, "holon-labs/invoice-pipeline", `{"text":"ACME Corp\nWidgets, 2, 10.00\nGadgets, 1, 25.50\nShipping, 1, 5.00"}`)
	r := res.Receipt
	if r.Status != holon.StatusSucceeded {
		t.Fatalf("pipeline: %s %v (%s)", r.Status, r.Error, res.Message)
	}
	if got := r.Cost.Own.String() + " " + r.Cost.Downstream.String() + " " + r.Cost.Total.String(); got != "0.10 0.092 0.192" {
		t.Errorf("cost own/downstream/total %s, want 0.10 0.092 0.192", got)
	}
	if len(r.Children) != 2 {
		t.Fatalf("children %v, want the table and the lookup", r.Children)
	}
	for _, id := range r.Children {
		c, err := g.eng.Receipt(id)
		if err != nil {
			t.Fatal(err)
		}
		if c.Parent == nil || *c.Parent != r.ID || c.Status != holon.StatusSucceeded || c.Payer != "dora" {
			t.Errorf("child %s: parent %v status %s payer %s", id, c.Parent, c.Status, c.Payer)
		}
	}
	var out struct {
		Issuer struct{ Found bool } `json:"issuer"`
		Total  string               `json:"total"`
	}
	if err := json.Unmarshal(res.Output, &out); err != nil || out.Total != "50.50" || !out.Issuer.Found {
		t.Errorf("output %s", res.Output)
	}
	toks := g.tokens()
	if len(toks) != 2 || toks[0] != toks[1] {
		t.Fatalf("tokens seen %q, want the run's one token twice", toks)
	}
	status, h, body, err := post(http.MethodPost, g.srv.URL+"/v0/calls", toks[0], "", map[string]any{"capability": "extraction.table", "input": map[string]any{"text": "a, 1"}})
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusUnauthorized || errorCodeOf(body) != holon.CodeInvalidToken || h.Get("WWW-Authenticate") == "" {
		t.Errorf("token reused after the parent settled: %d %v", status, body)
	}
}

// Ensure that the delegation endpoint refuses, with a named code, what a
// token does not allow while its run is live: an undeclared call (403
// not_declared), a call above its slot's max_cost (403 not_declared), an
// approval, an Idempotency-Key, another mandate, another method; that its
// good calls answer like POST /v0/calls; and that it passes requests
// without a delegation token to the API behind it.
func TestDelegatedCalls_Refusals(t *testing.T) {
	type seen struct {
		Name   string         `json:"name"`
		Status int            `json:"status"`
		Body   map[string]any `json:"body"`
	}
	results := make(chan []seen, 1)
	orch := mcp.NewServer(&mcp.Implementation{Name: "orch", Version: "v1"}, nil)
	var g *delegationGateway
	orch.AddTool(&mcp.Tool{Name: "orchestrate", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var grant gateway.DelegationGrant
		b, _ := json.Marshal(req.Params.GetMeta()["holon/delegation"])
		if err := json.Unmarshal(b, &grant); err != nil || grant.Token == "" {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no grant"}}}, nil
		}
		var got []seen
		for _, c := range []struct {
			name, method, idem string
			body               map[string]any
		}{
			{"good", http.MethodPost, "", map[string]any{"capability": "extraction.table", "input": map[string]any{"text": "a, 1\nb, 2"}, "max_cost": "0.05"}},
			{"undeclared", http.MethodPost, "", map[string]any{"agent": "holon-labs/csv-profile", "input": map[string]any{"csv": "a\n1\n"}}},
			{"above max_cost", http.MethodPost, "", map[string]any{"agent": "holon-labs/company-lookup", "input": map[string]any{"name": "ACME Corp"}}},
			{"approval", http.MethodPost, "", map[string]any{"capability": "extraction.table", "input": map[string]any{"text": "a, 1"}, "approval": "a1"}},
			{"idempotency", http.MethodPost, "k1", map[string]any{"capability": "extraction.table", "input": map[string]any{"text": "a, 1"}}},
			{"other mandate", http.MethodPost, "", map[string]any{"mandate": "dora/books", "capability": "extraction.table", "input": map[string]any{"text": "a, 1"}}},
			{"unknown field", http.MethodPost, "", map[string]any{"capability": "extraction.table", "input": map[string]any{}, "surprise": 1}},
			{"GET", http.MethodGet, "", nil},
		} {
			status, _, body, err := post(c.method, grant.URL, grant.Token, c.idem, c.body)
			if err != nil {
				body = map[string]any{"transport": err.Error()}
			}
			got = append(got, seen{c.name, status, body})
		}
		results <- got
		return &mcp.CallToolResult{StructuredContent: map[string]any{"done": true}}, nil
	})
	orchSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return orch }, nil))
	defer orchSrv.Close()
	m, err := contract.ParseManifest([]byte(`
id: acme/orch
version: 1.0.0
summary: An orchestrator on loopback.
license: proprietary
interface: {input: {type: object}, output: {type: object}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: mcp, endpoint: "` + orchSrv.URL + `", tool: orchestrate}
calls:
  - {capability: extraction.table, max_cost: "0.05"}
  - {agent: holon-labs/company-lookup@^1, max_cost: "0.05"}
downstream: {mode: passthrough, cap: "1.00"}
`))
	if err != nil {
		t.Fatal(err)
	}
	g = newDelegationGateway(t, m)
	res := g.call(t, "acme/orch", `{}`)
	if res.Receipt.Status != holon.StatusSucceeded {
		t.Fatalf("orchestrator: %s (%s)", res.Receipt.Status, res.Message)
	}
	got := <-results
	for i, want := range []struct {
		status int
		code   string
	}{
		{http.StatusOK, ""},
		{http.StatusForbidden, holon.CodeNotDeclared},
		{http.StatusForbidden, holon.CodeNotDeclared},
		{http.StatusBadRequest, holon.CodeInvalidRequest},
		{http.StatusBadRequest, holon.CodeInvalidRequest},
		{http.StatusNotFound, holon.CodeNotFound},
		{http.StatusBadRequest, holon.CodeInvalidRequest},
		{http.StatusMethodNotAllowed, holon.CodeInvalidRequest},
	} {
		s := got[i]
		if s.Status != want.status || errorCodeOf(s.Body) != want.code {
			t.Errorf("%s: %d %v, want %d %q", s.Name, s.Status, s.Body, want.status, want.code)
		}
	}
	good := got[0].Body
	rc, _ := good["receipt"].(map[string]any)
	if rc["status"] != "succeeded" || rc["parent"] != res.Receipt.ID || good["output"] == nil {
		t.Errorf("good call: %v", good)
	}
	if msg, _ := got[2].Body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "max_cost") {
		t.Errorf("above max_cost: message %q should say so", msg)
	}
	// The good call and the two refusals reached the engine: three children.
	if len(res.Receipt.Children) != 3 || res.Receipt.Cost.Downstream.String() != "0.008" {
		t.Errorf("children %v, downstream %s; want 3 children, 0.008 (two rows)", res.Receipt.Children, res.Receipt.Cost.Downstream)
	}
	// A request without a delegation token goes to the API behind.
	req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/v0/calls", strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "the API behind") {
		t.Errorf("without a token: %d %s", resp.StatusCode, b)
	}
}
