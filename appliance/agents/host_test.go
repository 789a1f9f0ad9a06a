package agents_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon"
	"holon.dev/holon/appliance/agents"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/gateway/remote"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// hostMandate lets tess call holon-labs's agents, no approval.
const hostMandate = `
id: tess/host
issuer: tess
grantee: tess/assistant
currency: EUR
budget: { total: "50.00", per_call: "10.00" }
allow: { agents: ["holon-labs/*"], capabilities: ["*"] }
`

// servedHost serves the host of both sets (summarize answered by f) on
// loopback and returns its MCP endpoint.
func servedHost(t *testing.T, f *fakeMessages) string {
	t.Helper()
	rt := gateway.NewDevRuntime()
	agents.RegisterWith(rt, agents.Options{Summarize: f.config()})
	var ms []*contract.Manifest
	for _, set := range agents.Sets() {
		ms = append(ms, load(t, set)...)
	}
	h, err := agents.NewHost(agents.HostConfig{Manifests: ms, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Tools(); !slices.Contains(got, "csv-profile") || !slices.Contains(got, "summarize") || len(got) != len(ms) {
		t.Fatalf("tools %q", got)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// hostGateway is an engine listing the host's agents as mcp agents of
// endpoint; it checks the money at cleanup.
func hostGateway(t *testing.T, endpoint string) *gateway.Engine {
	t.Helper()
	reg := gateway.NewRegistry()
	var ms []*contract.Manifest
	for _, set := range agents.Sets() {
		for _, m := range load(t, set) {
			rm, err := agents.RemoteManifest(m, endpoint)
			if err != nil {
				t.Fatalf("RemoteManifest(%s): %v", m.Ref(), err)
			}
			if rm.Runtime.Kind != contract.RuntimeMCP || rm.Runtime.Tool != m.Name() || rm.Ref() != m.Ref() {
				t.Fatalf("RemoteManifest(%s) = %+v", m.Ref(), rm.Runtime)
			}
			ms = append(ms, rm)
		}
	}
	if err := reg.AddAll(ms, contract.AgentFacts{}, false); err != nil {
		t.Fatal(err)
	}
	s, err := kv.OpenStore(filepath.Join(t.TempDir(), "holon.db"), holon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runner := remote.NewMCPRunner(remote.Config{Guard: remote.NetGuard{AllowPrivate: true}})
	e := gateway.New(gateway.Config{Store: s, Registry: reg, SignupCredit: journal.MustParseAmount("100.00"),
		Runners: map[string]gateway.Runner{contract.RuntimeMCP: runner}})
	m, err := contract.ParseMandate([]byte(hostMandate))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.PutMandate(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		runner.Close()
		storetest.CheckMoney(t, s)
		s.Close()
	})
	return e
}

func hostCall(t *testing.T, e *gateway.Engine, agent, input, maxCost string) *gateway.CallResult {
	t.Helper()
	in := gateway.CallInput{Mandate: "tess/host", Agent: agent, Input: json.RawMessage(input)}
	if maxCost != "" {
		a := journal.MustParseAmount(maxCost)
		in.MaxCost = &a
	}
	res, err := e.Call(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Ensure that the agent host serves the shipped and demo agents over MCP
// following the profile, so that a gateway runs them as mcp agents with the
// same results and billing as in process: outputs, declared errors, units,
// and summarize's over_budget from holon/max_cost.
func TestHost_ServesTheProfile(t *testing.T) {
	f := newFakeMessages(t, func(c messagesCall) (int, string) {
		return http.StatusOK, message("Tables and lookups.", 1500, 40)
	})
	e := hostGateway(t, servedHost(t, f))
	csv := `{"csv":"city,pop\nLyon,522000\nNice,\n"}`
	local := run(t, manifest(t, "holon-labs/csv-profile"), csv)
	for _, tt := range []struct {
		name, agent, input, maxCost string
		status, code, own, output   string
		billed                      bool
	}{
		{"an output, as in process", "holon-labs/csv-profile", csv, "", "succeeded", "", "0.00", string(local.Output), true},
		{"a declared error", "holon-labs/csv-profile", `{"csv":""}`, "", "failed", "empty_input", "0.00", "", false},
		{"units", "holon-labs/text-tables", `{"text":"a, 1\nb, 2\nc, 3"}`, "", "succeeded", "", "0.012", "", true},
		{"summarize's units", "holon-labs/summarize", `{"text":"Some text to summarize."}`, "", "succeeded", "", "0.02", `{"summary":"Tables and lookups."}`, true},
		{"summarize over budget, up front", "holon-labs/summarize", `{"text":"` + textOf(30000) + `"}`, "0.05", "failed", "over_budget", "0.00", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := hostCall(t, e, tt.agent, tt.input, tt.maxCost)
			r := res.Receipt
			code := ""
			if r.Error != nil {
				code = *r.Error
			}
			if r.Status != tt.status || code != tt.code || r.Billed != tt.billed || r.Cost.Own.String() != tt.own {
				t.Fatalf("receipt %s/%s billed=%v own=%s (%s), want %s/%s billed=%v own=%s", r.Status, code, r.Billed, r.Cost.Own, res.Message, tt.status, tt.code, tt.billed, tt.own)
			}
			if tt.output != "" && string(res.Output) != tt.output {
				t.Errorf("output %s, want %s", res.Output, tt.output)
			}
		})
	}
	if n := len(f.Calls()); n != 1 {
		t.Errorf("the Messages API saw %d requests, want 1 (none for the run refused up front)", n)
	}
}

// Ensure that the host answers a caller that does not follow the profile
// with a failure without a code (agent_error at a gateway): arguments off
// the agent's interface.input, and a max_cost in another currency.
func TestHost_RefusesBadRequests(t *testing.T) {
	endpoint := servedHost(t, newFakeMessages(t, func(messagesCall) (int, string) { return 500, "" }))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v1"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, tt := range []struct {
		name string
		p    *mcp.CallToolParams
		want string
	}{
		{"arguments off interface.input", &mcp.CallToolParams{Name: "csv-profile", Arguments: map[string]any{"tsv": "a"}}, "interface.input"},
		{"max_cost in another currency", &mcp.CallToolParams{Name: "text-tables", Arguments: map[string]any{"text": "a, 1"},
			Meta: mcp.Meta{"holon/max_cost": map[string]any{"amount": "1.00", "currency": "USD"}}}, `"USD"`},
	} {
		res, err := cs.CallTool(context.Background(), tt.p)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		text := ""
		if len(res.Content) > 0 {
			text = res.Content[0].(*mcp.TextContent).Text
		}
		if !res.IsError || res.StructuredContent != nil || !strings.Contains(text, tt.want) {
			t.Errorf("%s: isError %v, structured %v, text %q; want a failure without a code saying %s", tt.name, res.IsError, res.StructuredContent, text, tt.want)
		}
	}
}
