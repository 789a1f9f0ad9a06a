package remote_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// elevenMB is an answer just above the 10 MB limit.
const elevenMB = 11 << 20

// endless streams up to limit bytes of filler, counting what it could write
// before the reader went away; it allocates nothing per byte.
type endless struct {
	written atomic.Int64
	done    chan struct{}
}

func newEndless() *endless { return &endless{done: make(chan struct{})} }

func (e *endless) stream(w http.ResponseWriter, prefix string, limit int64) {
	defer close(e.done)
	chunk := bytes.Repeat([]byte("a"), 64<<10)
	f, _ := w.(http.Flusher)
	n, err := io.WriteString(w, prefix)
	e.written.Add(int64(n))
	for err == nil && e.written.Load() < limit {
		n, err = w.Write(chunk)
		e.written.Add(int64(n))
		if f != nil {
			f.Flush()
		}
	}
}

// heapGrowth runs f and returns how much the live heap grew, after a GC.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Ensure that an MCP agent's 11 MB answer is refused (agent_error, never
// billed) and that the runner stops reading at the limit: a server that
// would stream 200 MB can write little more than 10 MB before the runner
// hangs up, and the runner allocates a bounded amount meanwhile.
func TestMCPRunner_ResponseLimit(t *testing.T) {
	big := newMCPAgent(t, "", map[string]mcp.ToolHandler{
		"big": func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `"` + strings.Repeat("x", elevenMB) + `"`}}}, nil
		},
		"small": profileTools()["echo"],
	})
	// The streaming impostor answers the handshake as a real MCP server and
	// a tools/call with an endless JSON body.
	real := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return big.server }, nil)
	stream := newEndless()
	const streamed = 200 << 20
	impostor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(`"tools/call"`)) {
			real.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		stream.stream(w, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"`, streamed)
	}))
	defer impostor.Close()
	perRun := `{model: per_run, amount: "0.10", currency: EUR}`
	g := openRemote(t, rmConfig{manifests: []string{
		mcpManifest("big", big.URL(), "big", perRun, ""),
		mcpManifest("small", big.URL(), "small", perRun, ""),
		mcpManifest("stream", impostor.URL+"/mcp", "stream", perRun, ""),
	}})

	res := g.call(t, "acme/big", `{}`, "")
	if got, want := billingOf(res.Receipt), (billing{"failed", "agent_error", false, "0.00"}); got != want || !strings.Contains(res.Message, "larger than") {
		t.Fatalf("11 MB answer: %v (%s), want %v, larger than the limit", got, res.Message, want)
	}
	if res := g.call(t, "acme/small", `{"still":"works"}`, ""); res.Receipt.Status != "succeeded" {
		t.Fatalf("after the refused answer: %v (%s)", billingOf(res.Receipt), res.Message)
	}

	var sres string
	grew := allocated(func() {
		r := g.call(t, "acme/stream", `{}`, "")
		sres = billingOf(r.Receipt).String() + " " + r.Message
	})
	if !strings.HasPrefix(sres, "failed/agent_error billed=false") || !strings.Contains(sres, "larger than") {
		t.Fatalf("streamed answer: %s", sres)
	}
	select {
	case <-stream.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server is still streaming: the runner did not hang up")
	}
	if w := stream.written.Load(); w >= 40<<20 {
		t.Errorf("the server wrote %d MB before the runner hung up, want little more than 10", w>>20)
	}
	if grew > 80<<20 {
		t.Errorf("the call allocated %d MB, want it bounded near the 10 MB limit", grew>>20)
	}
}

// Ensure that a webhook's 11 MB answer is refused (agent_error, never
// billed) without reading it all: the server's stream is cut near 10 MB.
func TestWebhookRunner_ResponseLimit(t *testing.T) {
	stream := newEndless()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/eleven" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"s":"`+strings.Repeat("x", elevenMB)+`"}`)
			return
		}
		stream.stream(w, `{"s":"`, 200<<20)
	}))
	defer srv.Close()
	perRun := `{model: per_run, amount: "0.10", currency: EUR}`
	g := openRemote(t, rmConfig{manifests: []string{
		webhookManifest("eleven", srv.URL+"/eleven", perRun, ""),
		webhookManifest("stream", srv.URL+"/stream", perRun, ""),
	}})
	res := g.call(t, "acme/eleven", `{}`, "")
	if got, want := billingOf(res.Receipt), (billing{"failed", "agent_error", false, "0.00"}); got != want || !strings.Contains(res.Message, "larger than") {
		t.Fatalf("11 MB answer: %v (%s), want %v", got, res.Message, want)
	}
	var sres string
	grew := allocated(func() {
		r := g.call(t, "acme/stream", `{}`, "")
		sres = billingOf(r.Receipt).String()
	})
	if sres != "failed/agent_error billed=false own=0.00" {
		t.Fatalf("streamed answer: %s", sres)
	}
	select {
	case <-stream.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server is still streaming: the runner did not hang up")
	}
	if w := stream.written.Load(); w >= 40<<20 {
		t.Errorf("the server wrote %d MB before the runner hung up", w>>20)
	}
	if grew > 80<<20 {
		t.Errorf("the call allocated %d MB", grew>>20)
	}
}
