package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

// delegatedBody is what a remote orchestrator posts to the grant's url.
type delegatedBody struct {
	Mandate    string          `json:"mandate,omitempty"`
	Agent      string          `json:"agent,omitempty"`
	Capability string          `json:"capability,omitempty"`
	Input      json.RawMessage `json:"input"`
	MaxCost    *journal.Amount `json:"max_cost,omitempty"`
}

// delegatedAnswer is what the test's endpoint answers: the outcome, or the
// error's code.
type delegatedAnswer struct {
	Outcome *gateway.CallOutcome `json:"outcome,omitempty"`
	Error   string               `json:"error,omitempty"`
}

// delegationEndpoint is a minimal POST /v0/calls for delegation tokens over
// Engine.CallDelegated (the appliance serves the real one).
func delegationEndpoint(eng *atomic.Pointer[gateway.Engine]) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v0/calls" {
			http.NotFound(w, r)
			return
		}
		var b delegatedBody
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, err := eng.Load().CallDelegated(r.Context(), gateway.DelegatedCall{
			Token:   strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "),
			Mandate: b.Mandate,
			Target:  gateway.Target{Agent: b.Agent, Capability: b.Capability, MaxCost: b.MaxCost},
			Input:   b.Input,
		})
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			status := http.StatusBadRequest
			if holon.ErrorCode(err) == holon.CodeInvalidToken {
				status = http.StatusUnauthorized
			}
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(delegatedAnswer{Error: holon.ErrorCode(err)})
			return
		}
		json.NewEncoder(w).Encode(delegatedAnswer{Outcome: &out})
	}))
}

// postDelegated makes one delegated call as a remote orchestrator would.
func postDelegated(grant gateway.DelegationGrant, body delegatedBody) (int, delegatedAnswer, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, grant.URL, bytes.NewReader(b))
	if err != nil {
		return 0, delegatedAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+grant.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, delegatedAnswer{}, err
	}
	defer resp.Body.Close()
	var a delegatedAnswer
	err = json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, a, err
}

// The downstream dev agents of the delegation tests.
var (
	dgEcho = rmDoc("acme/echo", `
capabilities: [text.echo]
interface: {input: {type: object}, output: {type: object}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev, tool: echo}
`)
	dgPricey = rmDoc("acme/pricey", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.50", currency: EUR}
runtime: {kind: dev, tool: echo}
`)
	dgOther = rmDoc("acme/other", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev, tool: echo}
`)
	dgHandlers = map[string]gateway.DevHandler{
		"echo": func(_ context.Context, in json.RawMessage, _ *gateway.Ctx) (any, error) { return in, nil },
	}
)

// dgCalls is the orchestrators' declared calls and downstream.
const dgCalls = `
calls:
  - {agent: acme/echo, max_cost: "0.20"}
  - {agent: acme/pricey, max_cost: "0.20"}
  - {capability: text.echo, max_cost: "0.20"}
downstream: {mode: passthrough, cap: "1.00"}
`

// plannedCall is one delegated call an orchestrator's input asks for.
type plannedCall struct {
	Body delegatedBody `json:"body"`
}

// dgOrchestrate makes the planned calls with the grant and returns, per
// call, the HTTP status and the answer.
func dgOrchestrate(grant gateway.DelegationGrant, plan []plannedCall) []map[string]any {
	var out []map[string]any
	for _, p := range plan {
		status, ans, err := postDelegated(grant, p.Body)
		r := map[string]any{"http": status}
		if err != nil {
			r["err"] = err.Error()
		}
		if ans.Outcome != nil {
			r["status"], r["error"], r["receipt"] = ans.Outcome.Status, ans.Outcome.Error, ans.Outcome.Receipt
		} else {
			r["error"] = ans.Error
		}
		out = append(out, r)
	}
	return out
}

// Ensure that an orchestrator served over MCP on loopback delegates through
// its token: it receives _meta["holon/delegation"] = {url, token, expires},
// its calls run under the run's sub-mandate and are billed into its receipt
// tree; an undeclared call, a call above its slot's max_cost and a call
// under another mandate are refused; and once the parent has settled, the
// same token is refused with invalid_token.
func TestDelegation_MCPOrchestrator(t *testing.T) {
	var eng atomic.Pointer[gateway.Engine]
	gw := delegationEndpoint(&eng)
	defer gw.Close()
	grants := make(chan gateway.DelegationGrant, 1)
	agent := newMCPAgent(t, "", map[string]mcp.ToolHandler{
		"orchestrate": func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var grant gateway.DelegationGrant
			b, _ := json.Marshal(req.Params.GetMeta()["holon/delegation"])
			if err := json.Unmarshal(b, &grant); err != nil || grant.Token == "" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no grant: " + string(b)}}}, nil
			}
			grants <- grant
			var in struct{ Plan []plannedCall }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			return &mcp.CallToolResult{StructuredContent: map[string]any{"results": dgOrchestrate(grant, in.Plan)}}, nil
		},
	})
	orch := mcpManifest("orch", agent.URL(), "orchestrate", `{model: per_run, amount: "0.10", currency: EUR}`, dgCalls)
	g := openRemote(t, rmConfig{manifests: []string{orch, dgEcho, dgPricey, dgOther}, handlers: dgHandlers, publicURL: gw.URL + "/"})
	eng.Store(g.eng)

	plan := []plannedCall{
		{delegatedBody{Agent: "acme/echo", Input: json.RawMessage(`{"n":1}`)}},
		{delegatedBody{Capability: "text.echo", Input: json.RawMessage(`{"n":2}`), MaxCost: rmAmount(t, "0.15")}},
		{delegatedBody{Agent: "acme/other", Input: json.RawMessage(`{}`)}},
		{delegatedBody{Agent: "acme/pricey", Input: json.RawMessage(`{}`)}},
		{delegatedBody{Mandate: "tess/remote", Agent: "acme/echo", Input: json.RawMessage(`{}`)}},
	}
	input, _ := json.Marshal(map[string]any{"plan": plan})
	before := g.balance(t, "tess")
	start := time.Now()
	res := g.call(t, "acme/orch", string(input), "")
	if res.Receipt.Status != "succeeded" {
		t.Fatalf("orchestrator: %v (%s)", billingOf(res.Receipt), res.Message)
	}
	grant := <-grants
	if grant.URL != gw.URL+"/v0/calls" || !strings.HasPrefix(grant.Token, gateway.DelegationTokenPrefix) || len(grant.Token) < 40 {
		t.Errorf("grant %+v", grant)
	}
	if !grant.Expires.After(start) || grant.Expires.After(start.Add(11*time.Second)) {
		t.Errorf("grant expires %v, want within the 10 s hard timeout of %v", grant.Expires, start)
	}
	var out struct{ Results []map[string]any }
	if err := json.Unmarshal(res.Output, &out); err != nil || len(out.Results) != len(plan) {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	for i, want := range []map[string]any{
		{"http": 200.0, "status": "succeeded", "error": ""},
		{"http": 200.0, "status": "succeeded", "error": ""},
		{"http": 200.0, "status": "denied", "error": "not_declared"},
		{"http": 200.0, "status": "denied", "error": "not_declared"},
		{"http": 400.0, "error": "not_found"},
	} {
		for k, v := range want {
			if out.Results[i][k] != v {
				t.Errorf("call %d: %s = %v, want %v (%v)", i, k, out.Results[i][k], v, out.Results[i])
			}
		}
	}
	r := res.Receipt
	if got := []string{r.Cost.Own.String(), r.Cost.Downstream.String(), r.Cost.Total.String()}; strings.Join(got, " ") != "0.10 0.20 0.30" {
		t.Errorf("cost own/downstream/total = %v, want 0.10 0.20 0.30", got)
	}
	if len(r.Children) != 4 {
		t.Errorf("children %v, want the four calls that reached the gateway", r.Children)
	}
	for _, id := range r.Children {
		c, err := g.eng.Receipt(id)
		if err != nil {
			t.Fatal(err)
		}
		if c.Parent == nil || *c.Parent != r.ID || c.Mandate != *r.SubMandate || c.Payer != "tess" {
			t.Errorf("child %s: parent %v, mandate %s, payer %s; want %s under %s paid by tess", id, c.Parent, c.Mandate, c.Payer, r.ID, *r.SubMandate)
		}
	}
	if spent := before - g.balance(t, "tess"); spent.String() != "0.30" {
		t.Errorf("tess paid %s, want 0.30", spent)
	}
	// The parent has settled: its token is dead.
	status, ans, err := postDelegated(grant, delegatedBody{Agent: "acme/echo", Input: json.RawMessage(`{}`)})
	if err != nil || status != http.StatusUnauthorized || ans.Error != holon.CodeInvalidToken {
		t.Errorf("token reused after the parent settled: %d %+v %v, want 401 invalid_token", status, ans, err)
	}
	forged := grant
	forged.Token = gateway.DelegationTokenPrefix + strings.Repeat("A", 43)
	if status, ans, _ := postDelegated(forged, delegatedBody{Agent: "acme/echo"}); status != http.StatusUnauthorized || ans.Error != holon.CodeInvalidToken {
		t.Errorf("unknown token: %d %+v, want 401 invalid_token", status, ans)
	}
	if _, err := g.eng.DelegationMandate(grant.Token); holon.ErrorCode(err) != holon.CodeInvalidToken {
		t.Errorf("DelegationMandate after settling: %v", err)
	}
}

// Ensure that a webhook orchestrator receives the same grant as JSON in the
// x-holon-delegation header and delegates through it.
func TestDelegation_WebhookOrchestrator(t *testing.T) {
	var eng atomic.Pointer[gateway.Engine]
	gw := delegationEndpoint(&eng)
	defer gw.Close()
	var mu sync.Mutex
	var header string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		header = r.Header.Get("x-holon-delegation")
		mu.Unlock()
		var grant gateway.DelegationGrant
		if err := json.Unmarshal([]byte(header), &grant); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":"no_grant","message":"`+err.Error()+`"}}`)
			return
		}
		results := dgOrchestrate(grant, []plannedCall{{delegatedBody{Agent: "acme/echo", Input: json.RawMessage(`{"via":"webhook"}`)}}})
		json.NewEncoder(w).Encode(map[string]any{"results": results})
	}))
	defer hook.Close()
	orch := webhookManifest("horch", hook.URL, `{model: per_run, amount: "0.10", currency: EUR}`, dgCalls)
	g := openRemote(t, rmConfig{manifests: []string{orch, dgEcho, dgPricey, dgOther}, handlers: dgHandlers, publicURL: gw.URL})
	eng.Store(g.eng)
	res := g.call(t, "acme/horch", `{}`, "")
	if res.Receipt.Status != "succeeded" {
		t.Fatalf("orchestrator: %v (%s)", billingOf(res.Receipt), res.Message)
	}
	if !strings.Contains(string(res.Output), `"status":"succeeded"`) || res.Receipt.Cost.Total.String() != "0.20" || len(res.Receipt.Children) != 1 {
		t.Errorf("output %s, cost %+v, children %v", res.Output, res.Receipt.Cost, res.Receipt.Children)
	}
	mu.Lock()
	defer mu.Unlock()
	var grant map[string]any
	if err := json.Unmarshal([]byte(header), &grant); err != nil || len(grant) != 3 || grant["url"] != gw.URL+"/v0/calls" {
		t.Errorf("x-holon-delegation %q, want {url, token, expires}", header)
	}
}

// Ensure that an orchestrator cannot run without a public URL to delegate
// to: gateway_error naming HOLON_PUBLIC_URL, nothing billed, the agent never
// called.
func TestDelegation_NoPublicURL(t *testing.T) {
	agent := newMCPAgent(t, "", map[string]mcp.ToolHandler{"echo": profileTools()["echo"]})
	orch := mcpManifest("orch", agent.URL(), "echo", `{model: per_run, amount: "0.10", currency: EUR}`, dgCalls)
	g := openRemote(t, rmConfig{manifests: []string{orch, dgEcho, dgPricey, dgOther}, handlers: dgHandlers})
	res := g.call(t, "acme/orch", `{}`, "")
	if got := billingOf(res.Receipt); got != (billing{"failed", "gateway_error", false, "0.00"}) || !strings.Contains(res.Message, "HOLON_PUBLIC_URL") {
		t.Fatalf("%v (%s), want gateway_error naming HOLON_PUBLIC_URL", got, res.Message)
	}
	if n := len(agent.Calls()); n != 0 {
		t.Errorf("the agent was called %d times", n)
	}
}

func rmAmount(t *testing.T, s string) *journal.Amount {
	t.Helper()
	a, err := journal.ParseAmount(s)
	if err != nil {
		t.Fatal(err)
	}
	return &a
}
