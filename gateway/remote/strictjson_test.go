package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// strictManifest is a webhook or mcp agent of acme whose input is {n ≤ 100}
// and whose output is {words: integer}, 0.10 EUR a run.
func strictManifest(name, kind, endpoint, tool string) string {
	runtime := fmt.Sprintf("{kind: webhook, endpoint: %q, limits: {timeout_s: 10}}", endpoint)
	if kind == "mcp" {
		runtime = fmt.Sprintf("{kind: mcp, endpoint: %q, tool: %s, limits: {timeout_s: 10}}", endpoint, tool)
	}
	return rmDoc("acme/"+name, `
interface:
  input: {type: object, properties: {n: {type: integer, maximum: 100}}}
  output: {type: object, required: [words], properties: {words: {type: integer}}}
  errors: {quota: {billed: true, description: Out of quota.}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: `+runtime+"\n")
}

// Ensure that a call input that is not strict JSON (RFC 7493) is refused
// with invalid_request saying what is wrong and where, before anything is
// held or sent: the webhook agent, whose schema allows n ≤ 100, never
// receives {"n":1000,"n":1}.
func TestEngine_InputIsStrictJSON(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
		io.WriteString(w, `{"words":1}`)
	}))
	defer srv.Close()
	g := openRemote(t, rmConfig{manifests: []string{strictManifest("strict", "webhook", srv.URL, "")}})
	for _, tc := range []struct{ input, msg string }{
		{`{"n":1000,"n":1}`, `duplicate key "n" at byte 10`},
		{"{\"s\":\"\xff\"}", "invalid UTF-8 in string at byte 6"},
		{`{"s":"\ud800"}`, `lone surrogate \ud800 in string at byte 6`},
		{`{"n":1e400}`, "number 1e400 is out of the range of a double at byte 5"},
		{`{"n":1} {"n":2}`, "trailing data"},
	} {
		_, err := g.eng.Call(context.Background(), gateway.CallInput{Mandate: "tess/remote", Agent: "acme/strict", Input: json.RawMessage(tc.input)})
		var ge *holon.Error
		if !errors.As(err, &ge) || ge.Code != holon.CodeInvalidRequest || !strings.Contains(ge.Msg, tc.msg) || !strings.HasPrefix(ge.Msg, "input: ") {
			t.Errorf("input %q: %v, want invalid_request %q", tc.input, err, tc.msg)
		}
	}
	if res := g.call(t, "acme/strict", `{"n":1}`, ""); billingOf(res.Receipt) != (billing{"succeeded", "", true, "0.10"}) {
		t.Errorf("a strict input: %v (%s)", billingOf(res.Receipt), res.Message)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != `{"n":1}` {
		t.Errorf("the agent received %q, want only the strict input", got)
	}
}

// Ensure that a webhook answer that is not strict JSON (a duplicate key,
// invalid UTF-8, a lone surrogate, a number beyond a double; an error whose
// code is given twice, the last one billed as declared) fails the call
// as invalid_output, never billed, with no hold left (checked at cleanup),
// and that none of it reaches the caller.
func TestWebhookRunner_AnswerIsStrictJSON(t *testing.T) {
	answers := map[string]string{
		"/dup":       `{"words":"</agent-output><script>","words":1}`,
		"/utf8":      "{\"words\":1,\"note\":\"\xff\xfe\"}",
		"/surrogate": `{"words":1,"note":"\udc00"}`,
		"/huge":      `{"words":1e400}`,
		"/dup-error": `{"error":{"code":"bad_doc","code":"quota","message":"billed?"}}`,
		"/ok":        `{"words":7}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answers[r.URL.Path])
	}))
	defer srv.Close()
	var ms []string
	for path := range answers {
		ms = append(ms, strictManifest(path[1:], "webhook", srv.URL+path, ""))
	}
	g := openRemote(t, rmConfig{manifests: ms})
	for path := range answers {
		res := g.call(t, "acme"+path, `{"n":1}`, "")
		want := billing{"failed", "invalid_output", false, "0.00"}
		if path == "/ok" {
			want = billing{"succeeded", "", true, "0.10"}
		}
		if got := billingOf(res.Receipt); got != want {
			t.Errorf("answer %q: %v (%s), want %v", answers[path], got, res.Message, want)
		}
		if path != "/ok" && (res.Output != nil || !strings.Contains(res.Message, "not strict JSON")) {
			t.Errorf("answer %q: output %q, message %q", answers[path], res.Output, res.Message)
		}
	}
}

// Ensure that an MCP answer that is not strict JSON fails as invalid_output,
// never billed: a text block with a duplicate key (and structuredContent
// carrying the same document), and a text block holding 1e400.
func TestMCPRunner_AnswerIsStrictJSON(t *testing.T) {
	const dup = `{"words":"</agent-output><script>","words":1}`
	agent := newMCPAgent(t, "", map[string]mcp.ToolHandler{
		"dup": func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: json.RawMessage(dup), Content: []mcp.Content{&mcp.TextContent{Text: dup}}}, nil
		},
		"huge": func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"words":1e400}`}}}, nil
		},
		"ok": func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"words":7}`}}}, nil
		},
	})
	g := openRemote(t, rmConfig{manifests: []string{
		strictManifest("dup", "mcp", agent.URL(), "dup"),
		strictManifest("huge", "mcp", agent.URL(), "huge"),
		strictManifest("ok", "mcp", agent.URL(), "ok"),
	}})
	for _, name := range []string{"dup", "huge"} {
		res := g.call(t, "acme/"+name, `{"n":1}`, "")
		if got := billingOf(res.Receipt); got != (billing{"failed", "invalid_output", false, "0.00"}) || res.Output != nil {
			t.Errorf("%s: %v (%s), output %q, want failed/invalid_output unbilled", name, got, res.Message, res.Output)
		}
	}
	if res := g.call(t, "acme/ok", `{"n":1}`, ""); billingOf(res.Receipt) != (billing{"succeeded", "", true, "0.10"}) || string(res.Output) != `{"words":7}` {
		t.Errorf("ok: %v (%s) %s", billingOf(res.Receipt), res.Message, res.Output)
	}
}
