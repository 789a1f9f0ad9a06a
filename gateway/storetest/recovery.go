package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
)

func init() {
	add(
		behaviour{"Recovery/DurableWritesSurviveAReopen", testDurableSurvives},
		behaviour{"Recovery/FailedUpdateIsNotThere", testFailedNotThere},
		behaviour{"Recovery/JournalContinuesAfterAReopen", testJournalContinues},
		behaviour{"View/SeesOneState", testViewSeesOneState},
		behaviour{"View/CannotWrite", testViewCannotWrite},
	)
}

// Ensure that what Update returned, and what Apply applied once its Wait
// returned nil, is in the store after Close and a reopen at the same path:
// entries, balances, receipts, holds, budgets, mandates and documents.
func testDurableSurvives(t *testing.T, e *env) {
	e.credit("signup:bob", "bob", "5.00")
	var receipt string
	e.update(func(tx holon.Tx) (err error) {
		if receipt, err = tx.NewReceiptID(); err != nil {
			return err
		}
		if err := tx.PutReceipt(&holon.Receipt{ID: receipt, Mandate: "bob/main", Payer: "bob", Status: holon.StatusRunning}); err != nil {
			return err
		}
		if err := tx.PutHold(&holon.Hold{Receipt: receipt, Payer: "bob", Mandate: "bob/main", Amount: amt("0.10"), Reserved: amt("0.10")}); err != nil {
			return err
		}
		if err := tx.AddHeld("bob", amt("0.10")); err != nil {
			return err
		}
		return tx.AddBudget("bob/main", 0, amt("0.10"))
	})
	c, err := e.s.Apply(context.Background(), func(tx holon.Tx) error {
		if err := tx.PutMandate("bob/main", holon.Doc{Doc: json.RawMessage(`{"v":1}`)}); err != nil {
			return err
		}
		return tx.Put(holon.BucketUsers, "bob", map[string]string{"handle": "bob"})
	})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("Commit.Wait: %v", err)
	}
	rows := e.rows()
	e.reopen()
	if got := e.rows(); len(got) != len(rows) || !sameRow(got[0], rows[0]) {
		t.Errorf("journal after a reopen %+v, want %+v", got, rows)
	}
	if a := e.account("bob"); a != (holon.Account{Balance: amt("5.00"), Held: amt("0.10")}) {
		t.Errorf("bob after a reopen = %+v", a)
	}
	e.view(func(tx holon.Tx) error {
		if r, err := tx.Receipt(receipt); err != nil || r.Status != holon.StatusRunning {
			t.Errorf("receipt after a reopen: %+v, %v", r, err)
		}
		if h, err := tx.Hold(receipt); err != nil || h.Amount != amt("0.10") {
			t.Errorf("hold after a reopen: %+v, %v", h, err)
		}
		if b, err := tx.Budget("bob/main"); err != nil || b.Reserved != amt("0.10") {
			t.Errorf("budget after a reopen: %+v, %v", b, err)
		}
		if _, err := tx.Mandate("bob/main"); err != nil {
			t.Errorf("mandate written by Apply, after a reopen: %v", err)
		}
		var u map[string]string
		if err := tx.Get(holon.BucketUsers, "bob", &u); err != nil || u["handle"] != "bob" {
			t.Errorf("document written by Apply, after a reopen: %v, %v", u, err)
		}
		return nil
	})
	// Settle, so that the store ends with its money in order.
	e.update(func(tx holon.Tx) error {
		if err := tx.DeleteHold(receipt); err != nil {
			return err
		}
		if err := tx.AddHeld("bob", -amt("0.10")); err != nil {
			return err
		}
		if err := tx.AddBudget("bob/main", 0, -amt("0.10")); err != nil {
			return err
		}
		return tx.PutReceipt(&holon.Receipt{ID: receipt, Mandate: "bob/main", Payer: "bob", Status: holon.StatusFailed, Splits: nil})
	})
	CheckMoney(t, e.s)
}

// Ensure that an update that failed, alone or among updates that
// committed, is not in the store after a reopen.
func testFailedNotThere(t *testing.T, e *env) {
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.s.Update(bg, func(tx holon.Tx) error {
				if _, err := tx.AddCounter("n", 1); err != nil {
					return err
				}
				if i%4 == 0 {
					if _, err := tx.AppendEntry(transfer(t, "lost", "external:demo-credit", "bob", "1.00")); err != nil {
						return err
					}
					return refused(i)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if (err != nil) != (i%4 == 0) {
			t.Errorf("update %d: %v", i, err)
		}
	}
	e.reopen()
	e.view(func(tx holon.Tx) error {
		if tx.HasEntry("lost") {
			t.Error("the entry of a failed update is there after a reopen")
		}
		if n := tx.Counter("n"); n != 15 {
			t.Errorf("n = %d after a reopen, want 15 (the updates that returned nil)", n)
		}
		return nil
	})
}

// Ensure that the journal goes on after a reopen: numbered and chained from
// where it stopped, with the keys it had still used.
func testJournalContinues(t *testing.T, e *env) {
	e.credit("signup:bob", "bob", "5.00")
	e.credit("signup:ann", "ann", "3.00")
	e.reopen()
	err := e.s.Update(bg, func(tx holon.Tx) error {
		_, err := tx.AppendEntry(transfer(t, "signup:bob", "external:demo-credit", "bob", "5.00"))
		return err
	})
	if !errors.Is(err, holon.ErrDuplicateKey) {
		t.Errorf("a key used before the reopen: %v, want ErrDuplicateKey", err)
	}
	e.credit("signup:eve", "eve", "1.00")
	rows := e.rows()
	if len(rows) != 3 || rows[2].Seq != 3 || rows[2].Prev != rows[1].Hash {
		t.Errorf("journal after a reopen: %+v, want row 3 chained to row 2", rows)
	}
}

// Ensure that a read transaction sees one state from start to end while
// updates commit, and that the next one sees those updates.
func testViewSeesOneState(t *testing.T, e *env) {
	e.credit("signup:bob", "bob", "5.00")
	// Grow the store and free the room again, so that the update below
	// finds room without growing the file (bbolt waits for the readers
	// to end before it maps a larger file).
	big := strings.Repeat("x", 4096)
	e.update(func(tx holon.Tx) error {
		for i := range 64 {
			if err := tx.Put(holon.BucketSettings, fmt.Sprint(i), big); err != nil {
				return err
			}
		}
		return nil
	})
	e.update(func(tx holon.Tx) error {
		for i := range 64 {
			if err := tx.Delete(holon.BucketSettings, fmt.Sprint(i)); err != nil {
				return err
			}
		}
		_, err := tx.AddCounter("n", 1)
		return err
	})
	committed := false
	e.view(func(tx holon.Tx) error {
		before, _ := tx.Account("bob")
		n := tx.Counter("n")
		done := make(chan error, 1)
		go func() {
			done <- e.s.Update(bg, func(tx holon.Tx) error {
				if _, err := tx.AppendEntry(transfer(t, "bonus:bob", "external:demo-credit", "bob", "1.00")); err != nil {
					return err
				}
				if err := tx.PutReceipt(&holon.Receipt{ID: "r1", Mandate: "m", Status: holon.StatusDenied}); err != nil {
					return err
				}
				_, err := tx.AddCounter("n", 1)
				return err
			})
		}()
		// A store may make the update wait for this read to end: then
		// there is nothing to see, and the check below still holds.
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("update during the view: %v", err)
			}
			committed = true
		case <-time.After(2 * time.Second):
			t.Log("the update waits for the view to end")
		}
		after, _ := tx.Account("bob")
		page, err := tx.Receipts("", "", 10)
		if err != nil {
			return err
		}
		if after != before || tx.Counter("n") != n || tx.HasEntry("bonus:bob") || len(page.Receipts) != 0 {
			t.Errorf("a view saw an update commit: bob %+v → %+v, n %d → %d, bonus journaled %v, %d receipts",
				before, after, n, tx.Counter("n"), tx.HasEntry("bonus:bob"), len(page.Receipts))
		}
		return nil
	})
	if !committed {
		// Let the update finish now that the view is over.
		for e.counter("n") != 2 {
			time.Sleep(time.Millisecond)
		}
	}
	if a, n := e.account("bob"), e.counter("n"); a.Balance != amt("6.00") || n != 2 {
		t.Errorf("the next view: bob %s, n %d; want 6.00, 2", a.Balance, n)
	}
}

// Ensure that a read transaction cannot write: the journal, counters and
// documents refuse, and nothing is stored.
func testViewCannotWrite(t *testing.T, e *env) {
	_ = e.s.View(func(tx holon.Tx) error {
		if _, err := tx.AppendEntry(transfer(t, "signup:bob", "external:demo-credit", "bob", "5.00")); err == nil {
			t.Error("AppendEntry in a view: no error")
		}
		if _, err := tx.AddCounter("n", 1); err == nil {
			t.Error("AddCounter in a view: no error")
		}
		if err := tx.Put(holon.BucketUsers, "bob", "x"); err == nil {
			t.Error("Put in a view: no error")
		}
		return nil
	})
	e.view(func(tx holon.Tx) error {
		var s string
		if tx.HasEntry("signup:bob") || tx.Counter("n") != 0 || tx.Get(holon.BucketUsers, "bob", &s) == nil {
			t.Error("a write in a view was stored")
		}
		return nil
	})
}
