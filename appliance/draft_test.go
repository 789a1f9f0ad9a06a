package appliance_test

import (
	"encoding/json"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/appliance/publishing"
	"holon.dev/holon/gateway/contract"
)

// Ensure that POST /v0/agents/draft calls the endpoint once, with the
// credential set for <handle>/<name>, and answers a draft manifest (and its
// YAML) whose schemas describe the example input and the answer, license
// proprietary, the answer as an example; that it stores nothing; and that
// the draft publishes as it is.
func TestDraft_Webhook(t *testing.T) {
	srv := newAuthorServer(t)
	g := newGitHubApp(t, withAuthorServer(srv))
	lena := g.author(101, "lena")
	const token = "draft-Tk7Wq2Lm9Xv4Bn1Rz8"
	lena.human.must(200, "PUT", "/v0/agents/lena/hooky/credential", map[string]any{"token": token})
	srv.requireToken(token)

	out := lena.human.must(200, "POST", "/v0/agents/draft", map[string]any{
		"name": "hooky", "endpoint": srv.srv.URL + "/run", "input": map[string]any{"text": "hello", "n": 3},
		"summary": "Echoes a text.", "price": "0.05",
	})
	if auths := srv.authorizations("/run"); len(auths) != 1 || auths[0] != "Bearer "+token {
		t.Errorf("the endpoint got %q, want one call with the bearer token", auths)
	}
	m := out["manifest"].(map[string]any)
	iface := m["interface"].(map[string]any)
	wantIn := `{"properties":{"n":{"type":"integer"},"text":{"type":"string"}},"required":["n","text"],"type":"object"}`
	wantOut := `{"properties":{"echo":{"type":"string"}},"required":["echo"],"type":"object"}`
	if got := string(mustJSON(t, iface["input"])); got != wantIn {
		t.Errorf("input schema %s, want %s", got, wantIn)
	}
	if got := string(mustJSON(t, iface["output"])); got != wantOut {
		t.Errorf("output schema %s, want %s", got, wantOut)
	}
	if m["id"] != "lena/hooky" || m["license"] != "proprietary" || str(m["pricing"]) != "map[amount:0.05 currency:EUR model:per_run]" {
		t.Errorf("draft: %v", m)
	}
	if ex := iface["examples"].([]any); len(ex) != 1 || str(ex[0].(map[string]any)["output"]) != "map[echo:hello]" {
		t.Errorf("examples: %v", iface["examples"])
	}
	y := str(out["yaml"])
	if fromYAML, err := contract.ParseManifest([]byte(y)); err != nil || fromYAML.Ref() != "lena/hooky@0.1.0" {
		t.Errorf("the yaml is not the manifest: %v\n%s", err, y)
	}
	if _, listed := g.app.Engine().Registry().Get("lena/hooky@0.1.0"); listed {
		t.Error("a draft was listed")
	}
	// Reviewed, then published as it is.
	lena.human.must(201, "POST", "/v0/agents", m)

	for _, c := range []struct {
		name   string
		body   map[string]any
		status int
		code   string
	}{
		{"bad name", map[string]any{"name": "Hooky!", "endpoint": srv.srv.URL + "/run", "input": map[string]any{}}, 400, holon.CodeInvalidRequest},
		{"no input", map[string]any{"name": "h2", "endpoint": srv.srv.URL + "/run"}, 400, holon.CodeInvalidRequest},
		{"http endpoint", map[string]any{"name": "h2", "endpoint": "http://127.0.0.1/run", "input": map[string]any{}}, 400, publishing.CodeEndpointNotHTTPS},
		{"no credential: the server refuses", map[string]any{"name": "h2", "endpoint": srv.srv.URL + "/run", "input": map[string]any{"text": "a"}}, 502, publishing.CodeDraftCallFailed},
		{"endpoint not answering", map[string]any{"name": "h2", "endpoint": "https://127.0.0.1:1/run", "input": map[string]any{"text": "a"}}, 502, publishing.CodeDraftCallFailed},
	} {
		st, out := lena.human.do("POST", "/v0/agents/draft", c.body)
		if st != c.status || errorCode(out) != c.code {
			t.Errorf("%s: %d %v, want %d %s", c.name, st, out, c.status, c.code)
		}
	}
}

// Ensure that a draft never reaches a private address on a gateway that
// guards its endpoints.
func TestDraft_PrivateEndpoint(t *testing.T) {
	g, lena := publishWorld(t)
	st, out := lena.human.do("POST", "/v0/agents/draft", map[string]any{"name": "h", "endpoint": "https://internal.lena.example/run", "input": json.RawMessage(`{"a":1}`)})
	if st != 400 || errorCode(out) != publishing.CodeEndpointNotPublic || !strings.Contains(str(out), "10.1.2.3") {
		t.Errorf("private draft endpoint: %d %v", st, out)
	}
	_ = g
}
