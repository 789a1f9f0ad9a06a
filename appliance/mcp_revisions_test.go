package appliance_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Ensure that a Go SDK client at 2026-07-28 (stateless: no session) and
// one at 2025-11-25 (a stateful session) each get the revision they ask
// for on the same /mcp, list the same tools, call an agent that needs
// approval, approve it in the client (a multi-round-trip input request
// in 2026-07-28, an elicitation request in 2025-11-25), and get the
// receipt; each call is billed once (the money is checked when the test
// ends).
func TestMCP_BothRevisions(t *testing.T) {
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(rev, func(t *testing.T) {
			ta := newHostedApp(t)
			ann := ta.signup("ann")
			labMandate(ann)
			key, _ := ann.newKey("ann/lab", true)
			forms := &mcpElicits{answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}}
			cs, err := dialMCPAt(ta.srv.URL+"/mcp", key, rev, &mcp.ClientOptions{ElicitationHandler: forms.handle})
			if err != nil {
				t.Fatalf("connect at %s: %v", rev, err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != rev {
				t.Fatalf("negotiated %s, want %s", got, rev)
			}
			if stateless := cs.ID() == ""; stateless != (rev == "2026-07-28") {
				t.Errorf("session id %q at %s", cs.ID(), rev)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			slices.Sort(names)
			if got := strings.Join(names, " "); got != "call_agent get_agent get_approval get_budget get_receipt list_approvals search_agents" {
				t.Errorf("tools: %s", got)
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_agent", Arguments: lookupArgs()})
			if err != nil {
				t.Fatal(err)
			}
			out, _ := res.StructuredContent.(map[string]any)
			shown := forms.shown()
			if len(shown) != 1 || !strings.Contains(shown[0], "holon-labs/company-lookup@1.0.0") || !strings.Contains(shown[0], "0.08 EUR") {
				t.Errorf("approval forms shown: %q", shown)
			}
			if res.IsError || out["status"] != "succeeded" {
				t.Fatalf("approved call: %v", out)
			}
			ap, r := obj(out["approval"]), obj(out["receipt"])
			if ap["status"] != "used" || str(ap["run"]) != str(r["id"]) || r["billed"] != true {
				t.Errorf("approval %v, receipt %v: want the approval used by this billed run", ap, r)
			}
			got, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_receipt", Arguments: map[string]any{"id": str(r["id"])}})
			if err != nil || got.IsError {
				t.Fatalf("get_receipt: %v %v", err, got)
			}
			if rc := obj(obj(got.StructuredContent)["receipt"]); rc["id"] != r["id"] || rc["status"] != "succeeded" || obj(rc["cost"])["total"] != "0.08" {
				t.Errorf("get_receipt: %v", got.StructuredContent)
			}
			if b := ann.balance(); b != "4.92" {
				t.Errorf("balance %s, want 4.92 (one lookup, billed once)", b)
			}
		})
	}
}

// Ensure that in 2026-07-28 the approval's request state cannot be
// forged or pointed at another key's approval, that rejecting through the
// input response rejects the call (nothing billed), and that sending an
// answered state again runs nothing twice.
func TestMCP_MultiRoundTripState(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	labMandate(ann)
	key, _ := ann.newKey("ann/lab", true)
	other, _ := ann.newKey("ann/lab", true)
	manual := &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return nil, nil },
		MultiRoundTrip:     &mcp.MultiRoundTripOptions{Disabled: true},
	}
	dial := func(key string) *mcp.ClientSession {
		cs, err := dialMCPAt(ta.srv.URL+"/mcp", key, "2026-07-28", manual)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	cs, cs2 := dial(key), dial(other)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := func(cs *mcp.ClientSession, p *mcp.CallToolParams) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	held := call(cs, &mcp.CallToolParams{Name: "call_agent", Arguments: lookupArgs()})
	form, ok := held.InputRequests["approval"].(*mcp.ElicitParams)
	if !ok || held.RequestState == "" || !strings.Contains(form.Message, "holon-labs/company-lookup@1.0.0") {
		t.Fatalf("held call: %+v", held)
	}
	approve := mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}}
	refused := func(res *mcp.CallToolResult, want string) {
		t.Helper()
		if !res.IsError || !strings.Contains(str(res.StructuredContent), want) {
			t.Errorf("answer %+v, want a tool error saying %q", res.StructuredContent, want)
		}
	}
	id, _, _ := strings.Cut(held.RequestState, ".")
	for _, forged := range []string{id, id + ".AAAA", "ap_unknown." + strings.Repeat("A", 43)} {
		refused(call(cs, &mcp.CallToolParams{Name: "call_agent", Arguments: lookupArgs(), InputResponses: approve, RequestState: forged}), "requestState is not one this gateway gave this key")
	}
	// Another key of the same human cannot answer it with the state.
	refused(call(cs2, &mcp.CallToolParams{Name: "call_agent", Arguments: lookupArgs(), InputResponses: approve, RequestState: held.RequestState}), "requestState is not one this gateway gave this key")
	// The state without the form's answer.
	refused(call(cs, &mcp.CallToolParams{Name: "call_agent", Arguments: lookupArgs(), RequestState: held.RequestState,
		InputResponses: mcp.InputResponseMap{"other": &mcp.ElicitResult{Action: "accept"}}}), "inputResponses.approval")
	if b := ann.balance(); b != "5.00" {
		t.Errorf("balance %s after refused answers, want 5.00", b)
	}

	ok1 := call(cs, &mcp.CallToolParams{Name: "call_agent", Arguments: lookupArgs(), InputResponses: approve, RequestState: held.RequestState})
	if ok1.IsError || obj(ok1.StructuredContent)["status"] != "succeeded" {
		t.Fatalf("approved: %+v", ok1.StructuredContent)
	}
	again := call(cs, &mcp.CallToolParams{Name: "call_agent", Arguments: lookupArgs(), InputResponses: approve, RequestState: held.RequestState})
	if !again.IsError {
		t.Errorf("the same answer sent again: %+v", again.StructuredContent)
	}
	if b := ann.balance(); b != "4.92" {
		t.Errorf("balance %s, want 4.92 (billed once)", b)
	}

	held2 := call(cs, &mcp.CallToolParams{Name: "call_agent", Arguments: lookupArgs()})
	rejected := call(cs, &mcp.CallToolParams{Name: "call_agent", Arguments: lookupArgs(), RequestState: held2.RequestState,
		InputResponses: mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "reject"}}}})
	refused(rejected, "approval_rejected")
	if b := ann.balance(); b != "4.92" {
		t.Errorf("balance %s after a rejection, want 4.92", b)
	}
	got := ann.human.must(http.StatusOK, "GET", "/v0/approvals/"+strings.SplitN(held2.RequestState, ".", 2)[0], nil)
	if got["status"] != "rejected" {
		t.Errorf("the rejected approval: %v", got)
	}
}

// Ensure that, at each revision, /mcp declares tools and no prompts or
// resources, and answers the methods of those it does not declare with
// method not found (the SDK would answer empty lists, which a 2026-07-28
// client may take for prompts offered without being declared).
func TestMCP_OnlyDeclaredCapabilities(t *testing.T) {
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(rev, func(t *testing.T) {
			ta := newHostedApp(t)
			ann := ta.signup("ann")
			cs, err := dialMCPAt(ta.srv.URL+"/mcp", ann.agentKey, rev, nil)
			if err != nil {
				t.Fatalf("connect at %s: %v", rev, err)
			}
			defer cs.Close()
			caps := cs.InitializeResult().Capabilities
			if caps.Tools == nil || caps.Prompts != nil || caps.Resources != nil {
				t.Errorf("capabilities %+v, want tools only (and logging)", caps)
			}
			ctx := context.Background()
			if _, err := cs.ListTools(ctx, nil); err != nil {
				t.Errorf("tools/list: %v", err)
			}
			for method, call := range map[string]func() error{
				"prompts/list":   func() error { _, err := cs.ListPrompts(ctx, nil); return err },
				"resources/list": func() error { _, err := cs.ListResources(ctx, nil); return err },
				"resources/read": func() error {
					_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "holon://receipts/r1"})
					return err
				},
			} {
				if err := call(); err == nil || !strings.Contains(err.Error(), "method not found") {
					t.Errorf("%s: %v, want method not found", method, err)
				}
			}
		})
	}
}
