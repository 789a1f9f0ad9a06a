package bench

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"holon.dev/holon/kv"
)

// Targets of the MCP rows.
const (
	// targetAddedOverFloor is what the added p50 may be above the floor
	// of two fdatasyncs (floor.go), the two commits a remote call waits for.
	targetAddedOverFloor = 300 * time.Microsecond
	targetAddedP99       = 3 * time.Millisecond
	targetMCPThrough     = 0.5
	// mcpBlocks is how many alternating blocks row 4's two loads run in.
	mcpBlocks = 5
)

type echoArgs struct {
	N int `json:"n"`
}

// mcpAgent is a real MCP server on loopback (the Go SDK, Streamable HTTP,
// stateful sessions, as the gateway's runner expects): one tool, echo.
type mcpAgent struct {
	srv *http.Server
	url string
}

func startMCPAgent() (*mcpAgent, error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "holon-bench-agent", Version: "v0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns its input."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, echoArgs, error) {
			return nil, in, nil
		})
	ln, url, err := listen()
	if err != nil {
		return nil, err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	a := &mcpAgent{srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, url: url + "/mcp"}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (a *mcpAgent) Close() { _ = a.srv.Close() }

// directSession opens an MCP session with the agent, set up as the
// gateway's runner sets up its own (no standalone SSE stream, no retries).
func (a *mcpAgent) directSession(ctx context.Context, client *mcp.Client, hc *http.Client) (*mcp.ClientSession, error) {
	return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.url, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
}

// mcp compares calling a real MCP agent through the gateway (POST
// /v0/calls, reserve, MCP call, settle: durable) with calling it directly
// over MCP: added latency at concurrency 1, throughput at MCPClients.
func (b *bench) mcp(ctx context.Context) ([]*Result, error) {
	o := b.o
	agent, err := startMCPAgent()
	if err != nil {
		return nil, err
	}
	defer agent.Close()
	g, err := openGateway(ctx, gatewayConfig{dir: filepath.Join(o.Dir, "mcp"), mcpEndpoint: agent.url})
	if err != nil {
		return nil, err
	}
	defer g.Close()
	clients := max(o.MCPClients, 1)
	hc := httpClient(clients)
	mc := mcp.NewClient(&mcp.Implementation{Name: "holon-bench-direct", Version: "v0"}, nil)
	sessions := make([]*mcp.ClientSession, clients)
	for i := range sessions {
		if sessions[i], err = agent.directSession(ctx, mc, hc); err != nil {
			return nil, fmt.Errorf("direct MCP session: %w", err)
		}
		defer sessions[i].Close()
	}
	direct := func(ctx context.Context, c int) error {
		res, err := sessions[c].CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: echoArgs{N: c}})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("direct call: isError")
		}
		return nil
	}
	bodies := make([][]byte, clients)
	for c := range bodies {
		bodies[c] = fmt.Appendf(nil, `{"mandate":%q,"agent":%q,"input":{"n":%d}}`, mandateID(c), agentMCPEcho, c)
	}
	settled := 0
	viaGateway := func(ctx context.Context, c int) error {
		return postBilledCall(ctx, hc, g.url, bodies[c])
	}
	before, err := g.money()
	if err != nil {
		return nil, err
	}
	// Warm both paths: sessions, connections, the gateway's session pool.
	for range 50 {
		if err := direct(ctx, 0); err != nil {
			return nil, err
		}
		if err := viaGateway(ctx, 0); err != nil {
			return nil, err
		}
		settled++
	}
	// Concurrency 1, in alternating blocks so that the machine's noise
	// falls on both sides alike.
	var dl, gl latencies
	const block = 50
	lst0 := g.Store().Stats()
	for n := 0; n < o.LatencyCalls; n += block {
		for range min(block, o.LatencyCalls-n) {
			t := time.Now()
			if err := direct(ctx, 0); err != nil {
				return nil, err
			}
			dl = append(dl, time.Since(t))
		}
		for range min(block, o.LatencyCalls-n) {
			t := time.Now()
			if err := viaGateway(ctx, 0); err != nil {
				return nil, err
			}
			gl = append(gl, time.Since(t))
			settled++
		}
	}
	lw := writerShare(lst0, g.Store().Stats())
	slices.Sort(dl)
	slices.Sort(gl)
	added50, added99 := gl.P(0.5)-dl.P(0.5), gl.P(0.99)-dl.P(0.99)
	targetAddedP50 := 2*b.floor.p50 + targetAddedOverFloor
	lat := &Result{
		Name: "[3] a real MCP agent on loopback, through the gateway against directly, concurrency 1",
		Target: fmt.Sprintf("added latency p50 ≤ 2 × the run's fdatasync p50 (%s) + %s = %s, p99 ≤ %s",
			ms(b.floor.p50), ms(targetAddedOverFloor), ms(targetAddedP50), ms(targetAddedP99)),
		Measured: fmt.Sprintf("added p50 %s, p99 %s (direct p50 %s p99 %s; through the gateway p50 %s p99 %s; %d calls each)",
			ms(added50), ms(added99), ms(dl.P(0.5)), ms(dl.P(0.99)), ms(gl.P(0.5)), ms(gl.P(0.99)), len(gl)),
	}
	var perCommit, perSync time.Duration
	if lw.d.Commits > 0 {
		perCommit = (lw.d.UpdateTime + lw.d.CommitTime) / time.Duration(lw.d.Commits)
	}
	if lw.d.LogSyncs > 0 {
		perSync = lw.d.LogSyncTime / time.Duration(lw.d.LogSyncs)
	}
	syncs := "the store's log syncs once per commit (its record), so two commits in a row sync twice"
	each := "its log record's fdatasync"
	if lw.d.LogSyncs == 0 {
		syncs = "the store does not log here: bbolt syncs twice per commit, so two commits in a row sync four times"
		each = "bbolt's two fdatasyncs"
	}
	lat.Notes = append(lat.Notes, fmt.Sprintf("floor: two fdatasyncs in a row p50 %s, p99 %s, and one after %s idle p50 %s (row 0): a lone caller's commits follow idle time; %s",
		ms(b.floor.twoP50), ms(b.floor.twoP99), ms(idleGap), ms(b.floor.idleP50), syncs))
	lat.Notes = append(lat.Notes, fmt.Sprintf("each gateway call made %.1f store commits of %s on average (update and commit: the log's fdatasync, %s, runs while bbolt commits); %s",
		float64(lw.d.Commits)/float64(max(len(gl), 1)), ms(perCommit), ms(perSync), lw))
	lat.judge(added50 <= targetAddedP50 && added99 <= targetAddedP99,
		fmt.Sprintf("a call to a remote agent waits for two durable commits in a row (the reservation before the request is sent, the settlement before the answer; a dev call waits for the settlement's alone), each with %s, which at concurrency 1 nobody shares: %.1f × %s (the sync's %s of it overlapping bbolt's commit) of the added %s here", each, float64(lw.d.Commits)/float64(max(len(gl), 1)), ms(perCommit), ms(perSync), ms(added50)))
	// Throughput at MCPClients, direct and through the gateway in
	// alternating blocks, as the latency above, so that the machine's
	// noise (a disk other work shares) falls on both sides alike.
	counts := make([]int, clients)
	countingGateway := func(ctx context.Context, c int) error {
		if err := viaGateway(ctx, c); err != nil {
			return err
		}
		counts[c]++
		return nil
	}
	blocks, blockDur, warm := alternatingBlocks(o, mcpBlocks)
	var (
		dr, gr                     loadResult
		dcpu, dwall, gcpuT, gwallT time.Duration
		spans                      [][2]kv.Stats
		prof                       string
	)
	for i := range blocks {
		c0, t0 := cpuTime(), time.Now()
		r, err := runLoad(ctx, clients, warm, blockDur, direct)
		if err != nil {
			return nil, fmt.Errorf("direct MCP load: %w", err)
		}
		dcpu, dwall, dr = dcpu+cpuTime()-c0, dwall+time.Since(t0), dr.add(r)
		stop := func() string { return "" }
		if i == 0 {
			// The profile covers the first block through the gateway.
			if stop, err = startProfile(o, "mcp-gateway.pprof"); err != nil {
				return nil, err
			}
		}
		st0, c0, t0 := g.Store().Stats(), cpuTime(), time.Now()
		r, err = runLoad(ctx, clients, warm, blockDur, countingGateway)
		if err != nil {
			stop()
			return nil, fmt.Errorf("MCP load through the gateway: %w", err)
		}
		gcpuT, gwallT, gr = gcpuT+cpuTime()-c0, gwallT+time.Since(t0), gr.add(r)
		spans = append(spans, [2]kv.Stats{st0, g.Store().Stats()})
		if i == 0 {
			prof = stop()
		}
	}
	w := writerSpans(spans)
	for _, n := range counts {
		settled += n
	}
	checked, err := g.checkMoney(before, settled)
	if err != nil {
		return nil, err
	}
	ratio := gr.Rate() / dr.Rate()
	thr := &Result{
		Name:   fmt.Sprintf("[4] the same at %d concurrent clients", clients),
		Target: fmt.Sprintf("gateway throughput ≥ %.0f%% of direct", 100*targetMCPThrough),
		Measured: fmt.Sprintf("%.0f%% (through the gateway %s calls/s, p99 %s; direct %s calls/s, p99 %s)",
			100*ratio, thousands(int64(gr.Rate())), ms(gr.Lat.P(0.99)), thousands(int64(dr.Rate())), ms(dr.Lat.P(0.99))),
		Notes: []string{blocksNote(blocks, blockDur),
			w.String(), cpuNote(gcpuT, gwallT, int64(gr.Calls)) + "; the agent runs in this process too", checked},
	}
	thr.Notes = append(thr.Notes, "direct: "+cpuNote(dcpu, dwall, int64(dr.Calls)))
	if prof != "" {
		thr.Notes = append(thr.Notes, prof)
	}
	gwCPU := float64(gcpuT.Microseconds()) / float64(max(gr.Calls, 1))
	directCPU := float64(dcpu.Microseconds()) / float64(max(dr.Calls, 1))
	thr.judge(ratio >= targetMCPThrough, fmt.Sprintf(
		"the agent, the gateway and the clients share %d cores, and a call through the gateway costs %.0f µs of CPU against %.0f µs direct (%.1f×): the HTTP hop to the gateway, the gateway's own MCP session, the engine and %.1f store updates per call come on top of the same MCP work; and %s",
		runtime.NumCPU(), gwCPU, directCPU, gwCPU/directCPU, float64(w.d.Updates)/float64(max(gr.Calls, 1)), w.why()))
	return []*Result{lat, thr}, nil
}

// blocksNote says how row 4 ran its two loads.
func blocksNote(blocks int, d time.Duration) string {
	if blocks == 1 {
		return fmt.Sprintf("one block of %s on each side, direct first", d)
	}
	return fmt.Sprintf("%d blocks of %s on each side, alternately", blocks, d)
}
