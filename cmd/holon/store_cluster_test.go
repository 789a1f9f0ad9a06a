package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/kv/pg"
)

// registryBound is the bound tested for a change of the registry made by
// one gateway to be in effect on every other: appliance.RegistrySyncEvery
// (1 s) and one read of the store, with room for a loaded machine.
const registryBound = 3 * appliance.RegistrySyncEvery

// within polls ok every 10 ms until it holds and returns how long that
// took; past bound it fails the test, saying what.
func within(t *testing.T, bound time.Duration, what string, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > bound {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// Ensure that a version published, and then yanked, through one gateway
// (its record written to the shared store, as publishing writes it) is
// listed, and then withdrawn, by every gateway on the same PostgreSQL
// store within the registry's bound: the registry is the one thing a
// gateway keeps in memory.
func TestServe_RegistryChangesReachEveryGateway(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB(t, "registry")
	registry, mandates := opsDirs(t)
	env := map[string]string{"HOLON_REGISTRY": registry}
	args := func() []string {
		return []string{"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "holon.db"), "--mandates", mandates, "--store", url}
	}
	gws := []*runningServe{startServe(t, env, args()...), startServe(t, env, args()...)}
	s, err := pg.Open(context.Background(), url, holon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "listed"), 0o755); err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(slowManifest, "id: ops-test/slow", "id: ops-test/listed", 1)
	if err := os.WriteFile(filepath.Join(dir, "listed", "holon.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	ms, err := gateway.LoadManifestDir(dir)
	if err != nil || len(ms) != 1 {
		t.Fatalf("the manifest: %v %v", ms, err)
	}
	raw, err := json.Marshal(ms[0])
	if err != nil {
		t.Fatal(err)
	}
	const ref = "ops-test/listed@1.0.0"
	listed := func(rs *runningServe) int {
		resp, err := http.Get("http://" + rs.addrs["api"] + "/v0/agents/ops-test/listed")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, rs := range gws {
		if code := listed(rs); code != http.StatusNotFound {
			t.Fatalf("before it is published: %d", code)
		}
	}
	err = s.Update(context.Background(), func(tx holon.Tx) error {
		return tx.PutAgent(ref, holon.Doc{Doc: raw, Created: time.Now().UTC(), Published: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, rs := range gws {
		took := within(t, registryBound, fmt.Sprintf("gateway %d lists the version published", i+1), func() bool { return listed(rs) == http.StatusOK })
		t.Logf("gateway %d lists the version published %v after it was stored", i+1, took.Round(time.Millisecond))
	}
	err = s.Update(context.Background(), func(tx holon.Tx) error {
		d, err := tx.Agent(ref)
		if err != nil {
			return err
		}
		d.Yanked = time.Now().UTC().Format(time.RFC3339)
		return tx.PutAgent(ref, d)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, rs := range gws {
		took := within(t, registryBound, fmt.Sprintf("gateway %d withdraws the version yanked", i+1), func() bool { return listed(rs) == http.StatusNotFound })
		t.Logf("gateway %d withdraws the version yanked %v after it was stored", i+1, took.Round(time.Millisecond))
	}
}

// Ensure that a mandate edited by one gateway (started with --mandates
// that narrow it) binds every other gateway on the same PostgreSQL store
// at once: a gateway reads the mandate of each call from the store (its
// parsed copy is used only while the stored record is byte for byte the
// same).
func TestServe_MandateEditReachesEveryGateway(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB(t, "mandates")
	registry, mandates := opsDirs(t)
	env := map[string]string{"HOLON_REGISTRY": registry}
	first := startServe(t, env, "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "holon.db"), "--mandates", mandates, "--store", url)
	if code, out := postCallTo(t, first.addrs["api"], "ops/test", "ops-test/slow", map[string]any{"ms": 0, "word": "before"}); code != http.StatusOK {
		t.Fatalf("before the edit: %d %v", code, out)
	}
	narrowed := t.TempDir()
	edit := strings.Replace(opsMandate, `agents: ["ops-test/*", "holon-labs/*"]`, `agents: ["holon-labs/*"]`, 1)
	if edit == opsMandate {
		t.Fatal("the edit changed nothing")
	}
	if err := os.WriteFile(filepath.Join(narrowed, "ops-test.yaml"), []byte(edit), 0o644); err != nil {
		t.Fatal(err)
	}
	startServe(t, env, "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "holon.db"), "--mandates", narrowed, "--store", url)
	code, out := postCallTo(t, first.addrs["api"], "ops/test", "ops-test/slow", map[string]any{"ms": 0, "word": "after"})
	if e, _ := out["error"].(map[string]any); code != http.StatusForbidden || e == nil || e["code"] != holon.CodeNotAllowed {
		if r, _ := out["receipt"].(map[string]any); r == nil || r["error"] != holon.CodeNotAllowed {
			t.Errorf("the first gateway, right after another narrowed the mandate: %d %v, want 403 not_allowed", code, out)
		}
	}
}

// Ensure that three hosted gateways start at once on one PostgreSQL store
// (migrations, the shipped agents, the start-up recovery), serve the same
// accounts, and that a key revoked and an account disabled through one
// gateway are refused by the others at once (keys and accounts are read
// from the store by every request; nothing of them is kept in memory).
func TestServe_Hosted_KeysAndAccountsReachEveryGateway(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB(t, "hosted")
	const admin = "adm_0123456789abcdef0123456789abcdef0123456789ab"
	env := map[string]string{"HOLON_ADMIN_KEY": admin, "HOLON_REGISTRY": "agents,examples",
		"HOLON_RATE_ACCOUNT": "100000/min", "HOLON_RATE_ADDRESS": "100000/min", "HOLON_RATE_SIGNUP": "10000/h"}
	started := make(chan *runningServe, 3)
	for range 3 {
		go func() {
			started <- startServe(t, env, "--hosted", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "holon.db"), "--store", url)
		}()
	}
	gws := []*runningServe{<-started, <-started, <-started}
	for _, rs := range gws {
		if rs == nil {
			t.FailNow()
		}
	}
	c := &http.Client{Timeout: 30 * time.Second}
	at := func(i int, path string) string { return "http://" + gws[i%3].addrs["api"] + path }
	type keys struct {
		HumanKey string `json:"human_key"`
		AgentKey string `json:"agent_key"`
	}
	signup := func(i int, handle string) keys {
		var k keys
		if code := do(t, c, "POST", at(i, "/v0/signup"), "", map[string]string{"handle": handle, "email": handle + "@example.com"}, &k); code != http.StatusCreated {
			t.Fatalf("signup %s: %d", handle, code)
		}
		return k
	}
	call := func(i int, key string) (int, map[string]any) {
		var out map[string]any
		code := do(t, c, "POST", at(i, "/v0/calls"), key, map[string]any{"agent": "holon-labs/company-lookup", "input": map[string]any{"name": "acme corp"}}, &out)
		return code, out
	}

	ann := signup(0, "ann")
	for i := range 3 {
		if code, out := call(i, ann.AgentKey); code != http.StatusOK {
			t.Fatalf("ann's call on gateway %d: %d %v", i+1, code, out)
		}
	}
	prefix := ann.AgentKey[:token.PrefixLen]
	if code := do(t, c, "DELETE", at(0, "/v0/keys/"+prefix), ann.HumanKey, nil, nil); code != http.StatusOK {
		t.Fatalf("revoke %s on gateway 1: %d", prefix, code)
	}
	for i := 1; i < 3; i++ {
		if code, out := call(i, ann.AgentKey); code != http.StatusUnauthorized {
			t.Errorf("the key revoked on gateway 1, on gateway %d right after: %d %v, want 401", i+1, code, out)
		}
	}

	bob := signup(1, "bob")
	if code := do(t, c, "POST", at(2, "/v0/admin/accounts/bob/disable"), admin, map[string]string{"reason": "a test"}, nil); code != http.StatusOK {
		t.Fatalf("disable bob on gateway 3: %d", code)
	}
	for i := range 2 {
		if code, out := call(i, bob.AgentKey); code != http.StatusUnauthorized && code != http.StatusForbidden {
			t.Errorf("bob, disabled on gateway 3, calling on gateway %d right after: %d %v, want refused", i+1, code, out)
		}
		var me map[string]any
		if code := do(t, c, "GET", at(i, "/v0/me"), bob.HumanKey, nil, &me); code == http.StatusOK {
			t.Errorf("bob, disabled on gateway 3, on gateway %d right after: GET /v0/me %d %v", i+1, code, me)
		}
	}
	for _, rs := range gws {
		rs.stop(t)
	}
	s, err := pg.Open(context.Background(), url, holon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckMoney(t, s)
}

// Ensure that the work that runs once (the jobs a gateway leads) moves to
// another gateway when the leading process is killed (SIGKILL, not a
// store handle closed): every job the dead gateway led is led by the
// survivor within 1.5 leases and a second of the kill.
func TestServe_KilledLeadersJobsTakenOver(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB(t, "leaders")
	registry, mandates := opsDirs(t)
	const lease = 2 * time.Second
	args := func() []string {
		return []string{"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "holon.db"), "--mandates", mandates,
			"--store", url, "--store-lease", lease.String()}
	}
	conn := srv.Connect(t, url)
	ctx := context.Background()
	// led lists the jobs with a leader whose term runs, by leader.
	led := func() map[string]string {
		t.Helper()
		rows, err := conn.Query(ctx, `SELECT job, gateway FROM job_leaders WHERE expires > now()`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]string{}
		for rows.Next() {
			var job, gw string
			if err := rows.Scan(&job, &gw); err != nil {
				t.Fatal(err)
			}
			m[job] = gw
		}
		return m
	}
	dying := startChild(t, []string{"HOLON_REGISTRY=" + registry}, args()...)
	var dead string
	if err := conn.QueryRow(ctx, `SELECT id FROM gateways WHERE expires > now()`).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	var jobs []string
	within(t, 10*time.Second, "the first gateway leads the jobs", func() bool {
		jobs = jobs[:0]
		for job, gw := range led() {
			if gw == dead {
				jobs = append(jobs, job)
			}
		}
		return len(jobs) > 0
	})
	startServe(t, map[string]string{"HOLON_REGISTRY": registry}, args()...)
	dying.cmd.Process.Kill()
	took := within(t, lease*3/2+time.Second, fmt.Sprintf("the jobs %v of the killed leader taken over", jobs), func() bool {
		now := led()
		for _, job := range jobs {
			if gw := now[job]; gw == "" || gw == dead {
				return false
			}
		}
		return true
	})
	t.Logf("the killed leader's jobs %v were led by the survivor %v after the kill (lease %v)", jobs, took.Round(time.Millisecond), lease)
}
