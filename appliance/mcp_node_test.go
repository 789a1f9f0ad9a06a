package appliance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"holon.dev/holon/appliance/npmtest"
)

// mcpClientDir holds the reference TypeScript client and its lockfile.
const mcpClientDir = "testdata/mcpclient"

// needNodeClient skips the test when node or the TypeScript client is
// missing, saying what to install; with HOLON_TEST_STRICT=1 (as in CI)
// it fails instead.
func needNodeClient(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	missing := ""
	switch {
	case err != nil:
		missing = "node is not installed (Node 20+: apt-get install nodejs npm)"
	default:
		// Installed from its lockfile into the user's cache, once.
		modules := npmtest.Install(t, mcpClientDir)
		if _, err := os.Stat(filepath.Join(modules, "@modelcontextprotocol", "sdk", "package.json")); err != nil {
			missing = "the reference MCP client is not installed: run npm ci in appliance/" + mcpClientDir
		}
	}
	if missing == "" {
		return node
	}
	if strings.TrimSpace(os.Getenv("HOLON_TEST_STRICT")) == "1" {
		t.Fatal(missing + " (HOLON_TEST_STRICT=1: failing instead of skipping)")
	}
	t.Skip(missing + " (skipped; HOLON_TEST_STRICT=1 makes this fail)")
	return ""
}

// Ensure that the reference TypeScript client (@modelcontextprotocol/sdk,
// run by Node) works against /mcp: it negotiates a stateful session, lists
// the tools, calls an agent and gets its output wrapped, answers the
// approval form of a held call (which then runs), gets a tool error with
// the gateway's code (each answer validated by the client against the
// tool's output schema), and after its key is revoked gets an HTTP 401.
func TestMCP_TypeScriptClient(t *testing.T) {
	node := needNodeClient(t)
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	labMandate(ann)
	key, prefix := ann.newKey("ann/lab", true)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = mcpClientDir
	cmd.Env = append(os.Environ(),
		"HOLON_MCP_URL="+ta.srv.URL+"/mcp", "HOLON_API="+ta.srv.URL,
		"HOLON_KEY="+key, "HOLON_HUMAN_KEY="+ann.humanKey, "HOLON_KEY_PREFIX="+prefix)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node client.mjs: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	var seen struct {
		SessionID       string   `json:"sessionId"`
		ProtocolVersion string   `json:"protocolVersion"`
		Tools           []string `json:"tools"`
		Echo, Lookup    struct {
			IsError    bool           `json:"isError"`
			Structured map[string]any `json:"structured"`
		}
		Missing struct {
			IsError    bool           `json:"isError"`
			Structured map[string]any `json:"structured"`
		}
		Forms []struct {
			Message string         `json:"message"`
			Schema  map[string]any `json:"schema"`
		}
		Budget      map[string]any `json:"budget"`
		Revoked     int            `json:"revoked"`
		AfterRevoke any            `json:"afterRevoke"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &seen); err != nil {
		t.Fatalf("client output: %v\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if seen.SessionID == "" || seen.ProtocolVersion != "2025-11-25" {
		t.Errorf("session %q, protocol %q: want a stateful session on 2025-11-25", seen.SessionID, seen.ProtocolVersion)
	}
	if got := strings.Join(seen.Tools, " "); got != "call_agent get_agent get_approval get_budget get_receipt list_approvals search_agents" {
		t.Errorf("tools: %s", got)
	}
	if e := seen.Echo.Structured; seen.Echo.IsError || e["status"] != "succeeded" {
		t.Errorf("echo: %v", seen.Echo)
	} else if out := unwrapJSON(t, str(e["output"]), "test-lab/echo@1.1.0"); obj(out)["text"] != "from TypeScript" {
		t.Errorf("echo output %v", out)
	}
	if len(seen.Forms) != 1 || !strings.Contains(seen.Forms[0].Message, "holon-labs/company-lookup@1.0.0") ||
		!strings.Contains(seen.Forms[0].Message, "0.08 EUR") || !strings.Contains(seen.Forms[0].Message, "ann/lab") {
		t.Errorf("approval forms: %+v", seen.Forms)
	}
	if l := seen.Lookup.Structured; seen.Lookup.IsError || l["status"] != "succeeded" || obj(l["approval"])["status"] != "used" {
		t.Errorf("the approved lookup: %v", seen.Lookup)
	}
	if m := seen.Missing; !m.IsError || obj(m.Structured["error"])["code"] != "not_found" {
		t.Errorf("unknown agent: %v, want a tool error not_found", m)
	}
	if seen.Budget["spent"] != "0.10" {
		t.Errorf("budget after echo (0.02) and lookup (0.08): %v", seen.Budget)
	}
	after, _ := json.Marshal(seen.AfterRevoke)
	if seen.Revoked != 200 || !strings.Contains(string(after), "401") || !strings.Contains(string(after), "invalid_key") {
		t.Errorf("after revoking the key (DELETE %d): %s, want an HTTP 401 invalid_key error", seen.Revoked, after)
	}
	if b := ann.balance(); b != "4.90" {
		t.Errorf("balance %s, want 4.90", b)
	}
}
