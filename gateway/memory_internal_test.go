package gateway

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// Ensure that an admission's read counts an in-memory reservation whose
// settlement a transaction has written but not yet committed (the read
// does not show its money), and stops counting it once the read shows
// the settlement's receipt; and that it still counts one whose settlement
// was written and then undone, though later commits moved the store past
// it.
func TestLedger_WrittenBeforeCommit(t *testing.T) {
	s, err := kv.Open(filepath.Join(t.TempDir(), "holon.db"), kv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	store := s.Holon()
	var id string
	if err := store.Update(context.Background(), func(tx holon.Tx) (err error) { id, err = tx.NewReceiptID(); return err }); err != nil {
		t.Fatal(err)
	}
	l := newLedger(false)
	r := &resv{receipt: id, payer: "alice", mandate: "alice/m", held: 7, reserved: 7, mem: true}
	l.mu.Lock()
	l.enterLocked(r)
	l.mu.Unlock()
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
