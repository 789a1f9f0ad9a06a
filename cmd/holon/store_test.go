package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/kv/pg"
)

// postCallTo sends a dev-mode call to a gateway at api.
func postCallTo(t *testing.T, api, mandate, agent string, input any) (int, map[string]any) {
	t.Helper()
	return postKeyedCallTo(t, api, mandate, agent, "", input)
}

// postKeyedCallTo is postCallTo with an Idempotency-Key ("" for none). On
// the PostgreSQL store a keyed call's reservation is written before its
// agent runs, also for an in-process agent (which, without a key, keeps
// it in the gateway's memory and leaves no hold in the database): the
// tests of calls held in flight there send one.
func postKeyedCallTo(t *testing.T, api, mandate, agent, key string, input any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"mandate": mandate, "agent": agent, "input": input})
	req, err := http.NewRequest(http.MethodPost, "http://"+api+"/v0/calls", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
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
	// Receipt ids increase, with gaps: the bbolt gateway took a block of
	// them for its in-process calls, and the sequence restored is past it.
	receipt := out["receipt"].(map[string]any)
	id, _ := receipt["id"].(string)
	if seq, ok := holon.ReceiptSeq(id); !ok || seq < 2 || receipt["billed"] != true {
		t.Errorf("the call on the restored store: receipt %v, want an id after r1, billed", receipt)
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

// Ensure that several gateways serve from one PostgreSQL store at once:
// two start together (migrations, shipped agents, --mandates, the start-up
// recovery), a third that starts while a call runs on the first leaves
// that call alone (it settles, billed), calls spread over them are each
// answered 200 with a receipt of their own, and the store's money adds up
// at the end, receipts included.
func TestServe_SeveralGatewaysOnePostgres(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB(t, "shared")
	registry, mandates := opsDirs(t)
	env := map[string]string{"HOLON_REGISTRY": registry}
	args := func() []string {
		return []string{"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "holon.db"), "--mandates", mandates, "--store", url}
	}
	started := make(chan *runningServe, 2)
	for range 2 {
		go func() { started <- startServe(t, env, args()...) }()
	}
	a, b := <-started, <-started
	if a == nil || b == nil {
		t.FailNow()
	}
	slow := make(chan map[string]any, 1)
	go func() {
		code, out := postCallTo(t, a.addrs["api"], "ops/test", "ops-test/slow", map[string]any{"ms": 3000, "word": "long"})
		if code != http.StatusOK {
			t.Errorf("the long call: %d %v", code, out)
		}
		slow <- out
	}()
	time.Sleep(500 * time.Millisecond)
	c := startServe(t, env, args()...)

	ids := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			api := []*runningServe{a, b, c}[i%3].addrs["api"]
			code, out := postCallTo(t, api, "ops/test", "ops-test/slow", map[string]any{"ms": 0, "word": "w"})
			if code != http.StatusOK {
				t.Errorf("call %d on %s: %d %v", i, api, code, out)
				return
			}
			id := out["receipt"].(map[string]any)["id"].(string)
			mu.Lock()
			if ids[id] {
				t.Errorf("receipt %s answered twice", id)
			}
			ids[id] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	long := <-slow
	if r, _ := long["receipt"].(map[string]any); r == nil || r["status"] != "succeeded" || r["billed"] != true {
		t.Errorf("the call in flight while a gateway started: %v", long)
	}
	for _, rs := range []*runningServe{a, b, c} {
		rs.stop(t)
	}
	s, err := pg.Open(context.Background(), url, holon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.View(func(tx holon.Tx) error { return tx.(*pg.Tx).VerifyJournal() }); err != nil {
		t.Error(err)
	}
	storetest.CheckMoney(t, s)
}

// Ensure that the calls in flight of a gateway killed (SIGKILL) while
// another serves from the same PostgreSQL store are closed by the other
// once the dead one's lease ran out, within 1.5 leases: failed
// gateway_restarted, unbilled, no hold left, the money adding up, and the
// survivor serving throughout.
func TestServe_DeadGatewaysCallsClosedByTheOthers(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB(t, "dead")
	registry, mandates := opsDirs(t)
	const lease = 2 * time.Second
	args := func() []string {
		return []string{"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "holon.db"), "--mandates", mandates,
			"--store", url, "--store-lease", lease.String()}
	}
	dying := startChild(t, []string{"HOLON_REGISTRY=" + registry}, args()...)
	survivor := startServe(t, map[string]string{"HOLON_REGISTRY": registry}, args()...)
	// Keyed: its reservation is in the database (postKeyedCallTo).
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+dying.addr+"/v0/calls",
			strings.NewReader(`{"mandate":"ops/test","agent":"ops-test/slow","input":{"ms":60000,"word":"cut"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "cut")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()

	s, err := pg.Open(context.Background(), url, holon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	holds := func() []*holon.Hold { return heldIn(t, s) }
	for deadline := time.Now().Add(10 * time.Second); len(holds()) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the call never started on the dying gateway")
		}
	}
	cut := holds()[0].Receipt
	dying.cmd.Process.Kill()
	killed := time.Now()
	for len(holds()) > 0 {
		if time.Since(killed) > lease*3/2+time.Second {
			t.Fatalf("the dead gateway's call %s still held %v after it was killed (lease %v)", cut, time.Since(killed), lease)
		}
		if code, out := postCallTo(t, survivor.addrs["api"], "ops/test", "ops-test/slow", map[string]any{"ms": 0, "word": "on"}); code != http.StatusOK {
			t.Fatalf("the survivor answered %d %v", code, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the dead gateway's call was closed %v after the kill (lease %v)", time.Since(killed).Round(time.Millisecond), lease)
	if since := time.Since(killed); since < lease-200*time.Millisecond {
		t.Errorf("closed %v after the kill, before the lease of %v ran out", since, lease)
	}
	var r *holon.Receipt
	if err := s.View(func(tx holon.Tx) (err error) { r, err = tx.Receipt(cut); return err }); err != nil {
		t.Fatal(err)
	}
	if r.Status != holon.StatusFailed || r.Error == nil || *r.Error != holon.CodeGatewayRestarted || r.Billed {
		t.Errorf("the dead gateway's call: %s %v billed=%v", r.Status, r.Error, r.Billed)
	}
	survivor.stop(t)
	storetest.CheckMoney(t, s)
}

// heldIn lists the calls in flight in a PostgreSQL store.
func heldIn(t *testing.T, s *pg.Store) []*holon.Hold {
	t.Helper()
	var hs []*holon.Hold
	if err := s.View(func(tx holon.Tx) (err error) { hs, err = tx.Holds(); return err }); err != nil {
		t.Fatal(err)
	}
	return hs
}
