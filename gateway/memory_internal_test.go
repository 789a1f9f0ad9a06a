package gateway

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// Ensure that an admission's read counts an in-memory reservation whose
// settlement a transaction has written but not yet committed (the read
// does not show its money), and stops counting it once the read shows
// the settlement's receipt; and that it still counts one whose settlement
// was written and then undone, though later commits moved the store past
// it.
func TestLedger_WrittenBeforeCommit(t *testing.T) {
	store, l, r := ledgerWithEntry(t, false)
	id := r.receipt
	var err error
	unseenNow := func() unseen {
		t.Helper()
		var u unseen
		l.mu.Lock()
		defer l.mu.Unlock()
		if err := store.View(func(tx holon.Tx) error { u = l.unseenLocked(tx, "alice/m", "", "alice", true); return nil }); err != nil {
			t.Fatal(err)
		}
		return u
	}
	written, checked := make(chan struct{}), make(chan struct{})
	settled := make(chan error, 1)
	go func() {
		settled <- store.Update(context.Background(), func(tx holon.Tx) error {
			if err := tx.PutReceipt(&holon.Receipt{ID: id, Mandate: "alice/m", Payer: "alice", Status: holon.StatusSucceeded}); err != nil {
				return err
			}
			l.wrote(tx, r)
			close(written)
			<-checked
			return nil
		})
	}()
	<-written
	if u := unseenNow(); u.reserved != 7 || u.held != 7 {
		t.Errorf("written, not committed: unseen %+v, want 7 reserved and 7 held", u)
	}
	close(checked)
	if err := <-settled; err != nil {
		t.Fatal(err)
	}
	if u := unseenNow(); u.reserved != 0 || u.held != 0 {
		t.Errorf("committed: unseen %+v, want nothing (the store shows it)", u)
	}

	l.leave(r)
	var id2 string
	if err := store.Update(context.Background(), func(tx holon.Tx) (err error) { id2, err = tx.NewReceiptID(); return err }); err != nil {
		t.Fatal(err)
	}
	r2 := &resv{receipt: id2, payer: "alice", mandate: "alice/m", held: 5, reserved: 5, mem: true}
	l.mu.Lock()
	l.enterLocked(r2)
	l.mu.Unlock()
	err = store.Update(context.Background(), func(tx holon.Tx) error {
		if err := tx.PutReceipt(&holon.Receipt{ID: id2, Mandate: "alice/m", Payer: "alice", Status: holon.StatusSucceeded}); err != nil {
			return err
		}
		l.wrote(tx, r2)
		return errors.New("the settlement fails")
	})
	if err == nil {
		t.Fatal("the failing settlement committed")
	}
	err = store.Update(context.Background(), func(tx holon.Tx) error {
		for range 3 {
			id, err := tx.NewReceiptID()
			if err != nil {
				return err
			}
			if err := tx.PutReceipt(&holon.Receipt{ID: id, Mandate: "bob/m", Payer: "bob", Status: holon.StatusSucceeded}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if u := unseenNow(); u.reserved != 5 || u.held != 5 {
		t.Errorf("written, undone, the store moved on: unseen %+v, want 5 reserved and 5 held", u)
	}
}

// Ensure that a reservation whose receipt a transaction writes after it
// left the ledger (a call answered 503 while the store was down, closed
// once it is back) is not counted out of the ledger's sums by the reads
// that show that receipt: the sums no longer hold it. Before, each such
// call made every later durable admission see its amount as free, and a
// gateway on PostgreSQL overspent a balance by the calls in flight at an
// outage.
func TestLedger_WrittenAfterLeaving(t *testing.T) {
	store, l, r := ledgerWithEntry(t, true)
	id := r.receipt
	l.leave(r)
	err := store.Update(context.Background(), func(tx holon.Tx) error {
		if err := tx.PutReceipt(&holon.Receipt{ID: id, Mandate: "alice/m", Payer: "alice", Status: holon.StatusFailed}); err != nil {
			return err
		}
		l.wrote(tx, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var u unseen
	l.mu.Lock()
	err = store.View(func(tx holon.Tx) error { u = l.unseenLocked(tx, "alice/m", "", "alice", false); return nil })
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if u.reserved != 0 || u.held != 0 {
		t.Errorf("a reservation written after it left the ledger: unseen %+v, want nothing", u)
	}
}

// Ensure that an admission deciding on a read made without the ledger's
// lock (a store several gateways share) counts every reservation still in
// the ledger, and every one that left it after the read began unless the
// read's receipts counter shows its commit; one that left before the read
// began, or left unwritten, it does not count; and that it cannot decide
// once the ledger has forgotten some of what left since.
func TestLedger_UnseenSince(t *testing.T) {
	l := newLedger(true)
	enter := func(id string, amount int64, window string) *resv {
		r := &resv{receipt: id, payer: "alice", mandate: "alice/m", window: window,
			held: journal.Amount(amount), reserved: journal.Amount(amount), mem: true}
		l.mu.Lock()
		l.enterLocked(r)
		l.mu.Unlock()
		return r
	}
	leave := func(r *resv, seen uint64) {
		r.seen = seen
		l.leave(r)
	}
	before := enter("r1", 1, "")
	leave(before, 10) // committed before the read began: the read shows it
	start := l.mark()
	enter("r2", 2, "day:1")               // in the ledger: counted, shown or not
	shown := enter("r3", 4, "")           // left since, its commit read: not counted
	unshown := enter("r4", 8, "day:1")    // left since, its commit not read: counted
	unwritten := enter("r5", 16, "day:1") // left since, never written: nothing
	leave(shown, 11)
	leave(unshown, 13)
	leave(unwritten, 0)
	l.mu.Lock()
	u, ok := l.unseenSinceLocked(start, 12, "alice/m", "day:1", "alice", true)
	l.mu.Unlock()
	if want := (unseen{reserved: 10, windowReserved: 10, held: 10}); !ok || u != want {
		t.Errorf("unseen %+v (%v), want %+v", u, ok, want)
	}
	l.mu.Lock()
	u, _ = l.unseenSinceLocked(start, 12, "bob/m", "", "bob", true)
	l.mu.Unlock()
	if u != (unseen{}) {
		t.Errorf("another mandate and payer: unseen %+v, want nothing", u)
	}
	for i := range leftCap {
		leave(enter(fmt.Sprintf("r%d", 100+i), 1, ""), uint64(100+i))
	}
	l.mu.Lock()
	_, ok = l.unseenSinceLocked(start, 12, "alice/m", "", "alice", true)
	l.mu.Unlock()
	if ok {
		t.Error("the ledger forgot entries that left since the read began, and still decided")
	}
}

// ledgerWithEntry opens a store of the test's own and a ledger holding one
// in-memory reservation of 7 under a receipt id the store handed out.
func ledgerWithEntry(t *testing.T, recheck bool) (holon.Store, *ledger, *resv) {
	t.Helper()
	s, err := kv.Open(filepath.Join(t.TempDir(), "holon.db"), kv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	store := s.Holon()
	var id string
	if err := store.Update(context.Background(), func(tx holon.Tx) (err error) { id, err = tx.NewReceiptID(); return err }); err != nil {
		t.Fatal(err)
	}
	l := newLedger(recheck)
	r := &resv{receipt: id, payer: "alice", mandate: "alice/m", held: 7, reserved: 7, mem: true}
	l.mu.Lock()
	l.enterLocked(r)
	l.mu.Unlock()
	return store, l, r
}
