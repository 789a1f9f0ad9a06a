package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/remote"
)

// profileTools are the tools of the MCP agent the profile tests call, one
// behaviour each.
func profileTools() map[string]mcp.ToolHandler {
	structured := func(v any, meta mcp.Meta) *mcp.CallToolResult {
		return &mcp.CallToolResult{StructuredContent: v, Meta: meta}
	}
	failure := func(code string, meta mcp.Meta) *mcp.CallToolResult {
		return &mcp.CallToolResult{IsError: true, Meta: meta,
			StructuredContent: map[string]any{"error": map[string]any{"code": code, "message": "the agent says " + code}},
			Content:           []mcp.Content{&mcp.TextContent{Text: code}}}
	}
	return map[string]mcp.ToolHandler{
		"echo": func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return structured(json.RawMessage(req.Params.Arguments), nil), nil
		},
		"exact": func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			const doc = `{"big":12345678901234567890,"x":0.10}`
			return &mcp.CallToolResult{StructuredContent: json.RawMessage(doc), Content: []mcp.Content{&mcp.TextContent{Text: doc}}}, nil
		},
		"text": func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.ImageContent{Data: []byte{1, 2}, MIMEType: "image/png"},
				&mcp.TextContent{Text: ` {"from": "the first text block"} `},
				&mcp.TextContent{Text: `{"from": "the second"}`},
			}}, nil
		},
		"notjson": func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "plain words"}}}, nil
		},
		"empty": func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		},
		"array": func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return structured([]any{"not", "an", "object"}, nil), nil
		},
		"declared": func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a := argsOf(req)
			var meta mcp.Meta
			if u, ok := a["units"]; ok {
				meta = mcp.Meta{"holon/units": u}
			}
			return failure(a["code"].(string), meta), nil
		},
		"nocode": func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "broken"}}}, nil
		},
		"goerror": func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, errors.New("boom")
		},
		"units": func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			meta := mcp.Meta{}
			if u, ok := argsOf(req)["units"]; ok {
				meta["holon/units"] = u
			}
			return structured(map[string]any{"ok": true}, meta), nil
		},
		"quote": func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			meta := mcp.Meta{}
			if q, ok := argsOf(req)["quote"]; ok {
				meta["holon/quote"] = q
			}
			return structured(map[string]any{"ok": true}, meta), nil
		},
		// budget refuses up front when the caller's cap is below 1.00.
		"budget": func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if mc, ok := req.Params.GetMeta()["holon/max_cost"].(map[string]any); ok && mc["amount"].(string) < "1.00" {
				return failure("over_budget", nil), nil
			}
			return structured(map[string]any{"ok": true}, mcp.Meta{"holon/units": 10}), nil
		},
	}
}

// Ensure that every row of the MCP agent profile is followed, billed exactly
// as declared: arguments are the input, holon/max_cost is sent when the
// caller set a cap, the output comes from structuredContent or else the first
// text block, isError with a code is billed as declared (unknown codes and
// failures without a code never), and holon/units and holon/quote price
// per_unit and quote agents.
func TestMCPRunner_Profile(t *testing.T) {
	agent := newMCPAgent(t, "", profileTools())
	perRun := `{model: per_run, amount: "0.10", currency: EUR}`
	attempt := `{model: per_run, amount: "0.10", currency: EUR, charge_on: attempt}`
	perUnit := `{model: per_unit, amount: "0.10", unit: page, max: "3.00", currency: EUR}`
	perUnitAttempt := `{model: per_unit, amount: "0.10", unit: page, max: "3.00", currency: EUR, charge_on: attempt}`
	quote := `{model: quote, max: "2.00", currency: EUR}`
	manifests := []string{
		mcpManifest("echo", agent.URL(), "echo", perRun, ""),
		mcpManifest("text", agent.URL(), "text", perRun, ""),
		mcpManifest("exact", agent.URL(), "exact", perRun, ""),
		mcpManifest("notjson", agent.URL(), "notjson", perRun, ""),
		mcpManifest("empty", agent.URL(), "empty", perRun, ""),
		mcpManifest("array", agent.URL(), "array", perRun, ""),
		mcpManifest("declared", agent.URL(), "declared", attempt, ""),
		mcpManifest("declared-s", agent.URL(), "declared", perRun, ""),
		mcpManifest("declared-u", agent.URL(), "declared", perUnitAttempt, ""),
		mcpManifest("nocode", agent.URL(), "nocode", perRun, ""),
		mcpManifest("goerror", agent.URL(), "goerror", perRun, ""),
		mcpManifest("units", agent.URL(), "units", perUnit, ""),
		mcpManifest("quote", agent.URL(), "quote", quote, ""),
		mcpManifest("budget", agent.URL(), "budget", perUnit, ""),
	}
	g := openRemote(t, rmConfig{manifests: manifests})
	for _, tt := range []struct {
		name, agent, input, maxCost string
		want                        billing
		output                      string // the output, when it succeeds
		message                     string // in the message, when it fails
	}{
		{"structuredContent is the output", "echo", `{"a":[1,2],"b":"x"}`, "", billing{"succeeded", "", true, "0.10"}, `{"a":[1,2],"b":"x"}`, ""},
		{"max_cost above the price", "echo", `{"n":1}`, "0.50", billing{"succeeded", "", true, "0.10"}, `{"n":1}`, ""},
		{"structuredContent, exactly as its text block writes it", "exact", `{}`, "", billing{"succeeded", "", true, "0.10"}, "", ""},
		{"else the first text block", "text", `{}`, "", billing{"succeeded", "", true, "0.10"}, `{"from":"the first text block"}`, ""},
		{"a text block that is not JSON", "notjson", `{}`, "", billing{"failed", "agent_error", false, "0.00"}, "", "not JSON"},
		{"neither structured nor text", "empty", `{}`, "", billing{"failed", "agent_error", false, "0.00"}, "", "neither"},
		{"an output off interface.output", "array", `{}`, "", billing{"failed", "invalid_output", false, "0.00"}, "", "interface.output"},
		{"declared, billed, charge_on attempt", "declared", `{"code":"quota"}`, "", billing{"failed", "quota", true, "0.10"}, "", "the agent says quota"},
		{"declared, not billed", "declared", `{"code":"bad_doc"}`, "", billing{"failed", "bad_doc", false, "0.00"}, "", "the agent says bad_doc"},
		{"declared billed, charge_on success", "declared-s", `{"code":"quota"}`, "", billing{"failed", "quota", false, "0.00"}, "", ""},
		{"declared billed per unit", "declared-u", `{"code":"quota","units":4}`, "", billing{"failed", "quota", true, "0.40"}, "", ""},
		{"an unknown code is never billed", "declared", `{"code":"weird"}`, "", billing{"failed", "agent_error", false, "0.00"}, "", ""},
		{"isError without a code", "nocode", `{}`, "", billing{"failed", "agent_error", false, "0.00"}, "", "broken"},
		{"a tool handler's Go error", "goerror", `{}`, "", billing{"failed", "agent_error", false, "0.00"}, "", "boom"},
		{"units", "units", `{"units":3}`, "", billing{"succeeded", "", true, "0.30"}, `{"ok":true}`, ""},
		{"units capped at pricing.max", "units", `{"units":50}`, "", billing{"succeeded", "", true, "3.00"}, "", ""},
		{"units capped at max_cost", "units", `{"units":20}`, "0.50", billing{"succeeded", "", true, "0.50"}, "", ""},
		{"no units", "units", `{}`, "", billing{"failed", "invalid_units", false, "0.00"}, "", ""},
		{"fractional units", "units", `{"units":2.5}`, "", billing{"failed", "invalid_units", false, "0.00"}, "", ""},
		{"negative units", "units", `{"units":-1}`, "", billing{"failed", "invalid_units", false, "0.00"}, "", ""},
		{"a quote", "quote", `{"quote":"1.25"}`, "", billing{"succeeded", "", true, "1.25"}, "", ""},
		{"a quote capped at pricing.max", "quote", `{"quote":"5.00"}`, "", billing{"succeeded", "", true, "2.00"}, "", ""},
		{"a quote that is a number", "quote", `{"quote":1.25}`, "", billing{"failed", "invalid_quote", false, "0.00"}, "", ""},
		{"no quote", "quote", `{}`, "", billing{"failed", "invalid_quote", false, "0.00"}, "", ""},
		{"over_budget up front, from holon/max_cost", "budget", `{}`, "0.50", billing{"failed", "over_budget", false, "0.00"}, "", ""},
		{"under the cap it runs", "budget", `{}`, "2.00", billing{"succeeded", "", true, "1.00"}, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := g.balance(t, "tess")
			n := len(agent.Calls())
			res := g.call(t, "acme/"+tt.agent, tt.input, tt.maxCost)
			if got := billingOf(res.Receipt); got != tt.want {
				t.Fatalf("receipt %v (%s), want %v", got, res.Message, tt.want)
			}
			if spent := before - g.balance(t, "tess"); spent != res.Receipt.Cost.Own {
				t.Errorf("tess paid %s, the receipt says %s", spent, res.Receipt.Cost.Own)
			}
			if tt.output != "" && !jsonEq(t, res.Output, tt.output) {
				t.Errorf("output %s, want %s", res.Output, tt.output)
			}
			if tt.agent == "exact" && string(res.Output) != `{"big":12345678901234567890,"x":0.10}` {
				t.Errorf("output %s, want the digits as the tool wrote them", res.Output)
			}
			if tt.message != "" && !strings.Contains(res.Message, tt.message) {
				t.Errorf("message %q, want it to say %q", res.Message, tt.message)
			}
			calls := agent.Calls()
			if len(calls) != n+1 {
				t.Fatalf("the server saw %d calls, want 1", len(calls)-n)
			}
			c := calls[n]
			if !jsonEq(t, c.Args, tt.input) {
				t.Errorf("arguments %s, want the input %s", c.Args, tt.input)
			}
			mc, has := c.Meta["holon/max_cost"]
			switch {
			case tt.maxCost == "" && has:
				t.Errorf("holon/max_cost %v sent without a cap", mc)
			case tt.maxCost != "" && fmt.Sprint(mc) != fmt.Sprint(map[string]any{"amount": tt.maxCost, "currency": "EUR"}):
				t.Errorf("holon/max_cost = %v, want {amount: %s, currency: EUR}", mc, tt.maxCost)
			}
			if _, has := c.Meta["holon/delegation"]; has {
				t.Error("holon/delegation sent to an agent that declares no calls")
			}
		})
	}
}

// Ensure that the hard timeout cancels the MCP request: the tool's handler
// sees its context cancelled, the call fails with timeout, nothing is
// billed, and the session is still good for the next call.
func TestMCPRunner_Timeout_CancelsHandler(t *testing.T) {
	cancelled := make(chan error, 1)
	agent := newMCPAgent(t, "", map[string]mcp.ToolHandler{
		"hang": func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
				cancelled <- ctx.Err()
			case <-time.After(20 * time.Second):
				cancelled <- nil
			}
			return &mcp.CallToolResult{StructuredContent: map[string]any{}}, nil
		},
		"echo": profileTools()["echo"],
	})
	g := openRemote(t, rmConfig{manifests: []string{
		mcpManifestT("hang", agent.URL(), "hang", `{model: per_run, amount: "0.10", currency: EUR}`, 1, ""),
		mcpManifest("echo", agent.URL(), "echo", `{model: per_run, amount: "0.10", currency: EUR}`, ""),
	}})
	start := time.Now()
	res := g.call(t, "acme/hang", `{}`, "")
	if got, want := billingOf(res.Receipt), (billing{"failed", "timeout", false, "0.00"}); got != want {
		t.Fatalf("receipt %v, want %v", got, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the call took %v with a 1 s timeout", d)
	}
	select {
	case err := <-cancelled:
		if err == nil {
			t.Fatal("the handler was never cancelled")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler did not see the cancellation")
	}
	if res := g.call(t, "acme/echo", `{"after":"timeout"}`, ""); res.Receipt.Status != "succeeded" {
		t.Fatalf("after a timeout: %v (%s)", billingOf(res.Receipt), res.Message)
	}
}

// Ensure that an endpoint nobody listens on fails with runtime_unavailable,
// never billed.
func TestMCPRunner_Unreachable(t *testing.T) {
	dead := newMCPAgent(t, "", nil)
	url := dead.URL()
	dead.srv.Close()
	g := openRemote(t, rmConfig{manifests: []string{mcpManifest("gone", url, "echo", `{model: per_run, amount: "0.10", currency: EUR}`, "")}})
	res := g.call(t, "acme/gone", `{}`, "")
	if got, want := billingOf(res.Receipt), (billing{"failed", "runtime_unavailable", false, "0.00"}); got != want {
		t.Fatalf("receipt %v (%s), want %v", got, res.Message, want)
	}
	if !strings.Contains(res.Message, strings.TrimPrefix(url, "http://")) && !strings.Contains(res.Message, url) {
		t.Errorf("message %q does not name the endpoint", res.Message)
	}
}

// Ensure that an author's credential is sent as Authorization: Bearer on
// every request to that agent's endpoint, for all its versions, and to no
// other agent.
func TestMCPRunner_Credential(t *testing.T) {
	agent := newMCPAgent(t, "", map[string]mcp.ToolHandler{"echo": profileTools()["echo"]})
	g := openRemote(t, rmConfig{
		manifests: []string{
			mcpManifest("secret", agent.URL(), "echo", `{model: free}`, ""),
			mcpManifest("open", agent.URL(), "echo", `{model: free}`, ""),
		},
		remote: remote.Config{Credentials: func(id string) (string, bool) {
			return "s3cr3t-for-" + id, id == "acme/secret"
		}},
	})
	if res := g.call(t, "acme/secret", `{}`, ""); res.Receipt.Status != "succeeded" {
		t.Fatalf("secret: %v (%s)", billingOf(res.Receipt), res.Message)
	}
	withToken := agent.Auth()
	if len(withToken) == 0 {
		t.Fatal("no request reached the server")
	}
	for _, h := range withToken {
		if h != "Bearer s3cr3t-for-acme/secret" {
			t.Errorf("Authorization %q on a request for acme/secret", h)
		}
	}
	if res := g.call(t, "acme/open", `{}`, ""); res.Receipt.Status != "succeeded" {
		t.Fatalf("open: %v (%s)", billingOf(res.Receipt), res.Message)
	}
	for _, h := range agent.Auth()[len(withToken):] {
		if h != "" {
			t.Errorf("Authorization %q on a request for acme/open, which has no credential", h)
		}
	}
}

// Ensure that N sequential calls to one MCP agent reuse one session and
// open far fewer than N TCP connections, and that a restarted agent server
// (same address, its sessions gone) is reconnected to without failing a
// call.
func TestMCPRunner_ReusesConnections(t *testing.T) {
	agent := newMCPAgent(t, "", map[string]mcp.ToolHandler{"echo": profileTools()["echo"]})
	addr := agent.ln.Addr().String()
	url := agent.URL()
	g := openRemote(t, rmConfig{manifests: []string{mcpManifest("echo", url, "echo", `{model: free}`, "")}})
	const n = 20
	for i := range n {
		if res := g.call(t, "acme/echo", fmt.Sprintf(`{"i":%d}`, i), ""); res.Receipt.Status != "succeeded" {
			t.Fatalf("call %d: %v (%s)", i, billingOf(res.Receipt), res.Message)
		}
	}
	if got := agent.ln.accepted.Load(); got > 2 {
		t.Errorf("%d sequential calls opened %d connections, want at most 2", n, got)
	}
	if got := g.mcp.OpenSessions(url, false, ""); got != 1 {
		t.Errorf("%d sessions open, want 1", got)
	}
	if got := len(agent.Calls()); got != n {
		t.Errorf("the server saw %d calls, want %d", got, n)
	}

	agent.srv.Close()
	// The transport drops the connections the agent closed as soon as it
	// reads their end; a call written on one before that fails unbilled,
	// sent at most once (TestMCPRunner_StaleConnectionNotResent). This test
	// is about the calls after it did.
	g.mcp.ForgetIdleConnections()
	restarted := newMCPAgent(t, addr, map[string]mcp.ToolHandler{"echo": profileTools()["echo"]})
	for i := range 3 {
		if res := g.call(t, "acme/echo", `{"after":"restart"}`, ""); res.Receipt.Status != "succeeded" {
			t.Fatalf("call %d after the restart: %v (%s)", i, billingOf(res.Receipt), res.Message)
		}
	}
	if got := len(restarted.Calls()); got != 3 {
		t.Errorf("the restarted server saw %d calls, want 3 (each exactly once)", got)
	}
	if got := restarted.ln.accepted.Load(); got > 2 {
		t.Errorf("3 calls after the restart opened %d connections", got)
	}
}

// Ensure that the pool never opens more than MaxSessions sessions to one
// endpoint, however many calls run at once (the others wait), and closes
// sessions left idle for IdleTimeout.
func TestMCPRunner_PoolLimits(t *testing.T) {
	var mu sync.Mutex
	running, peak := 0, 0
	release := make(chan struct{})
	agent := newMCPAgent(t, "", map[string]mcp.ToolHandler{
		"wait": func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			running++
			peak = max(peak, running)
			mu.Unlock()
			select {
			case <-release:
			case <-ctx.Done():
			}
			mu.Lock()
			running--
			mu.Unlock()
			return &mcp.CallToolResult{StructuredContent: map[string]any{}}, nil
		},
	})
	url := agent.URL()
	g := openRemote(t, rmConfig{
		manifests: []string{mcpManifestT("wait", url, "wait", `{model: free}`, 5, "")},
		remote:    remote.Config{MaxSessions: 2, IdleTimeout: 300 * time.Millisecond},
	})
	var wg sync.WaitGroup
	results := make([]string, 5)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := g.eng.Call(context.Background(), gateway.CallInput{Mandate: "tess/remote", Agent: "acme/wait", Input: json.RawMessage(`{}`)})
			if err != nil {
				results[i] = err.Error()
				return
			}
			results[i] = res.Receipt.Status
		}()
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		r := running
		mu.Unlock()
		if r == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // a third session would have shown by now
	if got := g.mcp.OpenSessions(url, false, ""); got != 2 {
		t.Errorf("%d sessions open with 5 calls waiting, want MaxSessions = 2", got)
	}
	close(release)
	wg.Wait()
	for i, s := range results {
		if s != "succeeded" {
			t.Errorf("call %d: %s", i, s)
		}
	}
	if peak != 2 {
		t.Errorf("%d calls ran at once, want 2", peak)
	}
	deadline = time.Now().Add(3 * time.Second)
	for g.mcp.OpenSessions(url, false, "") != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := g.mcp.OpenSessions(url, false, ""); got != 0 {
		t.Errorf("%d sessions still open after the idle timeout", got)
	}
}

// jsonEq compares two JSON documents by value.
func jsonEq(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Errorf("not JSON: %s", got)
		return false
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatalf("want is not JSON: %s", want)
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// Ensure that a call that went out on a kept-alive connection the server
// had closed (it answers nothing) is not sent again, since the server may
// have read it: it fails as runtime_unavailable, unbilled, and the next call
// opens a fresh session over a fresh connection and succeeds.
func TestMCPRunner_StaleConnectionNotResent(t *testing.T) {
	var kl *killableListener
	agent := newMCPAgentWrapped(t, "", map[string]mcp.ToolHandler{"echo": profileTools()["echo"]}, func(l net.Listener) net.Listener {
		kl = &killableListener{Listener: l}
		return kl
	})
	g := openRemote(t, rmConfig{manifests: []string{mcpManifest("echo", agent.URL(), "echo", `{model: per_run, amount: "0.10", currency: EUR}`, "")}})
	for i := range 2 {
		if res := g.call(t, "acme/echo", `{}`, ""); res.Receipt.Status != "succeeded" {
			t.Fatalf("call %d: %v (%s)", i, billingOf(res.Receipt), res.Message)
		}
	}
	kl.killAll()
	res := g.call(t, "acme/echo", `{"after":"kill"}`, "")
	if got := billingOf(res.Receipt); got != (billing{"failed", "runtime_unavailable", false, "0.00"}) {
		t.Fatalf("after the connection died: %v (%s)", got, res.Message)
	}
	if res := g.call(t, "acme/echo", `{"after":"failure"}`, ""); res.Receipt.Status != "succeeded" {
		t.Fatalf("the call after the failure: %v (%s)", billingOf(res.Receipt), res.Message)
	}
	if n := len(agent.Calls()); n != 3 {
		t.Errorf("the tool ran %d times for 3 calls that reached it", n)
	}
}
