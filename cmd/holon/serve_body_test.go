package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Ensure that holon serve cuts off a client that trickles its body (2 bytes
// a second) once --body-timeout has passed, while requests that answer for
// longer than that once their body is read (a slow call, an MCP session
// with its event stream and a tool call) keep working.
func TestServe_BodyTimeout(t *testing.T) {
	const bound = 500 * time.Millisecond
	registry, mandates := opsDirs(t)
	env := map[string]string{"HOLON_REGISTRY": "agents," + registry}
	rs := startServe(t, env, "--addr", "127.0.0.1:0", "--body-timeout", bound.String(),
		"--db", filepath.Join(t.TempDir(), "holon.db"), "--mandates", mandates)
	api := rs.addrs["api"]

	conn, err := net.Dial("tcp", api)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /v0/calls HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", api)
	closed := make(chan time.Duration, 1)
	go func() {
		io.Copy(io.Discard, conn) // until the server closes the connection
		closed <- time.Since(start)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var took time.Duration
trickle:
	for {
		conn.Write([]byte(`{"`)) // 2 bytes a second
		select {
		case took = <-closed:
			break trickle
		case <-tick.C:
		}
		if time.Since(start) > bound+5*time.Second {
			t.Fatalf("a body trickled at 2 bytes/s is still being read after %v (--body-timeout %v)", time.Since(start).Round(time.Millisecond), bound)
		}
	}
	if took < bound {
		t.Errorf("the slow body was cut off after %v, before --body-timeout %v", took, bound)
	}
	t.Logf("a body trickled at 2 bytes/s was cut off after %v (--body-timeout %v)", took.Round(time.Millisecond), bound)

	// A call that runs for longer than the bound after its body was read.
	c := &http.Client{Timeout: 20 * time.Second}
	var out map[string]any
	if status := do(t, c, "POST", "http://"+api+"/v0/calls", "", map[string]any{
		"mandate": "ops/test", "agent": "ops-test/slow", "input": map[string]any{"ms": 2 * bound.Milliseconds(), "word": "plain"},
	}, &out); status != http.StatusOK {
		t.Errorf("a slow call: %d %v", status, out)
	}

	// An MCP session: its event stream (GET) stays open past the bound, and
	// a tool call answers on POST after it.
	client := mcp.NewClient(&mcp.Implementation{Name: "holon-test", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + api + "/mcp?mandate=ops/test", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_agent", Arguments: map[string]any{
		"agent": "ops-test/slow", "input": map[string]any{"ms": 2 * bound.Milliseconds(), "word": "mcp"},
	}})
	if err != nil || res.IsError {
		t.Fatalf("MCP call_agent running past the bound: %v %+v", err, res)
	}
	time.Sleep(bound + 500*time.Millisecond)
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Errorf("MCP session after idling past the bound: %v", err)
	}
}
