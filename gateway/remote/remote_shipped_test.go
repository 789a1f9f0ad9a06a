package remote_test

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon"
)

// Ensure that the engine tells a guarded runner which agents shipped with
// the gateway: a shipped MCP agent on loopback is reached through the
// guard, and the same agent, not shipped, is refused runtime_unavailable
// and never billed.
func TestEngine_ShippedAgentsExemptFromGuard(t *testing.T) {
	agent := newMCPAgent(t, "", map[string]mcp.ToolHandler{"echo": profileTools()["echo"]})
	perRun := `{model: per_run, amount: "0.10", currency: EUR}`
	for _, tt := range []struct {
		shipped bool
		status  string
	}{
		{shipped: true, status: holon.StatusSucceeded},
		{shipped: false, status: holon.StatusFailed},
	} {
		g := openRemote(t, rmConfig{
			manifests: []string{mcpManifest("echo", agent.URL(), "echo", perRun, "")},
			guarded:   true,
			shipped:   tt.shipped,
		})
		r := g.call(t, "acme/echo", `{"text": "hi"}`, "").Receipt
		if r.Status != tt.status {
			t.Errorf("shipped=%v: status %s (%v), want %s", tt.shipped, r.Status, r.Error, tt.status)
		}
		if !tt.shipped && (r.Error == nil || *r.Error != holon.CodeRuntimeUnavailable || r.Billed) {
			t.Errorf("guarded, not shipped: error %v billed %v, want runtime_unavailable, not billed", r.Error, r.Billed)
		}
	}
}
