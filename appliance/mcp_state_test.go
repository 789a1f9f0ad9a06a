package appliance_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon/appliance"
)

// statelessClient is a 2026-07-28 client that answers the approval form
// itself (the test sends the answer with the request state).
func statelessClient(t *testing.T, url, key string) *mcp.ClientSession {
	t.Helper()
	cs, err := dialMCPAt(url, key, "2026-07-28", &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return nil, nil },
		MultiRoundTrip:     &mcp.MultiRoundTripOptions{Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and fails the test on a protocol error.
func callTool(t *testing.T, cs *mcp.ClientSession, p *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// heldState calls the lookup, which the lab mandate holds for approval,
// and returns the request state of its answer.
func heldState(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	held := callTool(t, cs, &mcp.CallToolParams{Name: "call_agent", Arguments: lookupArgs()})
	if _, ok := held.InputRequests["approval"].(*mcp.ElicitParams); !ok || held.RequestState == "" {
		t.Fatalf("held call: %+v", held)
	}
	return held.RequestState
}

// answerState sends call_agent again with the approval form's decision
// and state.
func answerState(t *testing.T, cs *mcp.ClientSession, state, decision string) *mcp.CallToolResult {
	t.Helper()
	return callTool(t, cs, &mcp.CallToolParams{Name: "call_agent", Arguments: lookupArgs(), RequestState: state,
		InputResponses: mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": decision}}}})
}

// Ensure that on two gateways sharing one PostgreSQL store behind one
// public URL, a 2026-07-28 request state sealed by one gateway opens on
// the other: the approval answer for a call held through A, sent to B,
// decides the approval there and runs the call once (billed once); the
// same answer sent again, to A, runs nothing; and a state sealed by B is
// rejected through A.
func TestMCP_RequestStateSharedAcrossGateways(t *testing.T) {
	g := newBalancedPair(t, "mcpstates")
	ann := g.a.signup("ann")
	labMandate(ann)
	key, _ := ann.newKey("ann/lab", true)
	cs := statelessClient(t, g.lb.URL+"/mcp", key)

	g.route(g.a)
	state := heldState(t, cs)
	g.route(g.b)
	ok := answerState(t, cs, state, "approve")
	if ok.IsError || obj(ok.StructuredContent)["status"] != "succeeded" {
		t.Fatalf("the answer on B to a state A sealed: %+v", ok.StructuredContent)
	}
	g.route(g.a)
	if again := answerState(t, cs, state, "approve"); !again.IsError {
		t.Errorf("the same answer sent again, to A: %+v", again.StructuredContent)
	}
	if b := ann.balance(); b != "4.92" {
		t.Errorf("balance %s, want 4.92 (one lookup, billed once)", b)
	}
	id, _, _ := strings.Cut(state, ".")
	if got := g.b.as(ann.humanKey).must(http.StatusOK, "GET", "/v0/approvals/"+id, nil); got["status"] != "used" {
		t.Errorf("the approval answered on B: %v", got)
	}

	// The other way: sealed by B, rejected through A.
	g.route(g.b)
	state2 := heldState(t, cs)
	g.route(g.a)
	if rejected := answerState(t, cs, state2, "reject"); !rejected.IsError || !strings.Contains(str(rejected.StructuredContent), "approval_rejected") {
		t.Errorf("the rejection on A of a state B sealed: %+v", rejected.StructuredContent)
	}
	id2, _, _ := strings.Cut(state2, ".")
	if got := ann.human.must(http.StatusOK, "GET", "/v0/approvals/"+id2, nil); got["status"] != "rejected" {
		t.Errorf("the approval rejected on A: %v", got)
	}
	if b := ann.balance(); b != "4.92" {
		t.Errorf("balance %s after the rejection, want 4.92", b)
	}
	g.servedBoth(t)
}

// Ensure that on one gateway on the embedded store a 2026-07-28 request
// state outlives a restart: the answer to a call held before the restart,
// sent after it, approves the call, which runs once (billed once), with
// the key kept in the store (no HOLON_FILE_SECRET) and with the key
// derived from HOLON_FILE_SECRET.
func TestMCP_RequestStateSurvivesRestart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		secret string
	}{{"kept in the store", ""}, {"derived from the secret", testFileSecret}} {
		t.Run(tc.name, func(t *testing.T) {
			ta := newHostedApp(t, func(c *appliance.Config) { c.FileSecret = tc.secret })
			ann := ta.signup("ann")
			labMandate(ann)
			key, _ := ann.newKey("ann/lab", true)
			state := heldState(t, statelessClient(t, ta.srv.URL+"/mcp", key))

			ta.restart()
			cs := statelessClient(t, ta.srv.URL+"/mcp", key)
			ok := answerState(t, cs, state, "approve")
			if ok.IsError || obj(ok.StructuredContent)["status"] != "succeeded" {
				t.Fatalf("the answer after a restart: %+v", ok.StructuredContent)
			}
			if again := answerState(t, cs, state, "approve"); !again.IsError {
				t.Errorf("the same answer sent again: %+v", again.StructuredContent)
			}
			if b := ann.balance(); b != "4.92" {
				t.Errorf("balance %s, want 4.92 (one lookup, billed once)", b)
			}
		})
	}
}
