package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/backup"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

const adminKey = "test-admin-key-0123456789abcdef0123"

// run runs the holon binary's Main with args and HOLON_KEY set.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
		if k == "HOLON_KEY" {
			return adminKey
		}
		return ""
	}}
	code = m.Run(context.Background(), args)
	return code, out.String(), errb.String()
}

// gateway is a dev-mode appliance with the demo agents on loopback, its live
// backup mounted behind the admin key.
type testGateway struct {
	t   *testing.T
	app *appliance.App
	srv *httptest.Server
}

func startGateway(t *testing.T, db string) *testGateway {
	t.Helper()
	app, err := appliance.Open(context.Background(), appliance.Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler,
		DB: db, Registry: []string{"agents", "examples"}, SignupCredit: journal.MustParseAmount("5.00"), NoSync: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	live := backup.StoreHandler(app.Engine().Store())
	mux.Handle("/v0/admin/backup", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+adminKey {
			http.Error(w, `{"error":{"code":"unauthorized"}}`, http.StatusUnauthorized)
			return
		}
		live.ServeHTTP(w, r)
	}))
	mux.Handle("/", app.Handler())
	g := &testGateway{t: t, app: app, srv: httptest.NewServer(mux)}
	t.Cleanup(g.stop)
	return g
}

func (g *testGateway) stop() {
	if g.srv != nil {
		g.srv.Close()
		g.app.Close()
		g.srv = nil
	}
}

// post sends a JSON request and decodes the answer.
func (g *testGateway) post(path string, body any) (int, map[string]any) {
	b, _ := json.Marshal(body)
	resp, err := http.Post(g.srv.URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		g.t.Error(err)
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		g.t.Errorf("POST %s: %v", path, err)
	}
	return resp.StatusCode, out
}

func (g *testGateway) call(mandate, agent string, input any) (int, map[string]any) {
	return g.post("/v0/calls", map[string]any{"mandate": mandate, "agent": agent, "input": input})
}

// state is what must survive a backup and restore: every account, every
// receipt, every budget and the counters.
type state struct {
	Accounts map[string]holon.Account
	Receipts map[string]*holon.Receipt
	Budgets  map[string]holon.Budget
	Counters map[string]uint64
}

func readState(t *testing.T, s *kv.Store) state {
	t.Helper()
	st := state{Accounts: map[string]holon.Account{}, Receipts: map[string]*holon.Receipt{}, Budgets: map[string]holon.Budget{}, Counters: map[string]uint64{}}
	err := s.View(func(tx *kv.Tx) error {
		if err := tx.ForEachAccount(func(n string, a holon.Account) error { st.Accounts[n] = a; return nil }); err != nil {
			return err
		}
		if err := tx.ForEachReceipt(func(r *holon.Receipt) error { st.Receipts[r.ID] = r; return nil }); err != nil {
			return err
		}
		if err := tx.ForEachBudget(func(m string, b holon.Budget) error { st.Budgets[m] = b; return nil }); err != nil {
			return err
		}
		return tx.ForEachCounter(func(n string, v uint64) error { st.Counters[n] = v; return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// stateOf reads the state of a stopped gateway's store.
func stateOf(t *testing.T, path string) state {
	t.Helper()
	s, err := kv.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return readState(t, s)
}

// Ensure that the drill passes: a gateway with real traffic (the delegated
// blog run with its approval, paid calls, failures, denials, rejected input,
// pending and rejected approvals, hosted documents) is backed up through its
// live endpoint while calls continue; the copy restores into a new database
// with the same accounts, receipts, balances and counters, and a journal
// that sums to zero; verify passes on both; the restored database serves
// again; and the same copy loads into a real PostgreSQL, where SQL gives the
// same balances and receipt counts and the journal's rules hold.
func TestBackup_Drill(t *testing.T) {
	dir := t.TempDir()
	g := startGateway(t, filepath.Join(dir, "live.db"))
	store := g.app.Engine().Store()

	// The blog's delegated run, held for approval and approved.
	code, held := g.call("alice/bookkeeping-q4", "holon-labs/invoice-pipeline", map[string]any{"text": "ACME Corp\nWidgets, 2, 10.00\nGadgets, 1, 25.50\nShipping, 1, 5.00"})
	if code != http.StatusAccepted {
		t.Fatalf("blog run: %d %v", code, held)
	}
	code, ran := g.post("/v0/approvals/"+held["approval"].(map[string]any)["id"].(string), map[string]any{})
	if code != http.StatusOK || ran["receipt"].(map[string]any)["cost"].(map[string]any)["total"] != "0.192" {
		t.Fatalf("approve: %d %v", code, ran)
	}
	// A failure, a denial, a rejected input, an unknown agent.
	for _, c := range []struct {
		mandate, agent string
		input          any
		status         int
	}{
		{"alice/sandbox", "holon-labs/company-lookup", map[string]any{"name": "Nobody Ltd"}, 0},
		{"alice/sandbox", "holon-labs/invoice-pipeline", map[string]any{"text": "x"}, http.StatusForbidden},
		{"alice/sandbox", "holon-labs/company-lookup", map[string]any{}, http.StatusUnprocessableEntity},
		{"alice/sandbox", "nobody/nothing", map[string]any{}, http.StatusNotFound},
	} {
		code, out := g.call(c.mandate, c.agent, c.input)
		if code < 400 || (c.status != 0 && code != c.status) {
			t.Errorf("%s: %d %v, want a refusal %d", c.agent, code, out, c.status)
		}
	}
	// An approval left pending (its input kept), one rejected.
	if code, _ := g.call("alice/bookkeeping-q4", "holon-labs/invoice-pipeline", map[string]any{"text": "Globex GmbH\nBolts, 3, 1.00"}); code != http.StatusAccepted {
		t.Fatalf("pending approval: %d", code)
	}
	code, rej := g.call("alice/bookkeeping-q4", "holon-labs/invoice-pipeline", map[string]any{"text": "Initech SARL\nStaplers, 1, 9.00"})
	if code != http.StatusAccepted {
		t.Fatalf("second approval: %d", code)
	}
	if code, out := g.post("/v0/approvals/"+rej["approval"].(map[string]any)["id"].(string), map[string]any{"decision": "reject"}); code != http.StatusOK {
		t.Fatalf("reject: %d %v", code, out)
	}
	// Hosted-product documents, one under a sequence key.
	if err := store.Update(context.Background(), func(tx holon.Tx) error {
		if err := tx.Put(holon.BucketUsers, "alice", map[string]any{"handle": "alice", "email": "alice@example.com"}); err != nil {
			return err
		}
		_, err := tx.Append(holon.BucketModLog, map[string]any{"action": "yank", "reason": "drill"})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// A file uploaded (dev: owned by the mandate's issuer), used by calls.
	invoice := []byte("Initech SARL\nStaplers, 1, 9.00\nToner, 2, 30.00\n")
	resp, err := http.Post(g.srv.URL+"/v0/files?mandate=alice/bookkeeping-q4", "text/plain", bytes.NewReader(invoice))
	if err != nil {
		t.Fatal(err)
	}
	var uploaded map[string]any
	json.NewDecoder(resp.Body).Decode(&uploaded)
	resp.Body.Close()
	handle, _ := uploaded["file"].(string)
	if resp.StatusCode != http.StatusCreated || handle == "" {
		t.Fatalf("upload: %d %v", resp.StatusCode, uploaded)
	}
	if code, out := g.call("alice/bookkeeping-q4", "holon-labs/text-tables", map[string]any{"file": handle}); code != http.StatusOK {
		t.Fatalf("text-tables with the file: %d %v", code, out)
	}

	// Calls keep coming while the backup is taken.
	var calls atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	work := []struct {
		agent string
		input any
	}{
		{"holon-labs/company-lookup", map[string]any{"name": "acme corp"}},
		{"holon-labs/company-lookup", map[string]any{"name": "Nobody Ltd"}},
		{"holon-labs/csv-profile", map[string]any{"csv": "a,b\n1,2\n"}},
		{"holon-labs/text-tables", map[string]any{"text": "Widget, 2, 3.00\nGadget, 1, 12.00"}},
		{"holon-labs/csv-profile", map[string]any{"file": handle}},
	}
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				w := work[(i+n)%len(work)]
				// 502 is a failed agent run (Nobody Ltd): traffic too.
				if code, out := g.call("alice/bookkeeping-q4", w.agent, w.input); code == 0 || code == http.StatusInternalServerError {
					t.Errorf("call during the backup: %d %v", code, out)
					return
				}
				calls.Add(1)
			}
		}()
	}
	waitCalls := func(n int64) {
		for deadline := time.Now().Add(30 * time.Second); calls.Load() < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("only %d calls made, waiting for %d", calls.Load(), n)
			}
		}
	}
	waitCalls(30)
	before := calls.Load()
	livePath := filepath.Join(dir, "live.jsonl")
	code, _, stderr := run(t, "backup", "--url", g.srv.URL, "--out", livePath)
	if code != 0 {
		t.Fatalf("holon backup --url: exit %d: %s", code, stderr)
	}
	during := calls.Load() - before
	waitCalls(before + during + 30)
	close(stop)
	wg.Wait()
	t.Logf("%d calls before the backup, %d while it ran, %d in all; %s", before, during, calls.Load(), strings.TrimSpace(stderr))

	f, err := os.Open(livePath)
	if err != nil {
		t.Fatal(err)
	}
	liveSum, err := backup.Check(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Files are left out by design, and the header says so.
	if liveSum.Header.Tables[holon.BucketFiles].Rows != 0 || !strings.Contains(liveSum.Header.LeftOut[holon.BucketFiles], "24 hours") {
		t.Errorf("files in the backup: %+v, left out: %q", liveSum.Header.Tables[holon.BucketFiles], liveSum.Header.LeftOut)
	}
	now := readState(t, kv.Unwrap(store))
	if int64(len(now.Receipts)) <= liveSum.Header.Tables["receipts"].Rows {
		t.Errorf("the store holds %d receipts, the backup %d: calls did not continue past the backup", len(now.Receipts), liveSum.Header.Tables["receipts"].Rows)
	}

	// The live copy restores, and it and the restored store verify.
	restored := filepath.Join(dir, "restored.db")
	if code, out, errs := run(t, "restore", "--in", livePath, "--db", restored); code != 0 || !strings.Contains(out, "restored ") {
		t.Fatalf("holon restore: exit %d: %s%s", code, out, errs)
	}
	for _, args := range [][]string{{"verify", "--in", livePath}, {"verify", "--db", restored}} {
		if code, out, errs := run(t, args...); code != 0 || !strings.Contains(out, "verify: all 13 checks passed") {
			t.Errorf("holon %v: exit %d:\n%s%s", args, code, out, errs)
		}
	}
	fromLive := stateOf(t, restored)
	if fromLive.Counters["receipts"] != uint64(len(fromLive.Receipts)) || uint64(len(fromLive.Receipts)) != uint64(liveSum.Header.Tables["receipts"].Rows) {
		t.Errorf("restored: receipts counter %d, %d receipts, the backup %d", fromLive.Counters["receipts"], len(fromLive.Receipts), liveSum.Header.Tables["receipts"].Rows)
	}
	// Every receipt the copy holds is the source's, or an earlier state of
	// it (a call still running when the copy was taken).
	for id, r := range fromLive.Receipts {
		if cur := now.Receipts[id]; !reflect.DeepEqual(r, cur) && r.Status != "running" && r.Status != "pending_approval" {
			t.Errorf("receipt %s differs from the source: %+v vs %+v", id, r, cur)
		}
	}

	// Quiet now: a second copy gives back exactly the source.
	finalPath := filepath.Join(dir, "final.jsonl")
	if code, _, errs := run(t, "backup", "--url", g.srv.URL, "--out", finalPath); code != 0 {
		t.Fatalf("holon backup: exit %d: %s", code, errs)
	}
	final := filepath.Join(dir, "final.db")
	if code, out, errs := run(t, "restore", "--in", finalPath, "--db", final); code != 0 {
		t.Fatalf("holon restore: exit %d: %s%s", code, out, errs)
	}
	src := readState(t, kv.Unwrap(store))
	if got := stateOf(t, final); !reflect.DeepEqual(got, src) {
		t.Errorf("the restored store differs from the source:\n got %+v\nwant %+v", got.Accounts, src.Accounts)
	}
	var total journal.Amount
	for _, a := range src.Accounts {
		total += a.Balance
	}
	if total != 0 || src.Accounts["alice"].Balance == 5*journal.Micro {
		t.Errorf("balances sum to %s, alice has %s", total, src.Accounts["alice"].Balance)
	}
	g.stop()
	if code, out, errs := run(t, "verify", "--db", filepath.Join(dir, "live.db")); code != 0 {
		t.Errorf("holon verify --db live.db: exit %d:\n%s%s", code, out, errs)
	}

	// The restored copy is a working gateway: calls in flight at the copy
	// are closed, ids continue.
	g2 := startGateway(t, restored)
	code, out := g2.call("alice/bookkeeping-q4", "holon-labs/company-lookup", map[string]any{"name": "acme corp"})
	id := out["receipt"].(map[string]any)["id"].(string)
	if want := fmt.Sprintf("r%d", liveSum.Header.Tables["receipts"].Sequence+1); code != http.StatusOK || id != want {
		t.Errorf("call on the restored gateway: %d, receipt %s, want %s", code, id, want)
	}
	// The restored gateway has no files: the handle is unknown there.
	if code, out := g2.call("alice/bookkeeping-q4", "holon-labs/text-tables", map[string]any{"file": handle}); code != http.StatusNotFound {
		t.Errorf("the file on the restored gateway: %d %v", code, out)
	}
	g2.stop()
	if code, out, errs := run(t, "verify", "--db", restored); code != 0 {
		t.Errorf("verify after serving from the restored store: exit %d:\n%s%s", code, out, errs)
	}

	// The way out: the live copy in a real PostgreSQL.
	pg := pgtest.Start(t)
	url := pg.CreateDB(t, "drill")
	if code, out, errs := run(t, "restore", "--in", livePath, "--to-postgres", url); code != 0 {
		t.Fatalf("holon restore --to-postgres: exit %d: %s%s", code, out, errs)
	}
	conn := pg.Connect(t, url)
	ctx := context.Background()
	rows, err := conn.Query(ctx, `SELECT name, (balance * 1000000)::bigint FROM accounts`)
	if err != nil {
		t.Fatal(err)
	}
	balances := map[string]int64{}
	for rows.Next() {
		var name string
		var micros int64
		if err := rows.Scan(&name, &micros); err != nil {
			t.Fatal(err)
		}
		balances[name] = micros
	}
	for name, a := range fromLive.Accounts {
		if balances[name] != a.Balance.Micros() {
			t.Errorf("PostgreSQL: %s has %d micro-units, the store %d", name, balances[name], a.Balance.Micros())
		}
	}
	if len(balances) != len(fromLive.Accounts) {
		t.Errorf("PostgreSQL has %d accounts, the store %d", len(balances), len(fromLive.Accounts))
	}
	var receipts, unbalanced int64
	var sum string
	conn.QueryRow(ctx, `SELECT count(*) FROM receipts`).Scan(&receipts)
	conn.QueryRow(ctx, `SELECT sum(amount)::text FROM journal_lines`).Scan(&sum)
	conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT entry FROM journal_lines GROUP BY entry HAVING sum(amount) <> 0) u`).Scan(&unbalanced)
	if receipts != int64(len(fromLive.Receipts)) || sum != "0.000000" || unbalanced != 0 {
		t.Errorf("PostgreSQL: %d receipts (want %d), lines sum to %s, %d unbalanced entries", receipts, len(fromLive.Receipts), sum, unbalanced)
	}
	if _, err := conn.Exec(ctx, `UPDATE journal_lines SET amount = 0 WHERE entry = 1`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Errorf("UPDATE of a journal row: %v", err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM journal_entries WHERE seq = 1`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Errorf("DELETE of a journal row: %v", err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO journal_entries VALUES (1000000, 'drill:unbalanced', now(), '', 'x')`); err != nil {
		t.Fatal(err)
	}
	// Lines for an entry that exists are checked when their statement ends.
	if _, err := tx.Exec(ctx, `INSERT INTO journal_lines VALUES (1000000, 1, 'alice', -1), (1000000, 2, 'holon', 0.99)`); err == nil || !strings.Contains(err.Error(), "does not sum to zero") {
		t.Errorf("an unbalanced entry: %v", err)
	}
}

// Ensure that holon backup --db refuses a running gateway's file, saying to
// use --url, and leaves no file behind; that it copies a stopped one; and
// that it never overwrites a file.
func TestBackup_DB(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "holon.db")
	g := startGateway(t, db)
	out := filepath.Join(dir, "b.jsonl")
	code, _, stderr := run(t, "backup", "--db", db, "--out", out)
	if code != 1 || !strings.Contains(stderr, "a running gateway holds its store") || !strings.Contains(stderr, "--url") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if names := dirNames(t, dir); strings.Contains(strings.Join(names, " "), "jsonl") {
		t.Errorf("a refused backup left %v", names)
	}
	g.stop()
	if code, _, stderr := run(t, "backup", "--db", db, "--out", out); code != 0 || !strings.Contains(stderr, "backup: ") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	f, _ := os.Open(out)
	defer f.Close()
	if _, err := backup.Check(f); err != nil {
		t.Error(err)
	}
	if code, _, stderr := run(t, "backup", "--db", db, "--out", out); code != 1 || !strings.Contains(stderr, "exists") {
		t.Errorf("overwrite: exit %d: %s", code, stderr)
	}
	var buf bytes.Buffer
	m := &Main{Stdout: &buf, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	if code := m.Run(context.Background(), []string{"backup", "--db", db, "--out", "-"}); code != 0 {
		t.Errorf("--out -: exit %d", code)
	}
	if _, err := backup.Check(&buf); err != nil {
		t.Errorf("--out -: %v", err)
	}
	for _, args := range [][]string{{"backup"}, {"backup", "--out", out}, {"backup", "--db", db, "--url", "http://x", "--out", out}, {"restore", "--in", out}, {"verify"}} {
		if code, _, _ := run(t, args...); code != 2 {
			t.Errorf("holon %v: exit %d, want 2", args, code)
		}
	}
}

// Ensure that holon backup --url refuses a wrong key and a copy cut short,
// leaving no file.
func TestBackup_URLFailures(t *testing.T) {
	dir := t.TempDir()
	g := startGateway(t, filepath.Join(dir, "holon.db"))
	out := filepath.Join(dir, "b.jsonl")
	var errb bytes.Buffer
	m := &Main{Stdout: io.Discard, Stderr: &errb, Getenv: func(string) string { return "" }}
	if code := m.Run(context.Background(), []string{"backup", "--url", g.srv.URL, "--key", "wrong", "--out", out}); code != 1 || !strings.Contains(errb.String(), "401") {
		t.Errorf("wrong key: exit %d: %s", code, errb.String())
	}
	// A gateway that dies halfway through the copy.
	var full bytes.Buffer
	if _, err := backup.Write(&full, kv.Unwrap(g.app.Engine().Store()), backup.Options{}); err != nil {
		t.Fatal(err)
	}
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(full.Bytes()[:full.Len()/2])
	}))
	defer cut.Close()
	code, _, stderr := run(t, "backup", "--url", cut.URL, "--out", out)
	if code != 1 || !strings.Contains(stderr, "truncated") {
		t.Errorf("cut copy: exit %d: %s", code, stderr)
	}
	if names := dirNames(t, dir); strings.Contains(strings.Join(names, " "), "jsonl") {
		t.Errorf("a failed backup left %v", names)
	}
}

// Ensure that holon restore and verify fail with exit 1 and a clear message
// on a truncated, corrupted or altered copy, and on a non-empty target,
// leaving the target as it was.
func TestRestoreVerify_Failures(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "holon.db")
	g := startGateway(t, db)
	g.call("alice/sandbox", "holon-labs/company-lookup", map[string]any{"name": "acme corp"})
	g.stop()
	good := filepath.Join(dir, "good.jsonl")
	if code, _, stderr := run(t, "backup", "--db", db, "--out", good); code != 0 {
		t.Fatal(stderr)
	}
	b, _ := os.ReadFile(good)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o600)
		return p
	}
	truncated := write("truncated.jsonl", b[:len(b)-100])
	corrupted := write("corrupted.jsonl", bytes.Replace(b, []byte(`"balance":"4.92"`), []byte(`"balance":"9.92"`), 1))
	version := write("version.jsonl", bytes.Replace(b, []byte(`"version":1`), []byte(`"version":2`), 1))
	for _, tt := range []struct{ in, msg string }{
		{truncated, "backup is truncated"},
		{corrupted, "backup is corrupted: the checksum"},
		{version, "format version 2, this gateway reads version 1"},
	} {
		target := filepath.Join(dir, "new.db")
		code, _, stderr := run(t, "restore", "--in", tt.in, "--db", target)
		if code != 1 || !strings.Contains(stderr, tt.msg) || !strings.Contains(stderr, "nothing was written") {
			t.Errorf("restore %s: exit %d: %s", filepath.Base(tt.in), code, stderr)
		}
		if _, err := os.Stat(target); err == nil {
			t.Errorf("restore %s left %s", filepath.Base(tt.in), target)
		}
		if code, _, stderr := run(t, "verify", "--in", tt.in); code != 1 || !strings.Contains(stderr, tt.msg) {
			t.Errorf("verify %s: exit %d: %s", filepath.Base(tt.in), code, stderr)
		}
	}
	before, _ := os.ReadFile(db)
	code, _, stderr := run(t, "restore", "--in", good, "--db", db)
	if code != 1 || !strings.Contains(stderr, "target database is not empty") {
		t.Errorf("non-empty target: exit %d: %s", code, stderr)
	}
	if after, _ := os.ReadFile(db); !bytes.Equal(before, after) {
		t.Error("a refused restore changed the target")
	}
	if names := dirNames(t, dir); strings.Contains(strings.Join(names, " "), "restore-") {
		t.Errorf("temporary files left: %v", names)
	}

	// A balance edited in the copy, its checksum recomputed: verify fails.
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	body := strings.Join(lines[:len(lines)-1], "\n") + "\n"
	body = strings.Replace(body, `"balance":"4.92"`, `"balance":"9.92"`, 1)
	resealed := write("edited.jsonl", []byte(body+trailer(body, len(lines)-2)))
	code, stdout, _ := run(t, "verify", "--in", resealed)
	if code != 1 || !strings.Contains(stdout, "FAIL  balances") || !strings.Contains(stdout, "account alice: balance 9.92, its journal lines sum to 4.92") {
		t.Errorf("verify of an edited balance: exit %d:\n%s", code, stdout)
	}
}

// trailer is the trailer that seals body, as someone covering an edit
// would write it.
func trailer(body string, rows int) string {
	sum := sha256.Sum256([]byte(body))
	return fmt.Sprintf(`{"end":{"rows":%d,"sha256":"%s"}}`+"\n", rows, hex.EncodeToString(sum[:]))
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// Ensure that holon backup takes the gateway from HOLON_URL when neither
// --db nor --url is given, as the other client subcommands do.
func TestBackup_HolonURL(t *testing.T) {
	dir := t.TempDir()
	g := startGateway(t, filepath.Join(dir, "holon.db"))
	out := filepath.Join(dir, "b.jsonl")
	var errb bytes.Buffer
	m := &Main{Stdout: io.Discard, Stderr: &errb, Getenv: func(k string) string {
		switch k {
		case "HOLON_URL":
			return g.srv.URL
		case "HOLON_KEY":
			return adminKey
		}
		return ""
	}}
	if code := m.Run(context.Background(), []string{"backup", "--out", out}); code != 0 {
		t.Fatalf("holon backup with HOLON_URL: exit %d: %s", code, errb.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`{"end":`)) {
		t.Errorf("the backup has no trailer: %d bytes", len(b))
	}
}
