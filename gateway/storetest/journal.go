package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

func init() {
	add(
		behaviour{"Journal/EntryMustSumToZero", testEntryMustSumToZero},
		behaviour{"Journal/KeyUsedOnce", testKeyUsedOnce},
		behaviour{"Journal/KeyUsedOnceInOneUpdate", testKeyUsedOnceInOneUpdate},
		behaviour{"Journal/KeyUsedOnceByConcurrentUpdates", testKeyUsedOnceConcurrently},
		behaviour{"Journal/RowsNeverOverwritten", testRowsNeverOverwritten},
		behaviour{"Journal/BalancesMoveWithEntries", testBalancesMove},
		behaviour{"Journal/VerifiesAfterManyEntries", testVerifyManyEntries},
		behaviour{"Journal/ForEachEntryAfter", testForEachEntryAfter},
		behaviour{"Journal/EntryByKey", testEntryByKey},
	)
}

// Ensure that an entry whose lines do not sum to zero, or that is otherwise
// invalid, is refused by AppendEntry and leaves nothing: no row, no key, no
// balance moved, even when the update goes on and commits.
func testEntryMustSumToZero(t *testing.T, e *env) {
	e.credit("signup:bob", "bob", "5.00")
	for _, tt := range []struct {
		name  string
		entry journal.Entry
	}{
		{"unbalanced", journal.Entry{Key: "bad:1", Lines: []journal.Line{{Account: "external:x", Amount: -amt("1.00")}, {Account: "bob", Amount: amt("0.99")}}}},
		{"one line", journal.Entry{Key: "bad:2", Lines: []journal.Line{{Account: "bob", Amount: 0}}}},
		{"no key", journal.Entry{Lines: []journal.Line{{Account: "external:x", Amount: -amt("1.00")}, {Account: "bob", Amount: amt("1.00")}}}},
		{"one account twice", journal.Entry{Key: "bad:3", Lines: []journal.Line{{Account: "bob", Amount: -amt("1.00")}, {Account: "bob", Amount: amt("1.00")}}}},
	} {
		e.update(func(tx holon.Tx) error {
			if _, err := tx.AppendEntry(tt.entry); err == nil {
				t.Errorf("%s: AppendEntry accepted %+v", tt.name, tt.entry)
			}
			return nil // the update goes on: the refused entry must not be in it
		})
		err := e.s.Update(context.Background(), func(tx holon.Tx) error {
			_, err := tx.AppendEntry(tt.entry)
			return err
		})
		if err == nil {
			t.Errorf("%s: Update appending it returned nil", tt.name)
		}
	}
	if rows := e.rows(); len(rows) != 1 || rows[0].Key != "signup:bob" {
		t.Errorf("journal has %d rows (%v), want only signup:bob", len(rows), rows)
	}
	e.view(func(tx holon.Tx) error {
		for _, k := range []string{"bad:1", "bad:2", "bad:3", ""} {
			if tx.HasEntry(k) {
				t.Errorf("HasEntry(%q) after a refused entry", k)
			}
		}
		return nil
	})
	if a := e.account("bob"); a.Balance != amt("5.00") {
		t.Errorf("bob = %s, want 5.00", a.Balance)
	}
	if a := e.account("external:x"); a.Balance != 0 {
		t.Errorf("external:x = %s, want 0", a.Balance)
	}
}

// Ensure that an idempotency key is used once: a second entry under it is
// ErrDuplicateKey, and the first stays as it was.
func testKeyUsedOnce(t *testing.T, e *env) {
	e.credit("signup:bob", "bob", "5.00")
	first := e.rows()
	err := e.s.Update(context.Background(), func(tx holon.Tx) error {
		_, err := tx.AppendEntry(transfer(t, "signup:bob", "external:other", "bob", "7.00"))
		return err
	})
	if !errors.Is(err, holon.ErrDuplicateKey) {
		t.Fatalf("second entry under signup:bob: %v, want ErrDuplicateKey", err)
	}
	if rows := e.rows(); !reflect.DeepEqual(rows, first) {
		t.Errorf("journal after the refused duplicate:\n%+v\nwant\n%+v", rows, first)
	}
	if a := e.account("bob"); a.Balance != amt("5.00") {
		t.Errorf("bob = %s, want 5.00 (credited once)", a.Balance)
	}
}

// Ensure that one update appending the same key twice gets ErrDuplicateKey
// for the second, and that the first is journaled once.
func testKeyUsedOnceInOneUpdate(t *testing.T, e *env) {
	e.update(func(tx holon.Tx) error {
		if _, err := tx.AppendEntry(transfer(t, "k", "external:demo-credit", "ann", "1.00")); err != nil {
			return err
		}
		if _, err := tx.AppendEntry(transfer(t, "k", "external:demo-credit", "ann", "2.00")); !errors.Is(err, holon.ErrDuplicateKey) {
			t.Errorf("the same key twice in one update: %v, want ErrDuplicateKey", err)
		}
		return nil
	})
	if rows := e.rows(); len(rows) != 1 {
		t.Errorf("%d rows, want 1", len(rows))
	}
	if a := e.account("ann"); a.Balance != amt("1.00") {
		t.Errorf("ann = %s, want 1.00", a.Balance)
	}
}

// Ensure that concurrent updates appending under one key (committed
// together or not) journal it once: one succeeds, every other gets
// ErrDuplicateKey.
func testKeyUsedOnceConcurrently(t *testing.T, e *env) {
	const n = 50
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.s.Update(context.Background(), func(tx holon.Tx) error {
				_, err := tx.AppendEntry(transfer(t, "settle:r1", "external:demo-credit", fmt.Sprintf("acct%d", i), "0.01"))
				return err
			})
		}()
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, holon.ErrDuplicateKey):
			t.Errorf("update %d: %v, want nil or ErrDuplicateKey", i, err)
		}
	}
	if ok != 1 {
		t.Errorf("%d updates journaled settle:r1, want 1", ok)
	}
	if rows := e.rows(); len(rows) != 1 {
		t.Errorf("%d rows, want 1", len(rows))
	}
	if a := e.account("external:demo-credit"); a.Balance != -amt("0.01") {
		t.Errorf("external:demo-credit = %s, want -0.01 (paid once)", a.Balance)
	}
}

// Ensure that journal rows are never overwritten: rows are numbered 1, 2, …
// in the order they were appended, each chained to the hash of the one
// before, and read back exactly as AppendEntry returned them after later
// entries and refused duplicates.
func testRowsNeverOverwritten(t *testing.T, e *env) {
	var want []holon.JournalRow
	for i := range 20 {
		e.update(func(tx holon.Tx) error {
			row, err := tx.AppendEntry(transfer(t, fmt.Sprintf("credit:%d", i), "external:demo-credit", "bob", "0.10"))
			want = append(want, row)
			return err
		})
		// A refused duplicate of an earlier key, in an update that commits.
		e.update(func(tx holon.Tx) error {
			if _, err := tx.AppendEntry(transfer(t, fmt.Sprintf("credit:%d", i/2), "external:demo-credit", "eve", "9.00")); !errors.Is(err, holon.ErrDuplicateKey) {
				t.Errorf("duplicate credit:%d: %v, want ErrDuplicateKey", i/2, err)
			}
			return nil
		})
	}
	prev := ""
	for i, r := range want {
		if r.Seq != uint64(i+1) || r.Prev != prev || r.Hash == "" || r.Hash != journal.RowHash(r.Prev, r.Seq, r.Key, r.Time, r.Lines) {
			t.Fatalf("row %d as appended: %+v (previous hash %q)", i+1, r, prev)
		}
		prev = r.Hash
	}
	got := e.rows()
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if !sameRow(got[i], want[i]) {
			t.Errorf("row %d reads %+v, was appended as %+v", i+1, got[i], want[i])
		}
	}
	if a := e.account("eve"); a.Balance != 0 {
		t.Errorf("eve = %s, want 0", a.Balance)
	}
}

// sameRow compares two rows, their times as instants.
func sameRow(a, b holon.JournalRow) bool {
	return a.Seq == b.Seq && a.Key == b.Key && a.Time.Equal(b.Time) && a.Prev == b.Prev && a.Hash == b.Hash &&
		reflect.DeepEqual(a.Lines, b.Lines)
}

// Ensure that every line of an entry moves its account's balance in the
// entry's own transaction, that an account never moved reads zero, that an
// external account goes below zero, and that accounts list in name order.
func testBalancesMove(t *testing.T, e *env) {
	e.credit("signup:bob", "bob", "5.00")
	e.update(func(tx holon.Tx) error {
		entry, err := journal.Settlement("settle:r1", "bob", []journal.Share{{To: "holon", Amount: amt("0.01")}, {To: "acme", Amount: amt("0.09")}})
		if err != nil {
			return err
		}
		if _, err := tx.AppendEntry(entry); err != nil {
			return err
		}
		if a, err := tx.Account("bob"); err != nil || a.Balance != amt("4.90") {
			t.Errorf("bob inside the settlement's transaction = %+v, %v; want 4.90", a, err)
		}
		return nil
	})
	want := map[string]journal.Amount{"acme": amt("0.09"), "bob": amt("4.90"), "external:demo-credit": -amt("5.00"), "holon": amt("0.01")}
	got := map[string]journal.Amount{}
	var names []string
	e.view(func(tx holon.Tx) error {
		if a, err := tx.Account("nobody"); err != nil || a != (holon.Account{}) {
			t.Errorf("an account never moved: %+v, %v; want zero", a, err)
		}
		return tx.ForEachAccount(func(name string, a holon.Account) error {
			names = append(names, name)
			got[name] = a.Balance
			return nil
		})
	})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("balances %v, want %v", got, want)
	}
	if fmt.Sprint(names) != "[acme bob external:demo-credit holon]" {
		t.Errorf("accounts listed %v, want name order", names)
	}
}

// Ensure that the journal verifies (holon.VerifyJournal, and the store's
// own check when it has one) after many entries from concurrent updates,
// and that a failed update among them leaves no row.
func testVerifyManyEntries(t *testing.T, e *env) {
	const n = 300
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.s.Update(context.Background(), func(tx holon.Tx) error {
				if _, err := tx.AppendEntry(transfer(t, fmt.Sprintf("credit:%d", i), "external:demo-credit", fmt.Sprintf("acct%02d", i%40), "0.01")); err != nil {
					return err
				}
				if i%7 == 0 {
					return refused(i)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		if (err != nil) != (i%7 == 0) {
			t.Errorf("update %d: %v", i, err)
		}
		if err == nil {
			ok++
		}
	}
	e.view(func(tx holon.Tx) error {
		if err := holon.VerifyJournal(tx, nil); err != nil {
			t.Errorf("holon.VerifyJournal: %v", err)
		}
		if err := verifyJournal(tx); err != nil {
			t.Errorf("the store's journal check: %v", err)
		}
		return nil
	})
	if rows := e.rows(); len(rows) != ok {
		t.Errorf("%d rows, want %d", len(rows), ok)
	}
}

// Ensure that ForEachEntry starts after the given row, goes in order, and
// stops when fn says so.
func testForEachEntryAfter(t *testing.T, e *env) {
	for i := range 10 {
		e.credit(fmt.Sprintf("credit:%d", i), "bob", "1.00")
	}
	e.view(func(tx holon.Tx) error {
		for _, after := range []uint64{0, 1, 5, 9, 10, 99} {
			var seqs []uint64
			if err := tx.ForEachEntry(after, func(r holon.JournalRow) (bool, error) {
				seqs = append(seqs, r.Seq)
				return len(seqs) < 3, nil
			}); err != nil {
				return err
			}
			var want []uint64
			for s := after + 1; s <= 10 && len(want) < 3; s++ {
				want = append(want, s)
			}
			if fmt.Sprint(seqs) != fmt.Sprint(want) {
				t.Errorf("ForEachEntry(%d), three rows: %v, want %v", after, seqs, want)
			}
		}
		return nil
	})
}

// Ensure that HasEntry and EntryByKey find an entry by its key, and report
// ErrNotFound for a key never journaled.
func testEntryByKey(t *testing.T, e *env) {
	e.credit("signup:bob", "bob", "5.00")
	e.credit("signup:ann", "ann", "3.00")
	e.view(func(tx holon.Tx) error {
		row, err := tx.EntryByKey("signup:ann")
		if err != nil || row.Seq != 2 || row.Key != "signup:ann" || len(row.Lines) != 2 {
			t.Errorf("EntryByKey(signup:ann) = %+v, %v", row, err)
		}
		if !tx.HasEntry("signup:bob") || tx.HasEntry("signup:eve") {
			t.Errorf("HasEntry: bob %v, eve %v; want true, false", tx.HasEntry("signup:bob"), tx.HasEntry("signup:eve"))
		}
		if _, err := tx.EntryByKey("signup:eve"); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("EntryByKey(signup:eve): %v, want ErrNotFound", err)
		}
		return nil
	})
}

func init() {
	add(behaviour{"Journal/PostEntryAsAppendEntry", testPostEntry},
		behaviour{"Events/PostEventAsAppendEvent", testPostEvent},
		behaviour{"Counters/CounterAtReachedByTheCommit", testCounterAt})
}

// Ensure that PostEntry journals as AppendEntry does: the row chained
// after the one before, the balances moved, its key used once.
func testPostEntry(t *testing.T, e *env) {
	e.credit("signup:bob", "bob", "5.00")
	e.update(func(tx holon.Tx) error { return tx.PostEntry(transfer(t, "settle:r1", "bob", "acme", "0.30")) })
	err := e.s.Update(context.Background(), func(tx holon.Tx) error { return tx.PostEntry(transfer(t, "settle:r1", "bob", "acme", "0.30")) })
	if !errors.Is(err, holon.ErrDuplicateKey) {
		t.Errorf("a key posted twice: %v, want ErrDuplicateKey", err)
	}
	rows := e.rows()
	if len(rows) != 2 || rows[1].Key != "settle:r1" || rows[1].Seq != rows[0].Seq+1 || rows[1].Prev != rows[0].Hash {
		t.Fatalf("journal %+v, want the posted entry chained after the credit", rows)
	}
	if bob, acme := e.account("bob"), e.account("acme"); bob.Balance != amt("4.70") || acme.Balance != amt("0.30") {
		t.Errorf("bob %v, acme %v; want 4.70 and 0.30", bob.Balance, acme.Balance)
	}
	e.view(verifyJournal)
}

// Ensure that PostEvent records as AppendEvent does: numbered after the
// event before, added to its agent's record.
func testPostEvent(t *testing.T, e *env) {
	ev := &holon.Event{Receipt: "r1", Agent: "acme/a@1.0.0", Status: holon.StatusSucceeded, DurationMS: 7, Billed: amt("0.02"), Currency: "EUR"}
	e.update(func(tx holon.Tx) error { return tx.AppendEvent(ev, true) })
	e.update(func(tx holon.Tx) error {
		return tx.PostEvent(holon.Event{Receipt: "r2", Agent: "acme/a@1.0.0", Status: holon.StatusFailed, Error: "agent_error", DurationMS: 3, Currency: "EUR"}, false)
	})
	var evs []*holon.Event
	var rec holon.Record
	e.view(func(tx holon.Tx) (err error) {
		if evs, err = tx.Events(0, 10); err != nil {
			return err
		}
		rec, err = tx.Record("acme/a@1.0.0")
		return err
	})
	if len(evs) != 2 || evs[0].Receipt != "r2" || evs[0].Seq != ev.Seq+1 || evs[0].Error != "agent_error" {
		t.Errorf("events %+v, want r2 numbered after r1 (%d)", evs, ev.Seq)
	}
	if rec.Runs != 2 || rec.Succeeded != 1 || rec.Billed != amt("0.02") || rec.DurationMS != 10 {
		t.Errorf("record %+v, want 2 runs, 1 succeeded, 0.02 billed, 10 ms", rec)
	}
}

// Ensure that CounterAt tells, by the time the update returns, a value
// the counter reached at that point of the update and holds once the
// update committed.
func testCounterAt(t *testing.T, e *env) {
	var told uint64
	called := false
	e.update(func(tx holon.Tx) error {
		if _, err := tx.AddCounter("n", 2); err != nil {
			return err
		}
		tx.CounterAt("n", func(v uint64) { told, called = v, true })
		_, err := tx.AddCounter("n", 1)
		return err
	})
	if n := e.counter("n"); !called || told < 2 || told > n {
		t.Errorf("CounterAt told %d (called: %v), want from 2 to %d", told, called, n)
	}
}
