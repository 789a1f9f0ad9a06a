package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// This file holds what the engine tests share: an engine on a real store
// whose money is checked at cleanup. The test agents and their handlers are
// in engine_agents_test.go.

// testEngine is an Engine on a store in a temporary directory, with the
// registry and the dev runtime it was built from.
type testEngine struct {
	eng     *gateway.Engine
	store   holon.Store
	kv      *kv.Store // the same store, for its writer's statistics
	path    string
	reg     *gateway.Registry
	dev     *gateway.DevRuntime
	runners map[string]gateway.Runner
	credit  journal.Amount
	clock   *testClock

	mu   sync.Mutex
	runs map[string]int // handler name → times it was invoked
	// foreign are settle:<receipt> journal keys a test wrote itself (fault
	// injection): they are not settlements.
	foreign map[string]bool
}

// engineConfig is what openEngine builds an engine from.
type engineConfig struct {
	manifests []string
	handlers  map[string]gateway.DevHandler
	mandates  []string
	// credit is the signup credit (100.00 when empty).
	credit string
	// clock drives the engine's time; the real clock when nil.
	clock *testClock
	// noSync opens the store without fsync (benchmarks of the CPU path).
	noSync bool
}

// newEngine opens an engine with the given agents (YAML manifests), dev
// handlers (by handler name) and root mandates (YAML). Every issuer gets
// 100.00 of signup credit. At cleanup it checks the money (checkMoney) and
// closes the store.
func newEngine(tb testing.TB, manifests []string, handlers map[string]gateway.DevHandler, mandates ...string) *testEngine {
	tb.Helper()
	return openEngine(tb, engineConfig{manifests: manifests, handlers: handlers, mandates: mandates})
}

// openEngine is newEngine with every option.
func openEngine(tb testing.TB, cfg engineConfig) *testEngine {
	tb.Helper()
	te := &testEngine{
		path:    filepath.Join(tb.TempDir(), "holon.db"),
		reg:     gateway.NewRegistry(),
		dev:     gateway.NewDevRuntime(),
		clock:   cfg.clock,
		runs:    map[string]int{},
		foreign: map[string]bool{},
		credit:  journal.MustParseAmount("100.00"),
	}
	if cfg.credit != "" {
		te.credit = journal.MustParseAmount(cfg.credit)
	}
	te.runners = map[string]gateway.Runner{contract.RuntimeDev: te.dev}
	var ms []*contract.Manifest
	for _, doc := range cfg.manifests {
		m, err := contract.ParseManifest([]byte(doc))
		if err != nil {
			tb.Fatalf("manifest: %v\n%s", err, doc)
		}
		ms = append(ms, m)
	}
	if err := te.reg.AddAll(ms, contract.AgentFacts{}, true); err != nil {
		tb.Fatalf("registry: %v", err)
	}
	for name, h := range cfg.handlers {
		te.dev.Register(name, func(ctx context.Context, in json.RawMessage, c *gateway.Ctx) (any, error) {
			te.mu.Lock()
			te.runs[name]++
			te.mu.Unlock()
			return h(ctx, in, c)
		})
	}
	s, err := kv.Open(te.path, kv.Options{NoSync: cfg.noSync})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	te.kv, te.store = s, s.Holon()
	te.eng = te.newEngineOn(te.store)
	tb.Cleanup(func() {
		s := te.store // the last one opened, after a restart
		te.checkMoney(tb, s)
		if err := s.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	for _, doc := range cfg.mandates {
		te.putMandate(tb, doc)
	}
	return te
}

// restart simulates a crash and a new start on the same file: the store is
// closed under the engine (updates already submitted are committed, calls in
// flight keep their holds, every later write of the old engine fails), then
// reopened under a new engine, which te uses from then on. The old engine is
// returned for the calls still running on it.
func (te *testEngine) restart(tb testing.TB) (old *gateway.Engine) {
	tb.Helper()
	if err := te.store.Close(); err != nil {
		tb.Fatalf("close: %v", err)
	}
	s, err := kv.Open(te.path, kv.Options{})
	if err != nil {
		tb.Fatalf("reopen: %v", err)
	}
	te.kv, te.store = s, s.Holon()
	old, te.eng = te.eng, te.newEngineOn(te.store)
	return old
}

// newEngineOn builds an engine like te's on another store (a restart).
func (te *testEngine) newEngineOn(s holon.Store) *gateway.Engine {
	cfg := gateway.Config{Store: s, Registry: te.reg, Runners: te.runners, SignupCredit: te.credit}
	if te.clock != nil {
		cfg.Now = te.clock.Now
	}
	return gateway.New(cfg)
}

// putMandate parses a mandate and stores it.
func (te *testEngine) putMandate(tb testing.TB, doc string) *contract.Mandate {
	tb.Helper()
	m, err := contract.ParseMandate([]byte(doc))
	if err != nil {
		tb.Fatalf("mandate: %v\n%s", err, doc)
	}
	if err := te.eng.PutMandate(context.Background(), m); err != nil {
		tb.Fatalf("PutMandate %s: %v", m.ID, err)
	}
	return m
}

// ran is how many times the handler name was invoked.
func (te *testEngine) ran(name string) int {
	te.mu.Lock()
	defer te.mu.Unlock()
	return te.runs[name]
}

// call runs a call and fails the test when the engine returns an error.
func (te *testEngine) call(tb testing.TB, in gateway.CallInput) *gateway.CallResult {
	tb.Helper()
	res, err := te.eng.Call(context.Background(), in)
	if err != nil {
		tb.Fatalf("Call(%s %s%s): %v", in.Mandate, in.Agent, in.Capability, err)
	}
	if res.Receipt == nil {
		tb.Fatalf("Call(%s %s%s): no receipt", in.Mandate, in.Agent, in.Capability)
	}
	return res
}

// mandate reads a mandate's budget state.
func (te *testEngine) mandate(tb testing.TB, id string) *gateway.MandateState {
	tb.Helper()
	st, err := te.eng.Mandate(id)
	if err != nil {
		tb.Fatalf("Mandate(%s): %v", id, err)
	}
	return st
}

// account reads an account's balance and holds.
func (te *testEngine) account(tb testing.TB, name string) holon.Account {
	tb.Helper()
	accts, err := te.eng.Accounts()
	if err != nil {
		tb.Fatalf("Accounts: %v", err)
	}
	return accts[name]
}

// receipt reads a stored receipt.
func (te *testEngine) receipt(tb testing.TB, id string) *holon.Receipt {
	tb.Helper()
	r, err := te.eng.Receipt(id)
	if err != nil {
		tb.Fatalf("Receipt(%s): %v", id, err)
	}
	return r
}

// approval reads an approval.
func (te *testEngine) approval(tb testing.TB, id string) *holon.Approval {
	tb.Helper()
	ap, err := te.eng.Approval(context.Background(), id)
	if err != nil {
		tb.Fatalf("Approval(%s): %v", id, err)
	}
	return ap
}

// holds lists the calls in flight.
func (te *testEngine) holds(tb testing.TB) []*holon.Hold {
	tb.Helper()
	var hs []*holon.Hold
	if err := te.store.View(func(tx holon.Tx) error {
		var err error
		hs, err = tx.Holds()
		return err
	}); err != nil {
		tb.Fatalf("holds: %v", err)
	}
	return hs
}

// entry reads the journal row with this key; ok is false when there is none.
func (te *testEngine) entry(tb testing.TB, key string) (holon.JournalRow, bool) {
	tb.Helper()
	var row holon.JournalRow
	err := te.store.View(func(tx holon.Tx) error {
		var err error
		row, err = tx.EntryByKey(key)
		return err
	})
	if errors.Is(err, holon.ErrNotFound) {
		return row, false
	}
	if err != nil {
		tb.Fatalf("EntryByKey(%s): %v", key, err)
	}
	return row, true
}

// checkMoney checks a store's money at the end of a test
// (storetest.CheckMoney), leaving aside the settle:<receipt> keys the test
// journaled itself.
func (te *testEngine) checkMoney(tb testing.TB, s holon.Store) {
	tb.Helper()
	var foreign []string
	for k := range te.foreign {
		foreign = append(foreign, k)
	}
	storetest.CheckMoney(tb, s, storetest.Foreign(foreign...))
	checkWindows(tb, s)
}

// checkWindows checks the budget windows of every mandate that renews by
// window: each window's spent is the sum of the totals of the receipts
// created in it (the window a call is reserved in pays for it), and
// nothing is reserved in it any more.
func checkWindows(tb testing.TB, s holon.Store) {
	tb.Helper()
	err := s.View(func(tx holon.Tx) error {
		mandates := map[string]*contract.Mandate{}
		err := tx.ForEachMandate(func(id string, d holon.Doc) error {
			m, err := contract.ParseStoredMandate(d.Doc)
			if err == nil && m.Windowed() {
				mandates[id] = m
			}
			return err
		})
		if err != nil || len(mandates) == 0 {
			return err
		}
		type key struct{ mandate, window string }
		spent := map[key]journal.Amount{}
		all, err := storetest.AllReceipts(tx)
		if err != nil {
			return err
		}
		byID := map[string]*holon.Receipt{}
		for _, r := range all {
			byID[r.ID] = r
		}
		add := func(r *holon.Receipt, a journal.Amount) {
			if m := mandates[r.Mandate]; m != nil {
				w, _ := m.WindowAt(r.Created)
				spent[key{r.Mandate, w.Key}] += a
			}
		}
		for _, r := range all {
			add(r, r.Cost.Total)
			// A refund comes off the window that paid, and off each
			// same-payer parent's.
			rs, err := holon.Refunds(tx, r.ID)
			if err != nil {
				return err
			}
			back := holon.Refunded(rs)
			for cur := r; back > 0 && cur != nil; {
				add(cur, -back)
				if cur.Parent == nil || byID[*cur.Parent] == nil || byID[*cur.Parent].Payer != cur.Payer {
					break
				}
				cur = byID[*cur.Parent]
			}
		}
		for k, want := range spent {
			b, err := tx.WindowBudget(k.mandate, k.window)
			if err != nil {
				return err
			}
			if b.Spent != want || b.Reserved != 0 {
				tb.Errorf("mandate %s, window %s: spent %s reserved %s; its receipts' totals sum to %s", k.mandate, k.window, b.Spent, b.Reserved, want)
			}
		}
		return nil
	})
	if err != nil {
		tb.Errorf("check windows: %v", err)
	}
}

func lineMap(lines []journal.Line) map[string]journal.Amount {
	m := map[string]journal.Amount{}
	for _, l := range lines {
		m[l.Account] += l.Amount
	}
	return m
}

// testClock is a clock a test moves by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock {
	return &testClock{t: time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)}
}

// Now is the clock's time.
func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// eur parses an amount (any currency, despite the name: most tests are in EUR).
func eur(s string) journal.Amount { return journal.MustParseAmount(s) }

// eurPtr is eur for optional amounts: nil for "".
func eurPtr(s string) *journal.Amount {
	if s == "" {
		return nil
	}
	a := eur(s)
	return &a
}

// errCode is a receipt's error code, "" when it has none.
func errCode(r *holon.Receipt) string {
	if r.Error == nil {
		return ""
	}
	return *r.Error
}

// wantReceipt checks a receipt's status, error code, billing and own cost.
func wantReceipt(tb testing.TB, r *holon.Receipt, status, code string, billed bool, own string) {
	tb.Helper()
	if r.Status != status || errCode(r) != code {
		tb.Errorf("%s: status %s/%s, want %s/%s", r.ID, r.Status, errCode(r), status, code)
	}
	if r.Billed != billed {
		tb.Errorf("%s: billed %v, want %v", r.ID, r.Billed, billed)
	}
	if want := eur(own); r.Cost.Own != want {
		tb.Errorf("%s: cost.own %s, want %s", r.ID, r.Cost.Own, want)
	}
}

// wait receives from ch, or fails the test after a while.
func wait[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		tb.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// Ensure that the engine helper's own checks can fail: a receipt that says
// billed with no journal entry behind it, and a hold left behind, are
// reported.
func TestEngineHelper_ChecksMoney(t *testing.T) {
	te := newEngine(t, []string{agentEcho}, testHandlers(), mainMandate)
	res := te.call(t, gateway.CallInput{Mandate: "alice/main", Agent: "acme/echo"})
	wantReceipt(t, res.Receipt, holon.StatusSucceeded, "", true, "0.10")

	lie := *res.Receipt
	lie.ID, lie.Cost = "r99", holon.Cost{Own: eur("0.50"), Total: eur("0.50")}
	lie.Splits = []journal.Share{{To: "acme", Amount: eur("0.50")}}
	if err := te.store.Update(context.Background(), func(tx holon.Tx) error {
		if err := tx.PutReceipt(&lie); err != nil {
			return err
		}
		return tx.PutHold(&holon.Hold{Receipt: "r98", Payer: "alice", Mandate: "alice/main"})
	}); err != nil {
		t.Fatal(err)
	}
	rec := &storetest.Recorder{TB: t}
	te.checkMoney(rec, te.store)
	for _, want := range []string{"hold left for r98", "r99: billed 0.50 but no settle:r99 entry", "spent 0.10, its receipts' totals sum to 0.60"} {
		if !rec.Saw(want) {
			t.Errorf("the check did not report %q; it reported %q", want, rec.Errs)
		}
	}
	// Undo the lie, so that the real check at cleanup passes.
	if err := te.store.Update(context.Background(), func(tx holon.Tx) error {
		lie.Billed, lie.Cost, lie.Splits, lie.Status = false, holon.Cost{}, []journal.Share{}, holon.StatusDenied
		if err := tx.PutReceipt(&lie); err != nil {
			return err
		}
		return tx.DeleteHold("r98")
	}); err != nil {
		t.Fatal(err)
	}
}
