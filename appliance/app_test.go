package appliance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/backup"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

var update = flag.Bool("update", false, "rewrite golden files")

// testApp is an appliance served on loopback.
type testApp struct {
	t   *testing.T
	app *appliance.App
	srv *httptest.Server
}

// fixedClock is a clock that only moves when told to.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// newTestApp opens an appliance on a fresh store with the shipped and demo
// agents, serves it on loopback, and on cleanup checks the money: the
// journal verifies (entries sum to zero, balances are sums of lines, the
// chain is intact), no hold is left, nothing is reserved or held.
func newTestApp(t *testing.T, mandatesDir string, now func() time.Time) *testApp {
	t.Helper()
	cfg := appliance.Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler,
		DB:           filepath.Join(t.TempDir(), "holon.db"),
		Registry:     []string{"agents", "examples"},
		MandatesDir:  mandatesDir,
		SignupCredit: journal.MustParseAmount("5.00"),
		Now:          now,
	}
	app, err := appliance.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app.Handler())
	ta := &testApp{t: t, app: app, srv: srv}
	t.Cleanup(func() {
		srv.Close()
		storetest.CheckMoney(t, app.Engine().Store())
		if err := app.Close(); err != nil {
			t.Error(err)
		}
	})
	return ta
}

func (ta *testApp) do(method, path string, body any) (int, map[string]any) {
	ta.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			ta.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, ta.srv.URL+path, rd)
	if err != nil {
		ta.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ta.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		ta.t.Fatalf("%s %s: decode: %v", method, path, err)
	}
	return resp.StatusCode, out
}

// golden compares v, as indented JSON, with testdata/golden/<name>.json.
func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("..", "testdata", "golden", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./appliance -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

const blogInvoice = "ACME Corp\nWidgets, 2, 10.00\nGadgets, 1, 25.50\nShipping, 1, 5.00"

// Ensure that the blog's delegated run replays exactly through HTTP: a
// three-line invoice under alice/bookkeeping-q4 is held for approval (worst
// case 3.10 > 1.00), and once approved bills 0.192 EUR (own 0.10,
// downstream 0.092, splits holon 0.01 and holon-labs 0.09), with every
// receipt field of the tree as in the golden files.
func TestBlogRun(t *testing.T) {
	clock := &fixedClock{now: time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)}
	ta := newTestApp(t, "", clock.Now)

	status, held := ta.do("POST", "/v0/calls", map[string]any{
		"mandate": "alice/bookkeeping-q4",
		"agent":   "holon-labs/invoice-pipeline",
		"input":   map[string]any{"text": blogInvoice},
	})
	if status != http.StatusAccepted {
		t.Fatalf("POST /v0/calls: status %d, want 202: %v", status, held)
	}
	golden(t, "blog-held", held)
	approval := held["approval"].(map[string]any)["id"].(string)

	status, ran := ta.do("POST", "/v0/approvals/"+approval, map[string]any{})
	if status != http.StatusOK {
		t.Fatalf("approve: status %d, want 200: %v", status, ran)
	}
	golden(t, "blog-approved", ran)
	root := ran["receipt"].(map[string]any)
	cost := root["cost"].(map[string]any)
	if cost["own"] != "0.10" || cost["downstream"] != "0.092" || cost["total"] != "0.192" {
		t.Errorf("cost %v, want own 0.10, downstream 0.092, total 0.192", cost)
	}

	status, tree := ta.do("GET", "/v0/receipts/"+root["id"].(string), nil)
	if status != http.StatusOK {
		t.Fatalf("GET receipt tree: %d", status)
	}
	golden(t, "blog-tree", tree)

	status, accounts := ta.do("GET", "/v0/accounts", nil)
	if status != http.StatusOK {
		t.Fatalf("GET accounts: %d", status)
	}
	golden(t, "blog-accounts", accounts)

	status, mandate := ta.do("GET", "/v0/mandates/alice/bookkeeping-q4", nil)
	if status != http.StatusOK {
		t.Fatalf("GET mandate: %d", status)
	}
	if mandate["spent"] != "0.192" || mandate["reserved"] != "0.00" || mandate["remaining"] != "49.808" {
		t.Errorf("mandate budget spent %v reserved %v remaining %v, want 0.192, 0.00, 49.808",
			mandate["spent"], mandate["reserved"], mandate["remaining"])
	}

	// The receipts agree with the journal, entry by entry.
	err := ta.app.Engine().Store().View(func(tx holon.Tx) error {
		for _, id := range []string{"r2", "r3", "r4"} {
			r, err := tx.Receipt(id)
			if err != nil {
				return err
			}
			row, err := tx.EntryByKey("settle:" + id)
			if err != nil {
				return fmt.Errorf("settle:%s: %w", id, err)
			}
			want := map[string]journal.Amount{r.Payer: -r.Cost.Own}
			for _, s := range r.Splits {
				want[s.To] += s.Amount
			}
			if len(row.Lines) != len(want) {
				return fmt.Errorf("settle:%s has %d lines, receipt implies %d", id, len(row.Lines), len(want))
			}
			for _, l := range row.Lines {
				if want[l.Account] != l.Amount {
					return fmt.Errorf("settle:%s: %s %s, receipt implies %s", id, l.Account, l.Amount, want[l.Account])
				}
			}
		}
		if _, err := tx.EntryByKey("settle:r1"); err == nil {
			return fmt.Errorf("the held call r1 has a settlement")
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}

	// The approval is used once, and its input is gone.
	status, again := ta.do("POST", "/v0/approvals/"+approval, map[string]any{})
	if status != http.StatusConflict {
		t.Errorf("second approve: status %d, want 409: %v", status, again)
	}
	status, ap := ta.do("GET", "/v0/approvals/"+approval, nil)
	if status != http.StatusOK || ap["status"] != "used" || ap["input"] != nil {
		t.Errorf("approval after use: %d %v, want status used and no input", status, ap)
	}
}

// Ensure that 200 concurrent calls against a mandate whose budget fits only
// some of them never overrun it: spent plus reserved stays within the total
// at every moment sampled, exactly floor(budget/price) succeed, the rest are
// denied over_budget, and every call has a receipt.
func TestConcurrentBudget(t *testing.T) {
	dir := t.TempDir()
	const mandate = `
id: carol/lookups
issuer: carol
grantee: carol/bot
currency: EUR
budget: { total: "1.00" }
allow: { agents: ["holon-labs/company-lookup"] }
`
	if err := os.WriteFile(filepath.Join(dir, "lookups.yaml"), []byte(mandate), 0o644); err != nil {
		t.Fatal(err)
	}
	ta := newTestApp(t, dir, nil)

	const calls = 200
	var wg sync.WaitGroup
	codes := make(chan int, calls)
	done := make(chan struct{})
	var samples int
	var overrun []string
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			st, err := ta.app.Engine().Mandate("carol/lookups")
			if err != nil {
				overrun = append(overrun, err.Error())
				return
			}
			samples++
			if st.Spent+st.Reserved > st.Mandate.Total() {
				overrun = append(overrun, fmt.Sprintf("spent %s + reserved %s > %s", st.Spent, st.Reserved, st.Mandate.Total()))
			}
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := json.Marshal(map[string]any{
				"mandate": "carol/lookups", "agent": "holon-labs/company-lookup",
				"input": map[string]any{"name": "Globex GmbH"},
			})
			resp, err := http.Post(ta.srv.URL+"/v0/calls", "application/json", bytes.NewReader(b))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(done)
	sampler.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	// 1.00 / 0.08 = 12.5: twelve fit.
	if count[200] != 12 || count[403] != calls-12 {
		t.Errorf("status counts %v, want 12 × 200 and %d × 403", count, calls-12)
	}
	if len(overrun) > 0 {
		t.Errorf("budget overrun seen %d times in %d samples, first: %s", len(overrun), samples, overrun[0])
	}
	st, err := ta.app.Engine().Mandate("carol/lookups")
	if err != nil {
		t.Fatal(err)
	}
	if st.Spent.String() != "0.96" || st.Reserved != 0 {
		t.Errorf("spent %s reserved %s, want 0.96 and 0", st.Spent, st.Reserved)
	}
	page, err := ta.app.Engine().Receipts("carol/lookups", "", 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Receipts) != calls {
		t.Errorf("%d receipts for %d calls", len(page.Receipts), calls)
	}
	denied := 0
	for _, r := range page.Receipts {
		if r.Status == "denied" {
			denied++
			if r.Error == nil || *r.Error != "over_budget" {
				t.Errorf("receipt %s denied with %v, want over_budget", r.ID, r.Error)
			}
		}
	}
	if denied != calls-12 {
		t.Errorf("%d denied receipts, want %d", denied, calls-12)
	}
}
