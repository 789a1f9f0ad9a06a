package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

func init() {
	add(
		behaviour{"Counters/NeverBelowZero", testCountersNeverBelowZero},
		behaviour{"Budgets/NeverBelowZero", testBudgetsNeverBelowZero},
		behaviour{"Budgets/Windows", testBudgetWindows},
		behaviour{"Budgets/WithinTheirLimit", testBudgetWithinLimit},
		behaviour{"Holds/PutReadDeleteList", testHolds},
		behaviour{"Held/NeverBelowZero", testHeldNeverBelowZero},
		behaviour{"Held/NoOverdraft", testNoOverdraft},
		behaviour{"Idempotency/EntryAndDocumentOnce", testIdempotencyOnce},
		behaviour{"Idempotency/FailedUpdateLeavesNeither", testIdempotencyFailed},
		behaviour{"Mandates/RevisionChangesWithTheMandate", testMandateRevision},
		behaviour{"Registry/MandatesAndAgents", testRegistry},
		behaviour{"Earnings/AddUpPerVersion", testEarnings},
		behaviour{"Tx/SeesItsOwnWrites", testSeesOwnWrites},
	)
}

// Ensure that counters start at zero, move by their deltas, and refuse to
// go below zero, keeping their value.
func testCountersNeverBelowZero(t *testing.T, e *env) {
	e.update(func(tx holon.Tx) error {
		if n := tx.Counter("c"); n != 0 {
			t.Errorf("a new counter is %d, want 0", n)
		}
		for _, tt := range []struct {
			delta int64
			want  uint64
			fails bool
		}{{3, 3, false}, {-1, 2, false}, {-3, 2, true}, {-2, 0, false}, {-1, 0, true}} {
			n, err := tx.AddCounter("c", tt.delta)
			if (err != nil) != tt.fails || (err == nil && n != tt.want) {
				t.Errorf("AddCounter(c, %d) = %d, %v; want %d (fails: %v)", tt.delta, n, err, tt.want, tt.fails)
			}
			if got := tx.Counter("c"); got != tt.want {
				t.Errorf("after AddCounter(c, %d): %d, want %d", tt.delta, got, tt.want)
			}
		}
		_, err := tx.AddCounter("c", 5)
		return err
	})
	if n := e.counter("c"); n != 5 {
		t.Errorf("c = %d after the commit, want 5", n)
	}
}

// Ensure that a budget's spent and reserved amounts move by their deltas
// and neither goes below zero: a move that would is refused and changes
// nothing.
func testBudgetsNeverBelowZero(t *testing.T, e *env) {
	e.update(func(tx holon.Tx) error {
		if b, err := tx.Budget("m"); err != nil || b != (holon.Budget{}) {
			t.Errorf("a budget never moved: %+v, %v; want zero", b, err)
		}
		if err := tx.AddBudget("m", 0, amt("1.00")); err != nil {
			return err
		}
		if err := tx.AddBudget("m", amt("0.40"), -amt("0.50")); err != nil {
			return err
		}
		for _, move := range [][2]journal.Amount{{0, -amt("0.51")}, {-amt("0.41"), 0}, {-amt("1.00"), amt("1.00")}, {amt("1.00"), -amt("1.00")}} {
			if err := tx.AddBudget("m", move[0], move[1]); err == nil {
				t.Errorf("AddBudget(m, %s, %s) below zero: no error", move[0], move[1])
			}
		}
		return nil
	})
	e.view(func(tx holon.Tx) error {
		if b, err := tx.Budget("m"); err != nil || b != (holon.Budget{Spent: amt("0.40"), Reserved: amt("0.50")}) {
			t.Errorf("budget = %+v, %v; want spent 0.40, reserved 0.50", b, err)
		}
		return nil
	})
}

// Ensure that holds are written, read, listed and deleted by receipt.
func testHolds(t *testing.T, e *env) {
	e.update(func(tx holon.Tx) error {
		for _, r := range []string{"r3", "r1", "r2"} {
			if err := tx.PutHold(&holon.Hold{Receipt: r, Payer: "bob", Mandate: "bob/m", Amount: amt("0.10"), Reserved: amt("0.10"), Children: []string{r + "c"}}); err != nil {
				return err
			}
		}
		return nil
	})
	e.update(func(tx holon.Tx) error {
		h, err := tx.Hold("r2")
		if err != nil {
			return err
		}
		h.Downstream = amt("0.05") // a hold is rewritten as its call runs
		if err := tx.PutHold(h); err != nil {
			return err
		}
		return tx.DeleteHold("r1")
	})
	e.view(func(tx holon.Tx) error {
		h, err := tx.Hold("r2")
		if err != nil || h.Payer != "bob" || h.Amount != amt("0.10") || h.Downstream != amt("0.05") || fmt.Sprint(h.Children) != "[r2c]" {
			t.Errorf("Hold(r2) = %+v, %v", h, err)
		}
		if _, err := tx.Hold("r1"); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("Hold(r1) after DeleteHold: %v, want ErrNotFound", err)
		}
		hs, err := tx.Holds()
		if err != nil {
			return err
		}
		got := map[string]bool{}
		for _, h := range hs {
			got[h.Receipt] = true
		}
		if len(hs) != 2 || !got["r2"] || !got["r3"] {
			t.Errorf("Holds = %v, want r2 and r3", hs)
		}
		return nil
	})
	e.update(func(tx holon.Tx) error {
		if err := tx.DeleteHold("r2"); err != nil {
			return err
		}
		return tx.DeleteHold("r3")
	})
	e.view(func(tx holon.Tx) error {
		if hs, err := tx.Holds(); err != nil || len(hs) != 0 {
			t.Errorf("Holds after every DeleteHold = %v, %v; want none", hs, err)
		}
		return nil
	})
}

// Ensure that what is held on an account moves by its deltas and never
// goes below zero: a release of more than is held is refused and changes
// nothing.
func testHeldNeverBelowZero(t *testing.T, e *env) {
	e.credit("signup:bob", "bob", "5.00")
	e.update(func(tx holon.Tx) error {
		if err := tx.AddHeld("bob", amt("0.30")); err != nil {
			return err
		}
		if err := tx.AddHeld("bob", -amt("0.10")); err != nil {
			return err
		}
		if err := tx.AddHeld("bob", -amt("0.21")); err == nil {
			t.Error("releasing 0.21 of 0.20 held: no error")
		}
		if err := tx.AddHeld("eve", -amt("0.01")); err == nil {
			t.Error("releasing from an account holding nothing: no error")
		}
		return nil
	})
	if a := e.account("bob"); a != (holon.Account{Balance: amt("5.00"), Held: amt("0.20")}) {
		t.Errorf("bob = %+v, want balance 5.00, held 0.20", a)
	}
	if a := e.account("bob"); a.Available() != amt("4.80") {
		t.Errorf("bob has %s available, want 4.80", a.Available())
	}
	e.update(func(tx holon.Tx) error { return tx.AddHeld("bob", -amt("0.20")) })
	if a := e.account("bob"); a.Held != 0 {
		t.Errorf("bob holds %s after releasing all, want 0", a.Held)
	}
}

// idemRecord is the document an idempotent operation leaves beside its
// entry, as the hosted product's Idempotency-Key records.
type idemRecord struct {
	Entry string `json:"entry"`
	By    int    `json:"by"`
}

// errDone is the answer of an operation that finds itself already done.
var errDone = errors.New("storetest: already done")

// Ensure that check-then-write idempotency, as the engine and the hosted
// product do it (HasEntry, then AppendEntry and a document under the same
// key in the same transaction), runs once among concurrent updates: one
// writes both, every other sees them and writes nothing.
func testIdempotencyOnce(t *testing.T, e *env) {
	const n = 40
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.s.Update(bg, func(tx holon.Tx) error {
				var rec idemRecord
				if tx.HasEntry("topup:k1") {
					if err := tx.Get(holon.BucketIdempotency, "k1", &rec); err != nil {
						return fmt.Errorf("the entry is journaled but its document reads %w", err)
					}
					return errDone
				}
				if _, err := tx.AppendEntry(transfer(t, "topup:k1", "external:stripe", "bob", "1.00")); err != nil {
					return err
				}
				return tx.Put(holon.BucketIdempotency, "k1", idemRecord{Entry: "topup:k1", By: i})
			})
		}()
	}
	wg.Wait()
	var winner []int
	for i, err := range errs {
		switch {
		case err == nil:
			winner = append(winner, i)
		case !errors.Is(err, errDone) && !errors.Is(err, holon.ErrDuplicateKey):
			t.Errorf("update %d: %v", i, err)
		}
	}
	if len(winner) != 1 {
		t.Fatalf("updates %v did the operation, want exactly one", winner)
	}
	e.view(func(tx holon.Tx) error {
		var rec idemRecord
		if err := tx.Get(holon.BucketIdempotency, "k1", &rec); err != nil || rec != (idemRecord{"topup:k1", winner[0]}) {
			t.Errorf("the document reads %+v, %v; want the winner's (%d)", rec, err, winner[0])
		}
		row, err := tx.EntryByKey("topup:k1")
		if err != nil || row.Seq != 1 {
			t.Errorf("EntryByKey(topup:k1) = %+v, %v", row, err)
		}
		return nil
	})
	if a := e.account("bob"); a.Balance != amt("1.00") {
		t.Errorf("bob = %s, want 1.00 (once)", a.Balance)
	}
}

// Ensure that an update writing an entry and its idempotency document that
// then fails leaves neither, so that a retry finds the key unused.
func testIdempotencyFailed(t *testing.T, e *env) {
	err := e.s.Update(bg, func(tx holon.Tx) error {
		if _, err := tx.AppendEntry(transfer(t, "topup:k2", "external:stripe", "bob", "1.00")); err != nil {
			return err
		}
		if err := tx.Put(holon.BucketIdempotency, "k2", idemRecord{Entry: "topup:k2"}); err != nil {
			return err
		}
		return refused(0)
	})
	if !errors.Is(err, errRefused) {
		t.Fatalf("the failing update: %v", err)
	}
	e.view(func(tx holon.Tx) error {
		var rec idemRecord
		if tx.HasEntry("topup:k2") || !errors.Is(tx.Get(holon.BucketIdempotency, "k2", &rec), holon.ErrNotFound) {
			t.Error("a failed update left its entry or its idempotency document")
		}
		return nil
	})
	e.update(func(tx holon.Tx) error {
		if _, err := tx.AppendEntry(transfer(t, "topup:k2", "external:stripe", "bob", "1.00")); err != nil {
			return fmt.Errorf("the retry: %w", err)
		}
		return tx.Put(holon.BucketIdempotency, "k2", idemRecord{Entry: "topup:k2"})
	})
}

// Ensure that a mandate's revision is nil while there is none, equal in two
// transactions when the mandate did not change in between (a rewrite of
// another mandate included), and different once it changed.
func testMandateRevision(t *testing.T, e *env) {
	rev := func(id string) []byte {
		var r []byte
		e.view(func(tx holon.Tx) error {
			if v := tx.MandateRevision(id); v != nil {
				r = bytes.Clone(v)
			}
			return nil
		})
		return r
	}
	put := func(id, doc string) {
		e.update(func(tx holon.Tx) error { return tx.PutMandate(id, holon.Doc{Doc: json.RawMessage(doc)}) })
	}
	if r := rev("alice/main"); r != nil {
		t.Errorf("revision of a mandate never stored: %q, want nil", r)
	}
	put("alice/main", `{"v":1}`)
	r1 := rev("alice/main")
	if r1 == nil {
		t.Fatal("revision of a stored mandate is nil")
	}
	put("bob/main", `{"v":1}`)
	e.credit("signup:alice", "alice", "1.00")
	if r := rev("alice/main"); !bytes.Equal(r, r1) {
		t.Errorf("revision changed (%q → %q) though the mandate did not", r1, r)
	}
	put("alice/main", `{"v":2}`)
	r2 := rev("alice/main")
	if bytes.Equal(r2, r1) {
		t.Errorf("revision %q unchanged after the mandate changed", r2)
	}
	e.update(func(tx holon.Tx) error {
		d, err := tx.Mandate("alice/main")
		if err != nil {
			return err
		}
		d.Revoked = true
		return tx.PutMandate("alice/main", d)
	})
	if r := rev("alice/main"); bytes.Equal(r, r2) {
		t.Errorf("revision %q unchanged after the mandate was revoked", r)
	}
	e.reopen()
	if r, r3 := rev("alice/main"), rev("alice/main"); !bytes.Equal(r, r3) {
		t.Errorf("two reads of an unchanged mandate: %q and %q", r, r3)
	}
}

// Ensure that mandates and agent versions read back as stored, list in id
// order, and that a missing one is ErrNotFound.
func testRegistry(t *testing.T, e *env) {
	e.update(func(tx holon.Tx) error {
		for _, id := range []string{"bob/main", "alice/main", "alice/b"} {
			if err := tx.PutMandate(id, holon.Doc{Doc: json.RawMessage(`{"id":"` + id + `"}`)}); err != nil {
				return err
			}
		}
		for _, ref := range []string{"acme/x@1.1.0", "acme/x@1.0.0"} {
			if err := tx.PutAgent(ref, holon.Doc{Doc: json.RawMessage(`{"ref":"` + ref + `"}`), Published: true}); err != nil {
				return err
			}
		}
		return nil
	})
	e.view(func(tx holon.Tx) error {
		if d, err := tx.Mandate("alice/b"); err != nil || string(d.Doc) != `{"id":"alice/b"}` {
			t.Errorf("Mandate(alice/b) = %s, %v", d.Doc, err)
		}
		if _, err := tx.Mandate("eve/main"); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("Mandate(eve/main): %v, want ErrNotFound", err)
		}
		if d, err := tx.Agent("acme/x@1.0.0"); err != nil || !d.Published || string(d.Doc) != `{"ref":"acme/x@1.0.0"}` {
			t.Errorf("Agent(acme/x@1.0.0) = %+v, %v", d, err)
		}
		if _, err := tx.Agent("acme/x@9.0.0"); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("Agent(acme/x@9.0.0): %v, want ErrNotFound", err)
		}
		var ids, refs []string
		if err := tx.ForEachMandate(func(id string, _ holon.Doc) error { ids = append(ids, id); return nil }); err != nil {
			return err
		}
		if err := tx.ForEachAgent(func(ref string, _ holon.Doc) error { refs = append(refs, ref); return nil }); err != nil {
			return err
		}
		if fmt.Sprint(ids) != "[alice/b alice/main bob/main]" || fmt.Sprint(refs) != "[acme/x@1.0.0 acme/x@1.1.0]" {
			t.Errorf("ForEachMandate %v, ForEachAgent %v; want id order", ids, refs)
		}
		return nil
	})
}

// Ensure that earnings and latency add up per version, are walked by
// prefix, and remember the first journal row and event they count.
func testEarnings(t *testing.T, e *env) {
	e.view(func(tx holon.Tx) error {
		if _, ok := tx.EarningsFrom(); ok {
			t.Error("EarningsFrom of a new store: counted from somewhere")
		}
		if _, ok := tx.LatencyFrom(); ok {
			t.Error("LatencyFrom of a new store: counted from somewhere")
		}
		return nil
	})
	e.credit("signup:bob", "bob", "1.00")
	e.update(func(tx holon.Tx) error {
		for _, ref := range []string{"acme/x@1.0.0", "acme/x@1.0.0", "acme/y@1.0.0", "beta/z@1.0.0"} {
			if err := tx.AddEarnings(ref, "EUR", 1, amt("0.09"), amt("0.01")); err != nil {
				return err
			}
			if err := tx.AddLatency(ref, 120); err != nil {
				return err
			}
		}
		if err := tx.AddEarnings("acme/x@1.0.0", "EUR", -3, 0, 0); err == nil {
			t.Error("earnings below zero: no error")
		}
		return nil
	})
	e.view(func(tx holon.Tx) error {
		got, err := tx.Earnings("acme/x@1.0.0")
		if err != nil {
			return err
		}
		if want := (holon.Earned{PaidCalls: 2, Own: amt("0.18"), Royalties: amt("0.02")}); got["EUR"] != want {
			t.Errorf("earnings of acme/x@1.0.0 = %+v, want EUR %+v", got, want)
		}
		var refs []string
		if err := tx.ForEachEarnings("acme/", func(ref string, _ holon.Earnings) error { refs = append(refs, ref); return nil }); err != nil {
			return err
		}
		if fmt.Sprint(refs) != "[acme/x@1.0.0 acme/y@1.0.0]" {
			t.Errorf("ForEachEarnings(acme/) = %v", refs)
		}
		l, err := tx.Latency("acme/x@1.0.0")
		if err != nil {
			return err
		}
		var runs int64
		for _, c := range l.Counts {
			runs += c
		}
		if runs != 2 {
			t.Errorf("latency of acme/x@1.0.0 counts %d runs (%v), want 2", runs, l.Counts)
		}
		n := 0
		if err := tx.ForEachLatency(func(string, holon.Latency) error { n++; return nil }); err != nil {
			return err
		}
		if n != 3 {
			t.Errorf("ForEachLatency walked %d versions, want 3", n)
		}
		if _, ok := tx.EarningsFrom(); !ok {
			t.Error("EarningsFrom after earnings were counted: none")
		}
		if _, ok := tx.LatencyFrom(); !ok {
			t.Error("LatencyFrom after latency was counted: none")
		}
		return nil
	})
}

// Ensure that inside one write transaction, reads and listings see the
// transaction's own writes (accounts, budgets, counters, records), and
// the commit keeps them so.
func testSeesOwnWrites(t *testing.T, e *env) {
	e.credit("signup:alice", "alice", "10.00")
	e.update(func(tx holon.Tx) error {
		for range 3 {
			if err := tx.AddHeld("alice", amt("0.50")); err != nil {
				return err
			}
			if err := tx.AddBudget("alice/m", amt("0.10"), amt("0.20")); err != nil {
				return err
			}
			if _, err := tx.AddCounter("calls", 2); err != nil {
				return err
			}
			if err := tx.AppendEvent(&holon.Event{Receipt: "r1", Agent: "acme/a@1.0.0", Status: holon.StatusSucceeded, Billed: amt("0.01"), DurationMS: 5}, true); err != nil {
				return err
			}
		}
		if _, err := tx.AppendEntry(transfer(t, "signup:bob", "external:demo-credit", "bob", "1.00")); err != nil {
			return err
		}
		seen := map[string]holon.Account{}
		if err := tx.ForEachAccount(func(name string, a holon.Account) error { seen[name] = a; return nil }); err != nil {
			return err
		}
		if want := (holon.Account{Balance: amt("10.00"), Held: amt("1.50")}); seen["alice"] != want || seen["bob"].Balance != amt("1.00") {
			t.Errorf("ForEachAccount in the transaction: %v, want alice %+v and bob 1.00", seen, want)
		}
		if b, _ := tx.Budget("alice/m"); b != (holon.Budget{Spent: amt("0.30"), Reserved: amt("0.60")}) {
			t.Errorf("Budget in the transaction: %+v", b)
		}
		if n := tx.Counter("calls"); n != 6 {
			t.Errorf("Counter in the transaction: %d, want 6", n)
		}
		if r, _ := tx.Record("acme/a@1.0.0"); r.Runs != 3 || r.Billed != amt("0.03") {
			t.Errorf("Record in the transaction: %+v", r)
		}
		// A change after a listing is kept too.
		return tx.AddHeld("alice", -amt("1.00"))
	})
	e.view(func(tx holon.Tx) error {
		a, _ := tx.Account("alice")
		b, _ := tx.Budget("alice/m")
		r, _ := tx.Record("acme/a@1.0.0")
		if a.Held != amt("0.50") || b.Reserved != amt("0.60") || tx.Counter("calls") != 6 || r.Runs != 3 {
			t.Errorf("after the commit: held %s, reserved %s, calls %d, runs %d; want 0.50, 0.60, 6, 3", a.Held, b.Reserved, tx.Counter("calls"), r.Runs)
		}
		return nil
	})
}

// Ensure that a mandate's budget windows are kept apart from each other
// and from its lifetime budget, move by their deltas, and never go below
// zero; and that a hold keeps the window it reserved in.
func testBudgetWindows(t *testing.T, e *env) {
	e.update(func(tx holon.Tx) error {
		if b, err := tx.WindowBudget("m", "day:2026-12-02"); err != nil || b != (holon.Budget{}) {
			t.Errorf("a window never moved: %+v, %v; want zero", b, err)
		}
		if err := tx.AddWindowBudget("m", "day:2026-12-02", 0, amt("1.00")); err != nil {
			return err
		}
		if err := tx.AddWindowBudget("m", "day:2026-12-02", amt("0.40"), -amt("0.50")); err != nil {
			return err
		}
		if err := tx.AddWindowBudget("m", "day:2026-12-03", amt("0.07"), 0); err != nil {
			return err
		}
		if err := tx.AddWindowBudget("m2", "day:2026-12-02", amt("0.01"), 0); err != nil {
			return err
		}
		for _, move := range [][2]journal.Amount{{0, -amt("0.51")}, {-amt("0.41"), 0}} {
			if err := tx.AddWindowBudget("m", "day:2026-12-02", move[0], move[1]); err == nil {
				t.Errorf("AddWindowBudget(m, %s, %s) below zero: no error", move[0], move[1])
			}
		}
		if err := tx.AddWindowBudget("m", "", amt("0.01"), 0); err == nil {
			t.Errorf("AddWindowBudget without a window key: no error")
		}
		return tx.PutHold(&holon.Hold{Receipt: "r9", Payer: "bob", Mandate: "m", Window: "day:2026-12-02", Amount: amt("0.10"), Reserved: amt("0.10")})
	})
	e.reopen()
	e.view(func(tx holon.Tx) error {
		for _, w := range []struct {
			mandate, window string
			want            holon.Budget
		}{
			{"m", "day:2026-12-02", holon.Budget{Spent: amt("0.40"), Reserved: amt("0.50")}},
			{"m", "day:2026-12-03", holon.Budget{Spent: amt("0.07")}},
			{"m2", "day:2026-12-02", holon.Budget{Spent: amt("0.01")}},
			{"m", "day:2026-12-04", holon.Budget{}},
		} {
			if b, err := tx.WindowBudget(w.mandate, w.window); err != nil || b != w.want {
				t.Errorf("WindowBudget(%s, %s) = %+v, %v; want %+v", w.mandate, w.window, b, err, w.want)
			}
		}
		if b, err := tx.Budget("m"); err != nil || b != (holon.Budget{}) {
			t.Errorf("the lifetime budget moved with the windows: %+v, %v", b, err)
		}
		if h, err := tx.Hold("r9"); err != nil || h.Window != "day:2026-12-02" {
			t.Errorf("Hold(r9) = %+v, %v; want its window", h, err)
		}
		return nil
	})
	e.update(func(tx holon.Tx) error { return tx.DeleteHold("r9") })
}

// Ensure that no update overdraws an account other than an external one
// (holon.Overdrafts): an entry or a hold that leaves less than zero
// available, and less than before, fails the update with ErrOverdrawn
// and nothing of the update is kept; an update that passes through such
// a state and ends out of it (a settlement: the debit, then the release
// of the hold that covered it) stands; an external account goes below
// zero by design.
func testNoOverdraft(t *testing.T, e *env) {
	e.credit("signup:bob", "bob", "1.00")
	e.update(func(tx holon.Tx) error { return tx.AddHeld("bob", amt("0.80")) })
	refused := func(what string, fn func(tx holon.Tx) error) {
		t.Helper()
		err := e.s.Update(context.Background(), fn)
		if !errors.Is(err, holon.ErrOverdrawn) || !strings.Contains(err.Error(), "account bob") {
			t.Errorf("%s: %v, want ErrOverdrawn naming bob", what, err)
		}
		if a := e.account("bob"); a != (holon.Account{Balance: amt("1.00"), Held: amt("0.80")}) {
			t.Errorf("after %s, bob = %+v, want balance 1.00, held 0.80 (nothing kept)", what, a)
		}
		if a := e.account("acme"); a.Balance != 0 {
			t.Errorf("after %s, acme = %+v, want nothing (nothing kept)", what, a)
		}
	}
	refused("a debit beyond what is available", func(tx holon.Tx) error {
		return tx.PostEntry(transfer(t, "settle:r1", "bob", "acme", "0.30"))
	})
	refused("a hold beyond what is available", func(tx holon.Tx) error {
		if err := tx.AddHeld("bob", amt("0.10")); err != nil {
			return err
		}
		return tx.AddHeld("bob", amt("0.11"))
	})
	refused("a debit whose release does not cover it", func(tx holon.Tx) error {
		if err := tx.PostEntry(transfer(t, "settle:r1", "bob", "acme", "0.30")); err != nil {
			return err
		}
		return tx.AddHeld("bob", -amt("0.05"))
	})
	// The settlement's shape: debited beyond what is available, then the
	// hold released, in one update.
	e.update(func(tx holon.Tx) error {
		if err := tx.PostEntry(transfer(t, "settle:r1", "bob", "acme", "0.30")); err != nil {
			return err
		}
		return tx.AddHeld("bob", -amt("0.80"))
	})
	if a := e.account("bob"); a != (holon.Account{Balance: amt("0.70")}) {
		t.Errorf("after the settlement, bob = %+v, want balance 0.70, nothing held", a)
	}
	// All that is available may be spent; the external account that paid
	// bob's credit is below zero.
	e.update(func(tx holon.Tx) error { return tx.PostEntry(transfer(t, "settle:r2", "bob", "acme", "0.70")) })
	if a := e.account("bob"); a.Balance != 0 {
		t.Errorf("bob = %+v after spending all, want 0", a)
	}
	if a := e.account("external:demo-credit"); a.Balance != -amt("1.00") {
		t.Errorf("external:demo-credit = %s, want -1.00", a.Balance)
	}
}

// Ensure that no update raises a budget above the limit it declared for
// it (holon.BudgetLimits), the lifetime's or a window's: such an update
// fails with ErrOverBudget and nothing of it is kept; moves within the
// limit, moves that do not raise the budget (a settlement: spent up by
// less than the reservation released), and moves without a declared
// limit stand; a limit declared in one update does not bind the next.
func testBudgetWithinLimit(t *testing.T, e *env) {
	const win = "day:2026-12-07"
	e.update(func(tx holon.Tx) error {
		return tx.PutMandate("m", holon.Doc{Doc: []byte(`{"id":"m"}`), Created: tx.Now()})
	})
	reserve := func(window string, limit, amount string) error {
		return e.s.Update(context.Background(), func(tx holon.Tx) error {
			tx.LimitBudget("m", window, amt(limit))
			if window == "" {
				return tx.AddBudget("m", 0, amt(amount))
			}
			return tx.AddWindowBudget("m", window, 0, amt(amount))
		})
	}
	budgets := func() (holon.Budget, holon.Budget) {
		var b, w holon.Budget
		e.view(func(tx holon.Tx) (err error) {
			if b, err = tx.Budget("m"); err != nil {
				return err
			}
			w, err = tx.WindowBudget("m", win)
			return err
		})
		return b, w
	}
	for _, window := range []string{"", win} {
		if err := reserve(window, "1.00", "0.80"); err != nil {
			t.Fatalf("window %q: a reservation within the limit: %v", window, err)
		}
		err := reserve(window, "1.00", "0.21")
		if !errors.Is(err, holon.ErrOverBudget) || !strings.Contains(err.Error(), "budget of m") {
			t.Errorf("window %q: a reservation over the limit: %v, want ErrOverBudget naming m", window, err)
		}
	}
	if b, w := budgets(); b.Reserved != amt("0.80") || w.Reserved != amt("0.80") {
		t.Errorf("after the refused reservations, reserved %s and %s in the window, want 0.80 each (nothing kept)", b.Reserved, w.Reserved)
	}
	e.update(func(tx holon.Tx) error {
		// A settlement over a lowered limit: spent up by 0.50, the
		// reservation of 0.80 released: the budget is not raised.
		tx.LimitBudget("m", "", amt("0.10"))
		tx.LimitBudget("m", win, amt("0.10"))
		if err := tx.AddBudget("m", amt("0.50"), -amt("0.80")); err != nil {
			return err
		}
		return tx.AddWindowBudget("m", win, amt("0.50"), -amt("0.80"))
	})
	// No limit declared: the store does not judge the move.
	e.update(func(tx holon.Tx) error { return tx.AddBudget("m", amt("5.00"), 0) })
	if b, w := budgets(); b != (holon.Budget{Spent: amt("5.50")}) || w != (holon.Budget{Spent: amt("0.50")}) {
		t.Errorf("budgets %+v and %+v in the window, want 5.50 and 0.50 spent, nothing reserved", b, w)
	}
}
