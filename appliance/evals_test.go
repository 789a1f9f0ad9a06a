package appliance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
)

// tableServer is a real MCP server on loopback whose tool finds the table
// of a text (extraction.table), correctly or, when sloppy, dropping the
// last row. Until the test opens gate, every run waits.
type tableServer struct {
	srv    *httptest.Server
	gate   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	inputs []string
}

func newTableServer(t *testing.T) *tableServer {
	t.Helper()
	ts := &tableServer{gate: make(chan struct{})}
	s := mcp.NewServer(&mcp.Implementation{Name: "lena-tables", Version: "v1"}, nil)
	for _, sloppy := range []bool{false, true} {
		name := "tables"
		if sloppy {
			name = "tables-sloppy"
		}
		s.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			ts.mu.Lock()
			ts.inputs = append(ts.inputs, in.Text)
			ts.mu.Unlock()
			select {
			case <-ts.gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			rows := tableRows(in.Text)
			if len(rows) == 0 {
				return &mcp.CallToolResult{IsError: true, StructuredContent: map[string]any{
					"error": map[string]any{"code": "no_table_found", "message": "no line has two cells"}}}, nil
			}
			if sloppy && len(rows) > 1 {
				rows = rows[:len(rows)-1]
			}
			return &mcp.CallToolResult{StructuredContent: map[string]any{"rows": rows}}, nil
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.srv = httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	ts.srv.Listener = ln
	ts.srv.Start()
	t.Cleanup(ts.srv.Close)
	return ts
}

// tableRows are the lines of a text with a comma, split into trimmed cells.
func tableRows(text string) [][]string {
	rows := [][]string{}
	for _, line := range strings.Split(text, "\n") {
		if !strings.Contains(line, ",") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(line, ",") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	return rows
}

func (ts *tableServer) open() { ts.once.Do(func() { close(ts.gate) }) }

// sawInput reports whether the server was sent an input containing s.
func (ts *tableServer) sawInput(s string) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, in := range ts.inputs {
		if strings.Contains(in, s) {
			return true
		}
	}
	return false
}

// tableManifest is lena's extraction.table agent on the table server.
func tableManifest(t *testing.T, version, endpoint, tool string) *contract.Manifest {
	t.Helper()
	m, err := contract.ParseManifest([]byte(fmt.Sprintf(`
id: lena/tables
version: %s
summary: Finds the table of a text, on lena's own MCP server.
license: proprietary
capabilities: [extraction.table]
interface:
  input: { type: object, required: [text], properties: { text: { type: string } } }
  output: { type: object, required: [rows], properties: { rows: { type: array } } }
  errors:
    no_table_found: { billed: false, description: No table. }
pricing: { model: per_run, amount: "0.05", currency: EUR }
runtime: { kind: mcp, endpoint: %q, tool: %s, limits: { timeout_s: 20 } }
data: { retention: none, regions: [eu], training: false }
`, version, endpoint, tool)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// hiddenSuite is an operator's private extraction.table suite: two public
// cases and two hidden ones, whose ids and inputs must never show.
const hiddenSuite = `
capability: extraction.table
cases:
  - id: two-rows
    public: true
    input: { text: "a,b\nc,d\n" }
    expect: { output_contains: { rows: [[a, b], [c, d]] } }
  - id: none
    public: true
    input: { text: "prose only" }
    expect: { error: no_table_found }
  - id: holdout-secret-17
    public: false
    input: { text: "zebra-holdout,1\nyak-holdout,2\n" }
    expect: { output_contains: { rows: [[zebra-holdout, "1"], [yak-holdout, "2"]] } }
  - id: holdout-secret-18
    public: false
    input: { text: "no table, here\n" }
    expect: { output_contains: { rows: [[no table, here]] } }
`

// Ensure that a published MCP agent is evaluated when the seam is called:
// its results reach the catalogue and the author's view (hidden cases as
// counts only), a mandate with require.evaluated is denied until it passed
// and admits it after, and a version that fails a case stays refused.
func TestEvaluate_PublishedMCPAgent(t *testing.T) {
	private := t.TempDir()
	if err := os.MkdirAll(filepath.Join(private, "extraction.table"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(private, "extraction.table", "suite.yaml"), []byte(hiddenSuite), 0o644); err != nil {
		t.Fatal(err)
	}
	ta := newHostedApp(t, func(c *appliance.Config) {
		c.AllowPrivateEndpoints = true // the agent's server is on loopback
		c.PrivateEvals = private
	})
	ts := newTableServer(t)
	lena := ta.signup("lena")
	bob := ta.signup("bob")
	bob.createMandate("strict", map[string]any{
		"budget": map[string]any{"total": "1.00"}, "allow": map[string]any{"agents": []string{"lena/*"}},
		"require": map[string]any{"evaluated": true},
	})
	bob.createMandate("loose", map[string]any{
		"budget": map[string]any{"total": "1.00"}, "allow": map[string]any{"agents": []string{"lena/*"}},
	})
	ctx := context.Background()
	if err := ta.app.RegisterVersion(ctx, tableManifest(t, "1.0.0", ts.srv.URL, "tables")); err != nil {
		t.Fatal(err)
	}
	call := func(mandate, version string) (int, map[string]any) {
		return bob.human.do("POST", "/v0/calls", map[string]any{"mandate": mandate, "agent": "lena/tables@" + version,
			"input": map[string]any{"text": "x,y\n"}})
	}
	// The evaluation is running (the server holds it): not yet passed.
	if status, out := call("bob/strict", "1.0.0"); status != http.StatusForbidden || errorCode(out) != holon.CodeRequirementNotMet {
		t.Fatalf("before the evaluation: %d %v, want 403 requirement_not_met", status, out)
	}
	cat := ta.anonymous().must(http.StatusOK, "GET", "/v0/catalog?q=lena", nil)
	if ev := firstAgent(t, cat)["measured"].(map[string]any)["evaluation"].(map[string]any); ev["queued"] != true {
		t.Errorf("catalogue during the evaluation: %v, want queued", ev)
	}
	ts.open()
	if err := ta.app.WaitEvaluations(ctx); err != nil {
		t.Fatal(err)
	}
	if !ts.sawInput("zebra-holdout") {
		t.Fatal("the hidden cases did not reach the agent's server: the private suite was not used")
	}
	if status, out := call("bob/strict", "1.0.0"); status != http.StatusOK {
		t.Fatalf("after passing: %d %v, want 200", status, out)
	}

	// The catalogue: counts only.
	raw := ta.anonymous().mustRaw(http.StatusOK, "GET", "/v0/catalog?q=lena")
	assertNoHidden(t, "catalogue", raw)
	cat = decodeObject(t, raw)
	entry := firstAgent(t, cat)
	measured := entry["measured"].(map[string]any)
	if measured["evaluated"] != "2/2 public, 2/2 hidden" {
		t.Errorf("catalogue evaluated = %v, want 2/2 public, 2/2 hidden", measured["evaluated"])
	}
	decl := entry["declared"].(map[string]any)
	if decl["proprietary"] != true || decl["data_policy"] != "attested, not enforced" || decl["published"] != true {
		t.Errorf("declared: %v", decl)
	}
	if measured["runs"] != float64(1) || measured["success_rate"] != "1.0000" || measured["latency_ms"] == nil {
		t.Errorf("measured after one call: %v", measured)
	}

	// A second version that drops the last row fails the public two-rows
	// case and a hidden one.
	if err := ta.app.RegisterVersion(ctx, tableManifest(t, "1.1.0", ts.srv.URL, "tables-sloppy")); err != nil {
		t.Fatal(err)
	}
	if err := ta.app.WaitEvaluations(ctx); err != nil {
		t.Fatal(err)
	}
	if status, out := call("bob/strict", "1.1.0"); status != http.StatusForbidden || errorCode(out) != holon.CodeRequirementNotMet {
		t.Errorf("a failed version under require.evaluated: %d %v, want 403 requirement_not_met", status, out)
	}
	if status, out := call("bob/loose", "1.1.0"); status != http.StatusOK {
		t.Errorf("a failed version without the requirement: %d %v, want 200", status, out)
	}

	// The author's view: public cases in detail, hidden ones as counts.
	raw = lena.human.mustRaw(http.StatusOK, "GET", "/v0/me/agents")
	assertNoHidden(t, "author's view", raw)
	mine := decodeObject(t, raw)
	versions := mine["versions"].([]any)
	if len(versions) != 2 {
		t.Fatalf("author's view lists %d versions, want 2: %s", len(versions), raw)
	}
	sloppy := versions[1].(map[string]any)
	ev := sloppy["evaluation"].(map[string]any)
	suite := ev["suites"].([]any)[0].(map[string]any)
	if ev["passed"] != false || suite["source"] != "private" {
		t.Errorf("sloppy evaluation: %v", ev)
	}
	if h := suite["hidden"].(map[string]any); h["passed"] != float64(1) || h["failed"] != float64(1) {
		t.Errorf("hidden counts %v, want 1 passed 1 failed", h)
	}
	cases := suite["cases"].([]any)
	if len(cases) != 2 {
		t.Fatalf("public cases %v, want the 2 public ones only", cases)
	}
	if c := cases[0].(map[string]any); c["id"] != "two-rows" || c["passed"] != false || !strings.Contains(str(c["diff"]), "want 2 items, got 1") {
		t.Errorf("failed public case: %v", c)
	}
	// Another account sees nothing of lena's.
	if out := bob.human.must(http.StatusOK, "GET", "/v0/me/agents", nil); len(out["versions"].([]any)) != 0 {
		t.Errorf("bob sees %v", out)
	}
}

// assertNoHidden fails when a response shows a hidden case's id or input.
func assertNoHidden(t *testing.T, what string, raw []byte) {
	t.Helper()
	for _, s := range []string{"holdout-secret", "zebra-holdout", "yak-holdout", "no table, here"} {
		if strings.Contains(string(raw), s) {
			t.Errorf("%s shows hidden %q: %s", what, s, raw)
		}
	}
}

func firstAgent(t *testing.T, cat map[string]any) map[string]any {
	t.Helper()
	agents, _ := cat["agents"].([]any)
	if len(agents) == 0 {
		t.Fatalf("catalogue lists nothing: %v", cat)
	}
	return agents[0].(map[string]any)
}

func decodeObject(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return out
}

// mustRaw sends a request and returns the body, failing unless the status is want.
func (c client) mustRaw(want int, method, path string) []byte {
	c.ta.t.Helper()
	status, _, body := c.raw(method, path, nil)
	if status != want {
		c.ta.t.Fatalf("%s %s: %d %s, want %d", method, path, status, body, want)
	}
	return body
}

// slowTablesManifest is a dev agent of test-lab for extraction.table that
// runs the "slowtables" handler.
const slowTablesManifest = `
id: test-lab/slowtables
version: 1.0.0
summary: Finds tables, slowly.
license: Apache-2.0
source: { repository: "https://github.com/test-lab/agents", commit: "0000000000000000000000000000000000000000" }
capabilities: [extraction.table]
interface:
  input: { type: object, required: [text], properties: { text: { type: string } } }
  output: { type: object, required: [rows], properties: { rows: { type: array } } }
  errors:
    no_table_found: { billed: false, description: No table. }
pricing: { model: per_run, amount: "0.01", currency: EUR }
runtime: { kind: dev, tool: slowtables }
data: { retention: none, regions: [eu], training: false }
`

// Ensure that the shipped agents are evaluated on the public samples at
// start-up, and that an evaluation cut short by a restart is run again and
// its verdict kept across the next one.
func TestEvaluate_SurvivesRestart(t *testing.T) {
	started := make(chan struct{}, 10)
	hang := func(ctx context.Context, _ json.RawMessage, _ *gateway.Ctx) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	textTables := func(ctx context.Context, input json.RawMessage, c *gateway.Ctx) (any, error) {
		var in struct{ Text string }
		_ = json.Unmarshal(input, &in)
		rows := tableRows(in.Text)
		if len(rows) == 0 {
			return nil, c.Error("no_table_found", "no table")
		}
		return map[string]any{"rows": rows}, nil
	}
	reg := writeRegistry(t, map[string]string{"slowtables.yaml": slowTablesManifest})
	ta := newHostedApp(t, func(c *appliance.Config) {
		c.Registry = append(c.Registry, reg)
		c.DevHandlers["slowtables"] = hang
	})
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the evaluation of test-lab/slowtables did not start")
	}
	bob := ta.signup("bob")
	bob.createMandate("strict", map[string]any{
		"budget": map[string]any{"total": "1.00"}, "allow": map[string]any{"agents": []string{"test-lab/*", "holon-labs/*"}},
		"require": map[string]any{"evaluated": true},
	})
	call := func(agent string) (int, map[string]any) {
		return bob.human.do("POST", "/v0/calls", map[string]any{"mandate": "bob/strict", "agent": agent,
			"input": map[string]any{"text": "a,b\n"}})
	}
	if status, out := call("test-lab/slowtables"); status != http.StatusForbidden || errorCode(out) != holon.CodeRequirementNotMet {
		t.Fatalf("mid-evaluation: %d %v, want 403 requirement_not_met", status, out)
	}
	// Cut short: the queue entry stays, and the next start runs it again.
	ta.restart(func(c *appliance.Config) { c.DevHandlers["slowtables"] = textTables })
	if err := ta.app.WaitEvaluations(context.Background()); err != nil {
		t.Fatal(err)
	}
	if status, out := call("test-lab/slowtables"); status != http.StatusOK {
		t.Fatalf("after the evaluation ran again: %d %v, want 200", status, out)
	}
	ta.restart()
	if status, out := call("test-lab/slowtables"); status != http.StatusOK {
		t.Fatalf("after a second restart: %d %v, want 200 (the verdict is kept)", status, out)
	}
	cat := ta.anonymous().must(http.StatusOK, "GET", "/v0/catalog?capability=extraction.table", nil)
	got := map[string]any{}
	for _, a := range cat["agents"].([]any) {
		e := a.(map[string]any)
		got[e["id"].(string)] = e["measured"].(map[string]any)["evaluated"]
	}
	if got["holon-labs/text-tables"] != "3/3 public, 0/0 hidden" || got["test-lab/slowtables"] != "3/3 public, 0/0 hidden" {
		t.Errorf("catalogue evaluations %v, want the shipped suite passed by both", got)
	}
}
