package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"holon.dev/holon/backup/pgtest"
)

// postCallTo sends a dev-mode call to a gateway at api.
func postCallTo(t *testing.T, api, mandate, agent string, input any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"mandate": mandate, "agent": agent, "input": input})
	resp, err := http.Post("http://"+api+"/v0/calls", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// Ensure that a bbolt gateway's backup restores into PostgreSQL (holon
// restore --store) and serves (holon serve --store: a call billed on top
// of the restored money); that the PostgreSQL store's live backup
// (holon backup --store) restores into bbolt; and that holon verify passes
// on the PostgreSQL store, on its backup and on the bbolt store restored
// from it.
func TestServe_PostgresStore(t *testing.T) {
	srv := pgtest.Start(t)
	dir := t.TempDir()
	env := map[string]string{"HOLON_REGISTRY": "agents,examples"}

	bolt := filepath.Join(dir, "bolt.db")
	rs := startServe(t, env, "--addr", "127.0.0.1:0", "--db", bolt)
	if code, out := postCallTo(t, rs.addrs["api"], "alice/sandbox", "holon-labs/company-lookup", map[string]any{"name": "acme corp"}); code != http.StatusOK {
		t.Fatalf("call on bbolt: %d %v", code, out)
	}
	rs.stop(t)
	fromBolt := filepath.Join(dir, "from-bolt.jsonl")
	if code, _, stderr := run(t, "backup", "--db", bolt, "--out", fromBolt); code != 0 {
		t.Fatalf("backup --db: %d %s", code, stderr)
	}
	url := srv.CreateDB(t, "holon")
	if code, out, stderr := run(t, "restore", "--in", fromBolt, "--store", url); code != 0 {
		t.Fatalf("restore --store: %d %s%s", code, out, stderr)
	}

	rs = startServe(t, env, "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "pg-side.db"), "--store", url)
	code, out := postCallTo(t, rs.addrs["api"], "alice/sandbox", "holon-labs/company-lookup", map[string]any{"name": "acme corp"})
	if code != http.StatusOK {
		t.Fatalf("call on PostgreSQL: %d %v\n%s", code, out, rs.stderr.String())
	}
	receipt := out["receipt"].(map[string]any)
	if receipt["id"] != "r2" || receipt["billed"] != true {
		t.Errorf("the call on the restored store: receipt %v, want r2 billed", receipt)
	}
	rs.stop(t)

	if code, out, stderr := run(t, "verify", "--store", url); code != 0 || !strings.Contains(out, "PostgreSQL store") {
		t.Fatalf("verify --store: %d\n%s%s", code, out, stderr)
	}
	fromPG := filepath.Join(dir, "from-pg.jsonl")
	if code, _, stderr := run(t, "backup", "--store", url, "--out", fromPG); code != 0 {
		t.Fatalf("backup --store: %d %s", code, stderr)
	}
	restored := filepath.Join(dir, "restored.db")
	if code, out, stderr := run(t, "restore", "--in", fromPG, "--db", restored); code != 0 {
		t.Fatalf("restore --db: %d %s%s", code, out, stderr)
	}
	for _, args := range [][]string{{"verify", "--in", fromPG}, {"verify", "--db", restored}} {
		if code, out, stderr := run(t, args...); code != 0 {
			t.Errorf("%s: %d\n%s%s", strings.Join(args, " "), code, out, stderr)
		}
	}
	if code, _, stderr := run(t, "serve", "--store", "/var/lib/holon.db"); code == 0 || !strings.Contains(stderr, "PostgreSQL URL") {
		t.Errorf("serve --store FILE: %d %s", code, stderr)
	}
}
