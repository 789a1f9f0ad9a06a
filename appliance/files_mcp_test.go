package appliance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/agents"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// withRemoteAgents serves the shipped csv-profile and the demo
// text-tables from an agent host (a real MCP server of the Go SDK) on
// loopback, and lists them as mcp agents test-lab/csv-profile and
// test-lab/text-tables: they get _meta["holon/files"] and download over
// HTTP, through the gateway's public origin.
func withRemoteAgents(t *testing.T) func(*appliance.Config) {
	t.Helper()
	rt := gateway.NewDevRuntime()
	agents.Register(rt)
	var ms []*contract.Manifest
	for _, set := range agents.Sets() {
		all, err := agents.Load(set)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range all {
			if m.ID == "holon-labs/csv-profile" || m.ID == "holon-labs/text-tables" {
				ms = append(ms, m)
			}
		}
	}
	h, err := agents.NewHost(agents.HostConfig{Manifests: ms, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	reg := map[string]string{}
	for _, m := range ms {
		rm, err := agents.RemoteManifest(m, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		json.Unmarshal(mustJSON(t, rm), &doc)
		doc["id"] = strings.Replace(m.ID, "holon-labs/", "test-lab/", 1)
		reg[m.Name()+".json"] = string(mustJSON(t, doc))
	}
	return func(c *appliance.Config) {
		c.AllowPrivateEndpoints = true
		c.Registry = append(c.Registry, writeRegistry(t, reg))
	}
}

// Ensure that MCP agents on loopback download their files through
// _meta["holon/files"] and check size and SHA-256: csv-profile and
// text-tables answer from the file; a file altered after its upload, or
// truncated, makes them fail with the declared unreadable_document, which
// is not billed.
func TestFiles_MCPAgentDownloads(t *testing.T) {
	fa := newFilesApp(t, withRemoteAgents(t))
	ann := fa.signup("ann")
	mandate := filesMandate(ann)
	csv := []byte("name,age\nAda,36\nGrace,45\n")
	h := ann.agent.mustUpload("text/csv", csv)
	status, out := ann.human.callWith(mandate, "test-lab/csv-profile", map[string]any{"file": h})
	output, _ := out["output"].(map[string]any)
	if status != http.StatusOK || output["rows"] != float64(2) {
		t.Fatalf("csv-profile over MCP with a file: %d %v", status, out)
	}
	status, out = ann.human.callWith(mandate, "test-lab/text-tables", map[string]any{"file": h})
	if r := receiptOf(out); status != http.StatusOK || r["billed"] != true || r["cost"].(map[string]any)["total"] != "0.012" {
		t.Fatalf("text-tables over MCP with a file: %d %v", status, out)
	}

	blob := filepath.Join(fa.cfg.DB+".files", "blobs", sha256Hex(csv)[:2], sha256Hex(csv))
	balance := ann.balance()
	for name, damage := range map[string][]byte{
		"altered":   bytes.Replace(csv, []byte("36"), []byte("63"), 1),
		"truncated": csv[:len(csv)-5],
	} {
		if err := os.WriteFile(blob, damage, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, agent := range []string{"test-lab/csv-profile", "test-lab/text-tables"} {
			status, out := ann.human.callWith(mandate, agent, map[string]any{"file": h})
			r := receiptOf(out)
			if status != http.StatusBadGateway || errorCode(out) != holon.CodeUnreadableDocument || r["billed"] != false {
				t.Errorf("%s file, %s: %d %v", name, agent, status, out)
			}
			t.Logf("%s, %s: %v", name, agent, out["error"])
		}
	}
	if got := ann.balance(); got != balance {
		t.Errorf("balance %s, then %s: a damaged file was billed", balance, got)
	}
}

// Ensure that the worked example of files.md holds: four invoices of 1.2
// MB each are uploaded and given to text-tables, one call per file at
// 0.004 EUR (one row each); two parse, one is a letter with no table
// (no_table_found), one was truncated in the middle of a character
// (unreadable_document); the caller pays 0.008 EUR, and 24 hours later the
// four files are gone, called or not.
func TestFiles_WorkedExample(t *testing.T) {
	fa := newFilesApp(t)
	ann := fa.signup("ann")
	mandate := filesMandate(ann)
	pad := strings.Repeat("Payment is due within thirty days of the invoice date — thank you.\n", 600_000/70)
	invoice := func(line string) []byte { return []byte("INVOICE\n" + pad + line + "\n" + pad) }
	docs := [][]byte{
		invoice("Consulting day, 1, 950.00"),
		invoice("Licence renewal, 1, 1200.00"),
		[]byte("Dear Ann\n" + pad + "We are writing to thank you\n" + pad),
	}
	cut := invoice("Hosting, 12, 40.00")
	dash := bytes.LastIndex(cut[:len(cut)-1000], []byte("—"))
	docs = append(docs, cut[:dash+1]) // cut inside a "—"
	var handles []string
	for _, d := range docs {
		if len(d) < 1_100_000 || len(d) > 1_300_000 {
			t.Fatalf("an invoice of %d bytes, want about 1.2 MB", len(d))
		}
		handles = append(handles, ann.human.mustUpload("text/plain", d))
	}
	before := ann.balance()
	want := []string{"", "", "no_table_found", holon.CodeUnreadableDocument}
	for i, h := range handles {
		_, out := ann.human.callWith(mandate, "holon-labs/text-tables", map[string]any{"file": h})
		if got := errorCode(out); got != want[i] {
			t.Errorf("invoice %d: error %q, want %q: %v", i+1, got, want[i], out)
		}
	}
	paid := journal.MustParseAmount(before) - journal.MustParseAmount(ann.balance())
	if paid != journal.MustParseAmount("0.008") {
		t.Errorf("ann paid %s, want 0.008", paid)
	}
	fa.advance(24 * time.Hour)
	if n, err := fa.app.SweepFiles(context.Background()); err != nil || n != 4 {
		t.Errorf("24 hours later: %d files deleted, %v", n, err)
	}
	status, out := ann.human.callWith(mandate, "holon-labs/text-tables", map[string]any{"file": handles[0]})
	if status != http.StatusNotFound || errorCode(out) != "file_not_found" {
		t.Errorf("a day-old handle: %d %v", status, out)
	}
	if got := blobs(t, fa.cfg.DB+".files"); len(got) != 0 {
		t.Errorf("bytes left: %v", got)
	}
}

// Ensure that the README's flow works: an assistant connected to /mcp
// with its agent key uploads a file with the same key over HTTP and puts
// the handle in call_agent; a handle of another account's file is
// file_not_found there too.
func TestFiles_AssistantFlowOverMCP(t *testing.T) {
	fa := newFilesApp(t)
	ann, bob := fa.signup("ann"), fa.signup("bob")
	s := connectMCP(t, fa.srv.URL+"/mcp", ann.agentKey, nil)
	h := ann.agent.mustUpload("text/plain", []byte("Order 12\nBolts, 100, 4.00\nNuts, 100, 2.00\n"))
	out := s.ok("call_agent", map[string]any{"agent": "holon-labs/text-tables", "input": map[string]any{"file": h}})
	if out["status"] != "succeeded" || !strings.Contains(str(out["output"]), "Bolts") {
		t.Errorf("call_agent with the handle: %v", out)
	}
	bobs := bob.agent.mustUpload("text/plain", []byte("Bob's\nA, 1\n"))
	s.fails("file_not_found", "call_agent", map[string]any{"agent": "holon-labs/text-tables", "input": map[string]any{"file": bobs}})
}

// Ensure that _meta["holon/files"] is, for each handle of the input, an
// object of exactly url, content_type, size, sha256 and expires, as a Go
// SDK MCP server on loopback receives it; and that an input without a
// handle sends no holon/files.
func TestFiles_MCPMeta(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "peek", Version: "v0"}, nil)
	server.AddTool(&mcp.Tool{Name: "peek", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			files, sent := req.Params.GetMeta()["holon/files"]
			return &mcp.CallToolResult{StructuredContent: map[string]any{"files": files, "sent": sent}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	fa := newFilesApp(t, withRemote(t, "peek", "Answers with the holon/files it was sent.", `{ kind: mcp, endpoint: "`+srv.URL+`", tool: peek }`))
	ann := fa.signup("ann")
	mandate := filesMandate(ann)
	doc := []byte("a,b\n1,2\n")
	h := ann.human.mustUpload("text/csv", doc)
	status, out := ann.human.callWith(mandate, "test-lab/peek", map[string]any{"doc": h})
	output, _ := out["output"].(map[string]any)
	files, _ := output["files"].(map[string]any)
	entry, _ := files[h].(map[string]any)
	if status != http.StatusOK || len(files) != 1 || len(entry) != 5 {
		t.Fatalf("holon/files: %d %v", status, out)
	}
	if !strings.HasPrefix(str(entry["url"]), fa.cfg.PublicURL+"/v0/files/") || entry["content_type"] != "text/csv" ||
		entry["size"] != float64(len(doc)) || entry["sha256"] != sha256Hex(doc) || entry["expires"] != "2026-12-01T09:15:00Z" {
		t.Errorf("holon/files[%s] = %v", h, entry)
	}
	_, out = ann.human.callWith(mandate, "test-lab/peek", map[string]any{"doc": "no handle"})
	if output, _ := out["output"].(map[string]any); output["sent"] != false {
		t.Errorf("without a handle: %v", out)
	}
}
