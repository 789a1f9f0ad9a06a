package remote_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file checks that a remote agent is sent a call at most once: a
// request that may have reached it is never sent again, even when the
// connection it went out on failed before any answer.

// Ensure that a webhook call whose kept-alive connection is closed by the
// agent after it read the whole request, with no answer, reaches the agent
// exactly once and fails as agent_error, unbilled, with no hold left (the
// money is checked at cleanup); the next call, on a fresh connection,
// succeeds.
func TestWebhookRunner_SentAtMostOnce(t *testing.T) {
	var mu sync.Mutex
	var bodies, addrs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies, addrs = append(bodies, string(b)), append(addrs, r.RemoteAddr)
		n := len(bodies)
		mu.Unlock()
		if n == 2 {
			// Read, counted, then the connection closes without an answer.
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	g := openRemote(t, rmConfig{manifests: []string{webhookManifest("once", srv.URL, `{model: per_run, amount: "0.10", currency: EUR}`, "")}})
	if res := g.call(t, "acme/once", `{"n":1}`, ""); billingOf(res.Receipt) != (billing{"succeeded", "", true, "0.10"}) {
		t.Fatalf("first call: %v (%s)", billingOf(res.Receipt), res.Message)
	}
	res := g.call(t, "acme/once", `{"n":2}`, "")
	if got := billingOf(res.Receipt); got != (billing{"failed", "agent_error", false, "0.00"}) {
		t.Errorf("call cut after it was read: %v (%s), want failed/agent_error unbilled", got, res.Message)
	}
	mu.Lock()
	if len(addrs) >= 2 && addrs[0] != addrs[1] {
		t.Fatalf("the second call went out on a new connection (%s, then %s): the test needs a reused one", addrs[0], addrs[1])
	}
	if n := len(bodies); n != 2 {
		t.Errorf("the agent received %d requests for 2 calls: %q", n, bodies)
	}
	mu.Unlock()
	if res := g.call(t, "acme/once", `{"n":3}`, ""); billingOf(res.Receipt) != (billing{"succeeded", "", true, "0.10"}) {
		t.Errorf("the call after: %v (%s)", billingOf(res.Receipt), res.Message)
	}
}

// connTracker is a listener that can close every connection it accepted,
// as a server that dies mid-request would.
type connTracker struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *connTracker) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *connTracker) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
}

// Ensure that an MCP tools/call that reached the tool, whose connection
// then closed with no answer, is not sent again on a fresh session: the
// tool ran once, the call fails unbilled with no hold left (the money is
// checked at cleanup), and the next call opens a fresh session and
// succeeds.
func TestMCPRunner_SentAtMostOnce(t *testing.T) {
	var ct *connTracker
	var mu sync.Mutex
	runs := 0
	agent := newMCPAgentWrapped(t, "", map[string]mcp.ToolHandler{
		"once": func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			runs++
			n := runs
			mu.Unlock()
			if n == 2 {
				ct.closeAll() // the answer has nowhere to go
			}
			return &mcp.CallToolResult{StructuredContent: map[string]any{"ok": true}}, nil
		},
	}, func(l net.Listener) net.Listener {
		ct = &connTracker{Listener: l}
		return ct
	})
	g := openRemote(t, rmConfig{manifests: []string{mcpManifest("once", agent.URL(), "once", `{model: per_run, amount: "0.10", currency: EUR}`, "")}})
	if res := g.call(t, "acme/once", `{"n":1}`, ""); billingOf(res.Receipt) != (billing{"succeeded", "", true, "0.10"}) {
		t.Fatalf("first call: %v (%s)", billingOf(res.Receipt), res.Message)
	}
	res := g.call(t, "acme/once", `{"n":2}`, "")
	if got := billingOf(res.Receipt); got.status != "failed" || got.billed || got.own != "0.00" {
		t.Errorf("call cut after the tool got it: %v (%s), want failed unbilled", got, res.Message)
	}
	if n := len(agent.Calls()); n != 2 {
		t.Errorf("the tool received %d calls for 2", n)
	}
	if res := g.call(t, "acme/once", `{"n":3}`, ""); billingOf(res.Receipt) != (billing{"succeeded", "", true, "0.10"}) {
		t.Errorf("the call after: %v (%s)", billingOf(res.Receipt), res.Message)
	}
}
