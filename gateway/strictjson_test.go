package gateway_test

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
		var ge *gateway.Error
		if !errors.As(err, &ge) || ge.Code != gateway.CodeInvalidRequest || !strings.Contains(ge.Msg, tc.msg) || !strings.HasPrefix(ge.Msg, "input: ") {
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
