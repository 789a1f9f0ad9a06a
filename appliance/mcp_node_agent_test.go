package appliance_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"
)

// Ensure that the gateway calls an MCP agent built with the reference
// TypeScript SDK (testdata/mcpclient/agent.mjs, run by Node) as it calls a
// Go one: over an event stream and over plain JSON answers, each call's
// output is the tool's structuredContent and the session is reused; the
// hard timeout cancels the TypeScript handler (its AbortSignal fires) and
// the session's next call succeeds.
func TestMCPRunner_TypeScriptAgent(t *testing.T) {
	node := needNodeClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, "agent.mjs")
	cmd.Dir = mcpClientDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	var urls struct{ SSE, JSON string }
	if err != nil || json.Unmarshal(line, &urls) != nil {
		t.Fatalf("node agent.mjs: %q, %v\nstderr:\n%s", line, err, stderr.String())
	}
	remote := func(name, endpoint, tool, extra string) string {
		return fmt.Sprintf(`{ kind: mcp, endpoint: %q, tool: %s%s }`, endpoint, tool, extra)
	}
	fa := newFilesApp(t,
		withRemote(t, "ts-echo", "Echoes, over an event stream.", remote("ts-echo", urls.SSE, "echo", "")),
		withRemote(t, "ts-echo-json", "Echoes, in plain JSON.", remote("ts-echo-json", urls.JSON, "echo", "")),
		withRemote(t, "ts-hang", "Hangs until cancelled.", remote("ts-hang", urls.SSE, "hang", ", limits: { timeout_s: 1 }")),
		withRemote(t, "ts-cancelled", "Counts the cancelled hangs.", remote("ts-cancelled", urls.SSE, "cancelled", "")),
	)
	ann := fa.signup("ann")
	mandate := filesMandate(ann)
	call := func(agent string, input map[string]any) (status string, code any, out map[string]any) {
		t.Helper()
		st, ans := ann.human.callWith(mandate, agent, input)
		r := receiptOf(ans)
		if r == nil {
			t.Fatalf("%s: HTTP %d %v", agent, st, ans)
		}
		o, _ := ans["output"].(map[string]any)
		return fmt.Sprint(r["status"]), r["error"], o
	}
	for _, agent := range []string{"test-lab/ts-echo", "test-lab/ts-echo-json"} {
		for i := range 3 {
			status, code, out := call(agent, map[string]any{"n": i, "s": "<&>"})
			if status != "succeeded" || fmt.Sprint(out) != fmt.Sprint(map[string]any{"n": float64(i), "s": "<&>"}) {
				t.Fatalf("%s call %d: %s/%v, output %v", agent, i, status, code, out)
			}
		}
	}
	start := time.Now()
	if status, code, _ := call("test-lab/ts-hang", map[string]any{}); status != "failed" || code != "timeout" {
		t.Fatalf("hang: %s/%v, want failed/timeout", status, code)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the call took %v with a 1 s timeout", d)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, code, out := call("test-lab/ts-cancelled", map[string]any{})
		if status != "succeeded" {
			t.Fatalf("after the timeout: %s/%v", status, code)
		}
		if out["cancelled"] == float64(1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the TypeScript handler was not cancelled: %v", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
