package remote_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Ensure that structuredContent is passed on as the tool wrote it, its
// digits kept, when no text block repeats it: an integer beyond a double
// and a trailing zero arrive as written, not as a float64 would write them.
func TestMCPRunner_StructuredContentExact(t *testing.T) {
	const doc = `{"big":12345678901234567890,"x":0.10,"s":"<&>"}`
	agent := newMCPAgent(t, "", map[string]mcp.ToolHandler{
		"digits": func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: json.RawMessage(doc)}, nil
		},
	})
	g := openRemote(t, rmConfig{manifests: []string{mcpManifest("digits", agent.URL(), "digits", `{model: per_run, amount: "0.10", currency: EUR}`, "")}})
	res := g.call(t, "acme/digits", `{}`, "")
	if got := billingOf(res.Receipt); got != (billing{"succeeded", "", true, "0.10"}) {
		t.Fatalf("receipt %v (%s)", got, res.Message)
	}
	if string(res.Output) != `{"big":12345678901234567890,"x":0.10,"s":"\u003c\u0026\u003e"}` && string(res.Output) != doc {
		t.Errorf("output %s, want %s as the tool wrote it", res.Output, doc)
	}
}

// Ensure that requests the agent's server sends the gateway in the middle
// of a call are answered, so that the call goes on: ping is answered, and
// a feature the gateway does not offer (roots) is refused at once instead
// of leaving the tool waiting.
func TestMCPRunner_ServerRequestsDuringCall(t *testing.T) {
	agent := newMCPAgent(t, "", map[string]mcp.ToolHandler{
		"chatty": func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			out := map[string]any{"ping": "answered", "roots": "refused"}
			if err := req.Session.Ping(ctx, nil); err != nil {
				out["ping"] = err.Error()
			}
			if _, err := req.Session.ListRoots(ctx, nil); err == nil {
				out["roots"] = "listed"
			}
			return &mcp.CallToolResult{StructuredContent: out}, nil
		},
	})
	g := openRemote(t, rmConfig{manifests: []string{mcpManifestT("chatty", agent.URL(), "chatty", `{model: free}`, 3, "")}})
	for i := range 2 {
		res := g.call(t, "acme/chatty", `{}`, "")
		if res.Receipt.Status != "succeeded" {
			t.Fatalf("call %d: %v (%s)", i, billingOf(res.Receipt), res.Message)
		}
		if !jsonEq(t, res.Output, `{"ping":"answered","roots":"refused"}`) {
			t.Errorf("call %d: output %s", i, res.Output)
		}
	}
}

// Ensure that an agent whose server answers calls with plain JSON instead
// of an event stream (the Go SDK's JSONResponse) is called as well, over
// one session and one connection.
func TestMCPRunner_JSONResponses(t *testing.T) {
	a := newMCPAgent(t, "", map[string]mcp.ToolHandler{"echo": profileTools()["echo"]})
	var mu sync.Mutex
	var types []string
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return a.server }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &countingListener{Listener: l}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&typeRecorder{ResponseWriter: w, mu: &mu, types: &types}, r)
	}))
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	url := srv.URL + "/mcp"
	g := openRemote(t, rmConfig{manifests: []string{mcpManifest("echo", url, "echo", `{model: free}`, "")}})
	for i := range 5 {
		res := g.call(t, "acme/echo", `{"i":1}`, "")
		if res.Receipt.Status != "succeeded" || !jsonEq(t, res.Output, `{"i":1}`) {
			t.Fatalf("call %d: %v (%s) %s", i, billingOf(res.Receipt), res.Message, res.Output)
		}
	}
	if got := ln.accepted.Load(); got > 2 {
		t.Errorf("5 calls opened %d connections", got)
	}
	if got := len(a.Calls()); got != 5 {
		t.Errorf("the tool ran %d times for 5 calls", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, ct := range types {
		if ct == "text/event-stream" {
			t.Fatalf("the server answered with an event stream: %v", types)
		}
	}
}

// typeRecorder records the Content-Type of each answer.
type typeRecorder struct {
	http.ResponseWriter
	mu    *sync.Mutex
	types *[]string
}

func (r *typeRecorder) WriteHeader(code int) {
	r.mu.Lock()
	*r.types = append(*r.types, r.Header().Get("Content-Type"))
	r.mu.Unlock()
	r.ResponseWriter.WriteHeader(code)
}
