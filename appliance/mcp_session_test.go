package appliance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawMCP sends one JSON-RPC message to /mcp as a client would, with a key
// and a session id, and returns the status and body.
func rawMCP(t *testing.T, url, method, key, session string, msg any) (int, http.Header, []byte) {
	t.Helper()
	var body io.Reader
	if msg != nil {
		b, err := json.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

var listTools = map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": map[string]any{}}

// waitClosed waits for a client session to end.
func waitClosed(t *testing.T, cs *mcp.ClientSession, within time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { cs.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("the session is still open after %s", within)
	}
}

// Ensure that a key revoked mid-session gets an authentication error on
// its next request (401 with WWW-Authenticate, invalid_key), and that the
// gateway ends its open session at once even if the client sends nothing:
// its event stream closes.
func TestMCP_RevokedKeyMidSession(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	labMandate(ann)
	key, prefix := ann.newKey("ann/lab", false)
	s := connectMCP(t, ta.srv.URL+"/mcp", key, nil)
	idle := connectMCP(t, ta.srv.URL+"/mcp", key, nil)
	s.ok("get_budget", map[string]any{})
	sid := s.cs.ID()

	ann.human.must(http.StatusOK, "DELETE", "/v0/keys/"+prefix, nil)

	status, h, body := rawMCP(t, ta.srv.URL+"/mcp", "POST", key, sid, listTools)
	if status != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") || !strings.Contains(string(body), "invalid_key") {
		t.Errorf("the revoked key's next request: %d %q %s, want 401 invalid_key with WWW-Authenticate", status, h.Get("WWW-Authenticate"), body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_budget", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("the Go client after revocation: %v, want an Unauthorized error", err)
	}
	// The idle session sent nothing: the gateway closes it all the same.
	waitClosed(t, idle.cs, 10*time.Second)
	if b := ann.balance(); b != "5.00" {
		t.Errorf("balance %s", b)
	}
}

// Ensure that /mcp takes agent keys only, and that a session belongs to
// the key that opened it: another key of the same account is refused on
// it (403), a human key, the admin key and no key are refused outright.
func TestMCP_Principals(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	labMandate(ann)
	other, _ := ann.newKey("ann/lab", false)
	s := connectMCP(t, ta.srv.URL+"/mcp", ann.agentKey, nil)
	url := ta.srv.URL + "/mcp"
	if status, _, body := rawMCP(t, url, "POST", other, s.cs.ID(), listTools); status != http.StatusForbidden {
		t.Errorf("another key on the session: %d %s, want 403", status, body)
	}
	if status, _, body := rawMCP(t, url, "DELETE", other, s.cs.ID(), nil); status != http.StatusForbidden {
		t.Errorf("another key deleting the session: %d %s, want 403", status, body)
	}
	s.ok("get_budget", map[string]any{}) // still the owner's
	for _, tc := range []struct {
		name, key string
		status    int
		code      string
	}{
		{"human key", ann.humanKey, http.StatusForbidden, "forbidden"},
		{"admin key", testAdminKey, http.StatusForbidden, "forbidden"},
		{"no key", "", http.StatusUnauthorized, "unauthenticated"},
		{"unknown key", "hlk_a_" + strings.Repeat("a", 52), http.StatusUnauthorized, "invalid_key"},
	} {
		status, _, body := rawMCP(t, url, "POST", tc.key, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
			"params": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "x", "version": "1"}}})
		if status != tc.status || !strings.Contains(string(body), `"`+tc.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, body, tc.status, tc.code)
		}
	}
	if _, err := dialMCP(url, ann.humanKey, nil); err == nil {
		t.Error("a human key opened a session")
	}
}

// Ensure that a session ends cleanly when its client deletes it: its id
// is unknown afterwards (404); and that a key keeps at most 16 sessions,
// a new one ending the oldest.
func TestMCP_SessionDelete(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	url := ta.srv.URL + "/mcp"
	cs, err := dialMCP(url, ann.agentKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	sid := cs.ID()
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if status, _, body := rawMCP(t, url, "POST", ann.agentKey, sid, listTools); status != http.StatusNotFound {
		t.Errorf("the deleted session: %d %s, want 404", status, body)
	}

	first := connectMCP(t, url, ann.agentKey, nil)
	for i := 0; i < 16; i++ {
		connectMCP(t, url, ann.agentKey, nil)
	}
	waitClosed(t, first.cs, 10*time.Second)
	if status, _, _ := rawMCP(t, url, "POST", ann.agentKey, first.cs.ID(), listTools); status != http.StatusNotFound {
		t.Errorf("the 17th session did not end the first: %d", status)
	}
}

// Ensure that the MCP sessions end cleanly when the gateway shuts down
// (holon serve's http.Server.Shutdown): a call running then finishes and
// its answer reaches the client, an approval form still open stops
// waiting (its approval stays pending), every session's event stream
// ends, and Shutdown returns without waiting for its deadline.
func TestMCP_Shutdown(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	labMandate(ann)
	key, _ := ann.newKey("ann/lab", true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: ta.app.Handler()}
	go srv.Serve(ln)
	url := "http://" + ln.Addr().String() + "/mcp"

	running := connectMCP(t, url, key, nil)
	type answer struct {
		res *mcp.CallToolResult
		out map[string]any
		err error
	}
	ran := make(chan answer, 1)
	go func() {
		res, out, err := running.try("call_agent", map[string]any{"agent": "test-lab/slow", "input": map[string]any{"n": 1}})
		ran <- answer{res, out, err}
	}()
	ta.waitStarted()

	formShown := make(chan struct{})
	never := make(chan struct{})
	defer close(never)
	asking := connectMCP(t, url, key, func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		close(formShown)
		select {
		case <-never:
		case <-ctx.Done():
		}
		return nil, errors.New("no answer")
	})
	held := make(chan answer, 1)
	go func() {
		res, out, err := asking.try("call_agent", lookupArgs())
		held <- answer{res, out, err}
	}()
	<-formShown
	idle := connectMCP(t, url, key, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	start := time.Now()
	go func() { stopped <- srv.Shutdown(ctx) }()

	select {
	case a := <-held:
		if a.err != nil || a.out["status"] != "pending_approval" || obj(a.out["approval"])["status"] != "pending" {
			t.Errorf("the call whose form was open: %v %v, want pending_approval", a.out, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the open approval form did not stop waiting")
	}
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned (%v) while a call was running", err)
	case <-time.After(200 * time.Millisecond):
	}
	ta.letGo()
	select {
	case a := <-ran:
		if a.err != nil || a.res.IsError || a.out["status"] != "succeeded" {
			t.Errorf("the running call: %v %v", a.out, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the running call did not answer")
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return: an MCP stream kept it waiting")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("Shutdown took %s", d)
	}
	waitClosed(t, idle.cs, 5*time.Second)
	if b := ann.balance(); b != "4.99" {
		t.Errorf("balance %s, want 4.99 (the slow call)", b)
	}
}
