package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon/kv"
)

// BenchmarkMCP_Call measures rows [3] and [4]'s two paths in CPU and
// allocations per call: a real MCP agent (the Go SDK on loopback) called
// directly over MCP, and the same through the gateway (POST /v0/calls,
// reserve, MCP call, settle), one client and 32. The store lives in
// $HOLON_BENCH_DIR when set (/dev/shm makes its fdatasyncs free, leaving
// the CPU path), else in a temporary directory. It reports the process's
// CPU time per call beside the allocations, and through the gateway the
// store writer's time per call: at one client, the gateway's time per
// call less the direct path's and the store's is the rest of the gateway's
// own (the HTTP hop, the engine, the runner).
func BenchmarkMCP_Call(b *testing.B) {
	for _, clients := range []int{1, 32} {
		b.Run(fmt.Sprintf("direct/clients=%d", clients), func(b *testing.B) { benchmarkMCP(b, clients, false) })
		b.Run(fmt.Sprintf("gateway/clients=%d", clients), func(b *testing.B) { benchmarkMCP(b, clients, true) })
	}
}

func benchmarkMCP(b *testing.B, clients int, viaGateway bool) {
	ctx := context.Background()
	agent, err := startMCPAgent()
	if err != nil {
		b.Fatal(err)
	}
	defer agent.Close()
	hc := httpClient(clients)
	var call func(c int) error
	var g *benchGateway
	if viaGateway {
		dir, err := os.MkdirTemp(os.Getenv("HOLON_BENCH_DIR"), "mcp-bench-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
		g, err = openGateway(ctx, gatewayConfig{dir: dir, mcpEndpoint: agent.url})
		if err != nil {
			b.Fatal(err)
		}
		defer g.Close()
		bodies := make([][]byte, clients)
		for c := range bodies {
			bodies[c] = fmt.Appendf(nil, `{"mandate":%q,"agent":%q,"input":{"n":%d}}`, mandateID(c), agentMCPEcho, c)
		}
		call = func(c int) error { return postBilledCall(ctx, hc, g.url, bodies[c]) }
	} else {
		mc := mcp.NewClient(&mcp.Implementation{Name: "holon-bench-direct", Version: "v0"}, nil)
		sessions := make([]*mcp.ClientSession, clients)
		for i := range sessions {
			if sessions[i], err = agent.directSession(ctx, mc, hc); err != nil {
				b.Fatal(err)
			}
			defer sessions[i].Close()
		}
		call = func(c int) error {
			res, err := sessions[c].CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: echoArgs{N: c}})
			if err == nil && res.IsError {
				err = fmt.Errorf("isError")
			}
			return err
		}
	}
	for c := range clients {
		for range 20 {
			if err := call(c); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	var next atomic.Int64
	var st0 kv.Stats
	if g != nil {
		st0 = g.Store().Stats()
	}
	cpu0 := cpuTime()
	b.ResetTimer()
	if clients == 1 {
		for b.Loop() {
			if err := call(0); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		b.SetParallelism((clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			c := int(next.Add(1)-1) % clients
			for pb.Next() {
				if err := call(c); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/call")
	if g != nil {
		// The store's writer's time per call (its updates and commits),
		// which a caller at one client waits for: the rest of the
		// difference with the direct path is the gateway's own.
		st := g.Store().Stats()
		b.ReportMetric(float64((st.UpdateTime+st.CommitTime-st0.UpdateTime-st0.CommitTime).Microseconds())/float64(b.N), "store-µs/call")
	}
}
