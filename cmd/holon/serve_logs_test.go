package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Ensure that the logs of a production gateway's run, with signups, calls
// (succeeded, rejected), bad and revoked keys, keys in paths, admin
// requests and a scrape, are JSON lines that carry one line per request
// and never a key, a secret, or any part of a call's input or output.
func TestServe_LogsCarryNoKeyNorInput(t *testing.T) {
	env := productionEnv()
	rs := startServe(t, env, "--hosted", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "holon.db"))
	api := "http://" + rs.addrs["api"]
	c := &http.Client{Timeout: 20 * time.Second}

	var ann struct {
		HumanKey string `json:"human_key"`
		AgentKey string `json:"agent_key"`
	}
	if code := do(t, c, "POST", api+"/v0/signup", "", map[string]string{"handle": "ann", "email": "ann@example.com"}, &ann); code != http.StatusCreated {
		t.Fatalf("signup: %d", code)
	}
	if !strings.HasPrefix(ann.HumanKey, "hlk_h_") || !strings.HasPrefix(ann.AgentKey, "hlk_a_") {
		t.Fatalf("signup keys %q %q", ann.HumanKey, ann.AgentKey)
	}
	// Inputs with values that must never be logged: a CSV whose cells come
	// back in the output, and one the agent's schema rejects.
	const cell, rejected = "zqcanarycell7731", "zqcanaryrejected4410"
	call := func(key string, input any) int {
		return do(t, c, "POST", api+"/v0/calls", key, map[string]any{"agent": "holon-labs/csv-profile", "input": input}, nil)
	}
	if code := call(ann.AgentKey, map[string]string{"csv": "name\n" + cell + "\n"}); code != http.StatusOK {
		t.Fatalf("call: %d\n%s", code, rs.stderr.String())
	}
	if code := call(ann.AgentKey, map[string]any{"csv": 7, "note": rejected}); code != http.StatusUnprocessableEntity {
		t.Errorf("rejected call: %d", code)
	}
	// Keys where they do not belong: a wrong one, one in the path, the
	// admin key where an account key goes, a revoked one.
	wrong := "hlk_a_" + strings.Repeat("q", 52)
	call(wrong, map[string]string{"csv": "a\n1\n"})
	if code := do(t, c, "DELETE", api+"/v0/keys/"+ann.AgentKey, ann.HumanKey, nil, nil); code != http.StatusBadRequest {
		t.Errorf("DELETE /v0/keys/<whole key>: %d, want 400", code)
	}
	if code := do(t, c, "DELETE", api+"/v0/keys/"+ann.AgentKey[:14], ann.HumanKey, nil, nil); code != http.StatusOK {
		t.Errorf("revoke: %d", code)
	}
	if code := call(ann.AgentKey, map[string]string{"csv": "a\n1\n"}); code != http.StatusUnauthorized {
		t.Errorf("call with a revoked key: %d, want 401", code)
	}
	do(t, c, "GET", api+"/v0/receipts?key="+ann.HumanKey, ann.HumanKey, nil, nil)
	do(t, c, "GET", api+"/v0/admin/accounts", env["HOLON_ADMIN_KEY"], nil, nil)
	do(t, c, "GET", api+"/v0/me", env["HOLON_ADMIN_KEY"], nil, nil)
	scrape(t, api+"/metrics", env["HOLON_ADMIN_KEY"])
	rs.stop(t)

	logs := rs.stderr.String()
	requests := 0
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %s", line)
		}
		if m["msg"] == "request" {
			requests++
		}
	}
	if requests < 10 {
		t.Errorf("%d request lines, want one per request:\n%s", requests, logs)
	}
	for what, secret := range map[string]string{
		"the human key": ann.HumanKey, "the agent key": ann.AgentKey, "a wrong key": wrong,
		"the admin key": env["HOLON_ADMIN_KEY"], "the file secret": env["HOLON_FILE_SECRET"],
		"an input value": cell, "a rejected input value": rejected,
	} {
		if strings.Contains(logs, secret) {
			t.Errorf("%s is in the logs:\n%s", what, logs)
		}
	}
	if !strings.Contains(logs, ann.AgentKey[:14]) {
		t.Errorf("the logs do not name the agent key by its prefix %s", ann.AgentKey[:14])
	}
}
