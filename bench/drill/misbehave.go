package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon/journal"
)

// misbehaviour is one agent that misbehaves, and how its call must end:
// failed with a code (any named one when code is ""), never billed, within
// its timeout.
type misbehaviour struct {
	name   string // what it does
	agent  string // drill/<name>
	input  map[string]any
	code   string
	within time.Duration
	// capped: the count is valid but enormous; manifest.md prices it
	// "amount × units, capped at max": billed pricing.max, never more.
	capped bool
}

// agentsDrill calls remote agents that misbehave (hang after accepting,
// close mid-answer, answer 10 MB + 1 byte, invalid JSON, duplicate keys,
// undeclared error codes, a redirect to a private address, and, over MCP,
// negative, fractional and non-numeric units), each several times and at
// once. Each call must fail with a clear code within its timeout, unbilled,
// leaving no hold (enormous unit counts are valid counts: billed at
// pricing.max, never more, as manifest.md prices them), while a bystander's calls to a well-behaved agent go on
// (their p99 measured before and during).
func agentsDrill(ctx context.Context, d *drill) error {
	rounds := pick(0, d.o.Long, 3, 20)
	agents, err := startAgents()
	if err != nil {
		return err
	}
	defer agents.close()
	units, err := startUnitsAgent()
	if err != nil {
		return err
	}
	defer units.close()
	const hangTimeout = 2
	// held is how long the gateway kept each request to the hanging agent
	// open, seen from the agent: from its arrival until the gateway gave
	// up on it (the request's context ends when the connection closes).
	var heldMu sync.Mutex
	var held []time.Duration
	// 10 MB + 1 byte of valid JSON, {"n":"xxx…"}, made once.
	flood := []byte(`{"n":"` + strings.Repeat("x", 10<<20+1-len(`{"n":""}`)) + `"}`)
	specs := append(agents.standardAgents(),
		agentSpec{name: "hang", price: "0.01", timeout: hangTimeout, handler: func(w http.ResponseWriter, r *http.Request) {
			agents.executed(r)
			t := time.Now()
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush() // accepted, headers sent: then nothing
			<-r.Context().Done()
			heldMu.Lock()
			held = append(held, time.Since(t))
			heldMu.Unlock()
		}},
		agentSpec{name: "close", price: "0.01", timeout: 10, handler: func(w http.ResponseWriter, r *http.Request) {
			agents.executed(r)
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"n\":\"half an ans")
			buf.Flush()
			conn.Close()
		}},
		agentSpec{name: "flood", price: "0.01", timeout: 10, handler: func(w http.ResponseWriter, r *http.Request) {
			agents.executed(r)
			w.Header().Set("Content-Type", "application/json")
			w.Write(flood)
		}},
		agentSpec{name: "garbage", price: "0.01", timeout: 10, handler: func(w http.ResponseWriter, r *http.Request) {
			agents.executed(r)
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"n": "unterminated`))
		}},
		agentSpec{name: "dupkeys", price: "0.01", timeout: 10, handler: func(w http.ResponseWriter, r *http.Request) {
			agents.executed(r)
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"n":"</agent-output><script>","n":1}`))
		}},
		agentSpec{name: "undeclared", price: "0.01", timeout: 10, handler: func(w http.ResponseWriter, r *http.Request) {
			agents.executed(r)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusPaymentRequired)
			w.Write([]byte(`{"error":{"code":"pay_me_more","message":"an undeclared code"}}`))
		}},
		agentSpec{name: "redirect", price: "0.01", timeout: 10, handler: func(w http.ResponseWriter, r *http.Request) {
			agents.executed(r)
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusTemporaryRedirect)
		}},
	)
	registry := filepath.Join(d.dir, "registry")
	if err := agents.writeRegistry(registry, specs...); err != nil {
		return err
	}
	if err := units.writeManifest(registry); err != nil {
		return err
	}
	g, err := d.serve(ctx, registry, nil)
	if err != nil {
		return err
	}
	defer g.kill()
	db := g.db
	c := newAPI(g.url, 64)
	acc, err := c.signup(ctx, "caller", g.adminKey, "100.00")
	if err != nil {
		return err
	}
	bob, err := c.signup(ctx, "bob", g.adminKey, "100.00")
	if err != nil {
		return err
	}
	for _, a := range []*account{acc, bob} {
		if err := c.mandate(ctx, a, "main", "100.00", "1.00", ""); err != nil {
			return err
		}
	}
	by := &bystander{c: c, acc: bob}
	byCtx, stopBy := context.WithCancel(ctx)
	var byWG sync.WaitGroup
	byWG.Add(1)
	go func() { defer byWG.Done(); by.run(byCtx) }()
	time.Sleep(pick(0, d.o.Long, time.Second, 5*time.Second))
	baseline := by.cut()

	// The contract bounds the run: timeout_s, after which the gateway
	// stops waiting for the agent (checked below from the agent's side).
	// The caller's wait also holds the call's two durable commits, its
	// admission and HTTP, which the machine's load stretches (every agent
	// call took 3.1-3.9 s at a load of 25): that wait gets timeout_s plus
	// the 5 s the other misbehaviours' calls get for all of that.
	cases := []misbehaviour{
		{name: "hangs after accepting", agent: "drill/hang", code: "timeout", within: time.Duration(hangTimeout)*time.Second + 5*time.Second},
		{name: "closes mid-answer", agent: "drill/close", within: 5 * time.Second},
		{name: "answers 10 MB + 1 byte", agent: "drill/flood", within: 10 * time.Second},
		{name: "answers invalid JSON", agent: "drill/garbage", within: 5 * time.Second},
		{name: "answers duplicate keys", agent: "drill/dupkeys", code: "invalid_output", within: 5 * time.Second},
		{name: "returns an undeclared error code", agent: "drill/undeclared", within: 5 * time.Second},
		{name: "redirects to a private address", agent: "drill/redirect", within: 5 * time.Second},
		{name: "reports negative units (MCP)", agent: "drill/units", input: map[string]any{"raw": "-5"}, within: 5 * time.Second},
		{name: "reports fractional units (MCP)", agent: "drill/units", input: map[string]any{"raw": "2.5"}, within: 5 * time.Second},
		{name: "reports enormous units, 1e30 (MCP)", agent: "drill/units", input: map[string]any{"raw": "1e30"}, within: 5 * time.Second, capped: true},
		{name: "reports 2^63 units (MCP)", agent: "drill/units", input: map[string]any{"raw": "9223372036854775808"}, within: 5 * time.Second, capped: true},
		// Beyond a double: the answer is not I-JSON, so it is refused whole.
		{name: "reports 1e400 units (MCP)", agent: "drill/units", input: map[string]any{"raw": "1e400"}, within: 5 * time.Second},
		{name: "reports units as a string (MCP)", agent: "drill/units", input: map[string]any{"raw": `"10"`}, within: 5 * time.Second},
	}
	var wg sync.WaitGroup
	for _, m := range cases {
		for r := range rounds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				in := map[string]any{"n": fmt.Sprintf("%s-%d", m.agent, r)}
				for k, v := range m.input {
					in[k] = v
				}
				t := time.Now()
				a, err := c.do(ctx, "POST", "/v0/calls", acc.human, map[string]any{"mandate": "caller/main", "agent": m.agent, "input": in})
				took := time.Since(t)
				d.count("misbehaving agent calls", 1)
				if !d.check("a call to a misbehaving agent is answered", err == nil, "%s: %v", m.name, err) {
					return
				}
				r := a.Receipt
				if m.capped {
					ok := r != nil && r.Status == "succeeded" && r.Billed && r.Cost.Total == "0.50"
					d.check("enormous units are billed pricing.max, never more", ok, "%s: %d %.300s", m.name, a.Status, a.Body)
					d.check("a misbehaving agent's call ends within its timeout", took < m.within, "%s took %s (bound %s)", m.name, took, m.within)
					if r != nil {
						d.note("%-36s → %d %s, billed %s = pricing.max (%s)", m.name, a.Status, r.Status, r.Cost.Total, ms(took))
					}
					return
				}
				ok := r != nil && r.Status == "failed" && r.Error != nil && *r.Error != "" && (m.code == "" || *r.Error == m.code)
				d.check("a misbehaving agent's call fails with a named code", ok, "%s: %d %.300s", m.name, a.Status, a.Body)
				d.check("a misbehaving agent's call is never billed", r != nil && !r.Billed && r.Cost.Total == "0.00", "%s: %.300s", m.name, a.Body)
				d.check("a misbehaving agent's call ends within its timeout", took < m.within, "%s took %s (bound %s)", m.name, took, m.within)
				if r != nil && r.Error != nil {
					d.note("%-36s → %d %s/%s (%s)", m.name, a.Status, r.Status, *r.Error, ms(took))
				}
			}()
		}
	}
	wg.Wait()
	// The run's hard timeout, as the contract sets it: the gateway gave up
	// on each hanging request within timeout_s, plus what it takes the
	// connection's close to reach the agent (loopback, a loaded scheduler).
	runBound := time.Duration(hangTimeout)*time.Second + time.Second
	heldMu.Lock()
	d.check("a hanging agent's request is given up within its timeout_s", len(held) == rounds, "%d of %d requests to the hanging agent were given up", len(held), rounds)
	for _, h := range held {
		d.check("a hanging agent's request is given up within its timeout_s", h < runBound, "held %s (timeout_s %d s, bound %s)", h, hangTimeout, runBound)
	}
	if len(held) > 0 {
		d.note("the hanging agent's requests were held %s to %s by the gateway (timeout_s %d s)", ms(slices.Min(held)), ms(slices.Max(held)), hangTimeout)
	}
	heldMu.Unlock()
	// The control: well-behaved units are billed, so the check above can
	// tell a billed call from an unbilled one.
	a, err := c.do(ctx, "POST", "/v0/calls", acc.human, map[string]any{"mandate": "caller/main", "agent": "drill/units", "input": map[string]any{"n": "ok", "raw": "3"}})
	d.check("a well-behaved unit count is billed (the control)", err == nil && a.Receipt != nil && a.Receipt.Billed && a.Receipt.Cost.Total == "0.03", "%v %.300s", err, answerBody(a))
	during := by.cut()
	stopBy()
	byWG.Wait()
	d.note("bystander p99: %s before (%d calls), %s while the agents misbehaved (%d calls), %d of its calls failed", ms(baseline.p(0.99)), len(baseline.d), ms(during.p(0.99)), len(during.d), by.failed())
	d.check("the bystander's calls all succeed meanwhile", by.failed() == 0, "%d failed", by.failed())
	d.count("bystander calls answered 200", int64(len(baseline.d)+len(during.d)))
	d.floor("bystander calls answered 200", 10)
	d.check("the bystander's p99 stays under 2s meanwhile", during.p(0.99) < 2*time.Second, "p99 %s", during.p(0.99))
	if err := g.stop(); err != nil {
		return err
	}
	_, err = d.checkStore(ctx, db, map[string]journal.Amount{"caller/main": journal.MustParseAmount("100.00"), "bob/main": journal.MustParseAmount("100.00")})
	return err
}

func answerBody(a *answer) []byte {
	if a == nil {
		return nil
	}
	return a.Body
}

// unitsAgent is a real MCP server on loopback (the Go SDK) whose one tool,
// units, reports in _meta["holon/units"] the JSON it is given as a string
// in "raw" (so that a number no caller may send, 1e400, reaches the
// gateway from the agent's side).
type unitsAgent struct {
	srv *http.Server
	url string

	mu sync.Mutex
	// links are the signed file links the files tool was given.
	links []string
}

func startUnitsAgent() (*unitsAgent, error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "holon-drill-units", Version: "v0"}, nil)
	s.AddTool(&mcp.Tool{Name: "units", Description: "Reports the units it is told.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Raw string `json:"raw"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			var u any
			dec := json.NewDecoder(strings.NewReader(args.Raw))
			dec.UseNumber()
			_ = dec.Decode(&u)
			return &mcp.CallToolResult{StructuredContent: map[string]any{"ok": true}, Meta: mcp.Meta{"holon/units": u}}, nil
		})
	a := &unitsAgent{}
	// files keeps the signed links of the files it is passed.
	s.AddTool(&mcp.Tool{Name: "files", Description: "Keeps the links of the files it is passed.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			raw, _ := json.Marshal(req.Params.GetMeta()["holon/files"])
			var files map[string]struct {
				URL string `json:"url"`
			}
			_ = json.Unmarshal(raw, &files)
			a.mu.Lock()
			for _, f := range files {
				a.links = append(a.links, f.URL)
			}
			a.mu.Unlock()
			return &mcp.CallToolResult{StructuredContent: map[string]any{"files": len(files)}}, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	a.srv, a.url = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, "http://"+ln.Addr().String()+"/mcp"
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (a *unitsAgent) close() { _ = a.srv.Close() }

// fileLinks returns the signed links the files tool was given.
func (a *unitsAgent) fileLinks() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.links...)
}

// writeManifest lists drill/units, per_unit at 0.01 a unit, at most 0.50,
// and drill/files, 0.01 a run.
func (a *unitsAgent) writeManifest(registry string) error {
	if err := writeManifest(registry, "files", fmt.Sprintf(`id: drill/files
version: 1.0.0
summary: An MCP agent of the drills that keeps the links of the files it is passed.
license: proprietary
interface:
  input: {type: object}
  output: {type: object}
pricing: {model: per_run, amount: "0.01", currency: EUR}
runtime: {kind: mcp, endpoint: %q, tool: files, limits: {timeout_s: 10}}
`, a.url)); err != nil {
		return err
	}
	return writeManifest(registry, "units", fmt.Sprintf(`id: drill/units
version: 1.0.0
summary: An MCP agent of the drills that reports the units it is told.
license: proprietary
interface:
  input: {type: object}
  output: {type: object}
pricing: {model: per_unit, amount: "0.01", unit: unit, max: "0.50", currency: EUR}
runtime: {kind: mcp, endpoint: %q, tool: units, limits: {timeout_s: 10}}
`, a.url))
}
