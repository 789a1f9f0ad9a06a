package agents_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon"
	"holon.dev/holon/appliance/agents"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
)

// Ensure that the host hands _meta["holon/files"] to its agents, which
// download and check the file; and that with --gateway set it fetches
// only links at those gateways, refusing any other address its caller
// names.
func TestHost_FileLinks(t *testing.T) {
	csv := []byte("a,b\n1,2\n3,4\n")
	sum := sha256.Sum256(csv)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v0/files/0123456789abcdef01234567" {
			http.NotFound(w, r)
			return
		}
		w.Write(csv)
	}))
	t.Cleanup(origin.Close)
	rt := gateway.NewDevRuntime()
	agents.Register(rt)
	h, err := agents.NewHost(agents.HostConfig{Manifests: []*contract.Manifest{manifest(t, "holon-labs/csv-profile")}, Runtime: rt, Gateways: []string{origin.URL}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	handle := "holon://files/0123456789abcdef01234567"
	call := func(url, sha string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "csv-profile",
			Arguments: map[string]any{"file": handle},
			Meta: mcp.Meta{"holon/files": map[string]any{handle: map[string]any{"url": url, "content_type": "text/csv",
				"size": len(csv), "sha256": sha, "expires": time.Now().Add(time.Minute)}}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	good := hex.EncodeToString(sum[:])
	if res := call(origin.URL+"/v0/files/0123456789abcdef01234567?exp=1&sig=x", good); res.IsError ||
		res.StructuredContent.(map[string]any)["rows"] != float64(2) {
		t.Errorf("a good link: %+v", res)
	}
	if res := call(origin.URL+"/v0/files/0123456789abcdef01234567", strings.Repeat("0", 64)); !res.IsError ||
		res.StructuredContent.(map[string]any)["error"].(map[string]any)["code"] != holon.CodeUnreadableDocument {
		t.Errorf("another SHA-256: %+v", res)
	}
	if res := call("http://169.254.169.254/v0/files/0123456789abcdef01234567", good); !res.IsError ||
		!strings.Contains(res.Content[0].(*mcp.TextContent).Text, "not at a gateway") {
		t.Errorf("a link elsewhere: %+v", res)
	}
}
