package appliance_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// FuzzAPI_Decoding sends arbitrary bodies (and Idempotency-Keys) to every
// endpoint of a hosted gateway that reads a body, with the key that
// endpoint accepts, so that the fuzzer reaches each handler's decoding:
// whatever it sends, the answer is never a 5xx (no panic, no internal
// error), every refusal is JSON naming its code, and at cleanup the money
// still adds up (newHostedApp checks it). Its seed corpus runs with go test;
// CI fuzzes it briefly (.ci/run).
func FuzzAPI_Decoding(f *testing.F) {
	ta := newHostedApp(f)
	ann := ta.signup("ann")
	ann.createMandate("m", map[string]any{
		"budget": map[string]any{"total": "1.00", "per_call": "0.10"},
		"allow":  map[string]any{"agents": []string{"test-lab/echo"}},
	})
	ta.signup("zed") // the one moderation may disable
	type endpoint struct{ method, path, key string }
	endpoints := []endpoint{
		{"POST", "/v0/calls", ann.humanKey},
		{"POST", "/v0/calls", ann.agentKey},
		{"POST", "/v0/signup", ""},
		{"POST", "/v0/mandates", ann.humanKey},
		{"POST", "/v0/keys", ann.humanKey},
		{"POST", "/v0/approvals/a1", ann.humanKey},
		{"POST", "/v0/admin/credit", testAdminKey},
		{"POST", "/v0/admin/accounts/zed/disable", testAdminKey},
		{"POST", "/v0/admin/agents/test-lab/echo@1.1.0/yank", testAdminKey},
		{"POST", "/mcp", ann.agentKey},
	}
	for i := range endpoints {
		for _, seed := range []string{
			`{}`, `{"mandate":"ann/m","agent":"test-lab/echo","input":{"text":"hi"}}`,
			`{"handle":"bob","email":"bob@example.com"}`, `{"id":"x","grantee":"ann/bot","budget":{"total":"0.50"}}`,
			`{"mandate":"ann/m"}`, `{"account":"ann","amount":"0.01","reason":"fuzz"}`, `{"reason":"fuzz"}`,
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`,
			`{"a":1,"a":2}`, `[` + `[[[[[[[[[[` + `]]]]]]]]]]` + `]`, `{"n":1e400}`, "{\"s\":\"\xff\"}", `{"s":"\u0000"}`, `{} x`,
		} {
			f.Add(uint8(i), []byte(seed), "")
		}
	}
	f.Add(uint8(0), []byte(`{"mandate":"ann/m","agent":"test-lab/echo","input":{"text":"k"}}`), "fuzz-key-1")
	f.Add(uint8(0), []byte(`{}`), "a b")
	hc := &http.Client{}
	f.Fuzz(func(t *testing.T, ep uint8, body []byte, idem string) {
		e := endpoints[int(ep)%len(endpoints)]
		req, err := http.NewRequest(e.method, ta.srv.URL+e.path, bytes.NewReader(body))
		if err != nil {
			t.Skip()
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if e.key != "" {
			req.Header.Set("Authorization", "Bearer "+e.key)
		}
		if idem != "" {
			req.Header["Idempotency-Key"] = []string{idem}
		}
		resp, err := hc.Do(req)
		if err != nil {
			return // the client refused to send it (an invalid header value)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s with %q (Idempotency-Key %q): %d %s", e.method, e.path, body, idem, resp.StatusCode, b)
		}
		if resp.StatusCode >= 400 && e.path != "/mcp" {
			var out struct {
				Error *struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &out); err != nil || out.Error == nil || out.Error.Code == "" || out.Error.Message == "" {
				t.Fatalf("%s %s with %q: %d without a named code: %s", e.method, e.path, body, resp.StatusCode, b)
			}
		}
	})
}
