package kv_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"holon.dev/holon"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// refusedAndRolledBack runs an update that puts a receipt, moves a counter and
// a balance, then calls bad; it checks that the update fails with want and
// that none of its writes is visible afterwards.
func refusedAndRolledBack(t *testing.T, s *kv.Store, want error, bad func(*kv.Tx) error) {
	t.Helper()
	var before holon.Account
	var entries uint64
	mustView(t, s, func(tx *kv.Tx) (err error) {
		entries = tx.Counter("journal_entries")
		before, err = tx.Account("bob")
		return err
	})
	var id string
	err := s.Update(context.Background(), func(tx *kv.Tx) error {
		var err error
		if id, err = tx.NewReceiptID(); err != nil {
			return err
		}
		if err := tx.PutReceipt(&holon.Receipt{ID: id, Mandate: "bob/sandbox", Status: "succeeded"}); err != nil {
			return err
		}
		if _, err := tx.AppendEntry(transfer(t, "settle:"+id, "bob", "holon", "0.01")); err != nil {
			return err
		}
		return bad(tx)
	})
	if !errors.Is(err, want) {
		t.Fatalf("update: got %v, want %v", err, want)
	}
	mustView(t, s, func(tx *kv.Tx) error {
		if _, err := tx.Receipt(id); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("receipt %s of the refused update: got %v, want ErrNotFound", id, err)
		}
		if n := tx.Counter("receipts"); n != 0 {
			t.Errorf("receipts counter = %d, want 0", n)
		}
		if tx.HasEntry("settle:" + id) {
			t.Errorf("entry settle:%s of the refused update is journaled", id)
		}
		if n := tx.Counter("journal_entries"); n != entries {
			t.Errorf("journal_entries = %d, want %d", n, entries)
		}
		if a, _ := tx.Account("bob"); a != before {
			t.Errorf("bob = %+v, want %+v", a, before)
		}
		return nil
	})
}

// Ensure that an entry whose lines do not sum to zero, or that is otherwise
// malformed, is refused and its whole update rolled back.
func TestTx_AppendEntry_Invalid(t *testing.T) {
	for _, tt := range []struct {
		name  string
		entry journal.Entry
		want  error
	}{
		{"unbalanced", journal.Entry{Key: "bad:1", Lines: []journal.Line{{Account: "bob", Amount: -amt("1")}, {Account: "lena", Amount: amt("0.99")}}}, journal.ErrUnbalanced},
		{"no key", journal.Entry{Lines: []journal.Line{{Account: "bob", Amount: -amt("1")}, {Account: "lena", Amount: amt("1")}}}, journal.ErrNoKey},
		{"one line", journal.Entry{Key: "bad:2", Lines: []journal.Line{{Account: "bob", Amount: 0}}}, journal.ErrTooFewLines},
		{"same account twice", journal.Entry{Key: "bad:3", Lines: []journal.Line{{Account: "bob", Amount: -amt("1")}, {Account: "bob", Amount: amt("1")}}}, journal.ErrDuplicateAccount},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := mustOpen(t, kv.Options{NoSync: true})
			credit(t, s, "bob", "5")
			refusedAndRolledBack(t, s, tt.want, func(tx *kv.Tx) error {
				_, err := tx.AppendEntry(tt.entry)
				return err
			})
			if got := len(journalRows(t, s)); got != 1 {
				t.Errorf("journal has %d rows, want 1", got)
			}
		})
	}
}

// Ensure that a second entry with an idempotency key already journaled is
// refused, rolled back, and leaves the first entry as it was.
func TestTx_AppendEntry_DuplicateKey(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	credit(t, s, "bob", "5")
	refusedAndRolledBack(t, s, holon.ErrDuplicateKey, func(tx *kv.Tx) error {
		_, err := tx.AppendEntry(transfer(t, "signup:bob", "external:demo-credit", "bob", "7"))
		return err
	})
	if got := balance(t, s, "bob"); got != amt("5") {
		t.Errorf("bob = %s, want 5.00", got)
	}
}

// Ensure that two updates in the same batch with the same idempotency key
// journal it once: the first commits, the second gets ErrDuplicateKey.
func TestTx_AppendEntry_DuplicateKeyInBatch(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	g := closeGate(t, s)
	amounts := []string{"3", "4"}
	errs := make([]error, len(amounts))
	var wg sync.WaitGroup
	for i, a := range amounts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := transfer(t, "signup:bob", "external:demo-credit", "bob", a)
			errs[i] = s.Update(context.Background(), func(tx *kv.Tx) error {
				if err := tx.PutMandate(fmt.Sprintf("bob/m%d", i), holon.Doc{Doc: json.RawMessage(`{}`)}); err != nil {
					return err
				}
				_, err := tx.AppendEntry(e)
				return err
			})
		}()
	}
	g.release(t, s, len(amounts))
	wg.Wait()

	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner < 0:
			winner = i
		case errors.Is(err, holon.ErrDuplicateKey):
		default:
			t.Fatalf("update %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no update committed: %v", errs)
	}
	if got, want := balance(t, s, "bob"), amt(amounts[winner]); got != want {
		t.Errorf("bob = %s, want %s", got, want)
	}
	mustView(t, s, func(tx *kv.Tx) error {
		for i := range amounts {
			_, err := tx.Mandate(fmt.Sprintf("bob/m%d", i))
			if (i == winner) != (err == nil) {
				t.Errorf("mandate bob/m%d of update %d (winner %d): %v", i, i, winner, err)
			}
		}
		return nil
	})
	if st := s.Stats(); st.Undone != 1 || st.Commits != 2 { // the gate's commit, and the batch's
		t.Errorf("Stats = %+v, want one update undone in one commit (both updates in one batch)", st)
	}
}

// Ensure that one update appending the same key twice is refused as a whole,
// its first append included.
func TestTx_AppendEntry_DuplicateKeyInUpdate(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	credit(t, s, "bob", "5")
	refusedAndRolledBack(t, s, holon.ErrDuplicateKey, func(tx *kv.Tx) error {
		if _, err := tx.AppendEntry(transfer(t, "admin-credit:1", "external:demo-credit", "bob", "1")); err != nil {
			return err
		}
		_, err := tx.AppendEntry(transfer(t, "admin-credit:1", "external:demo-credit", "bob", "1"))
		return err
	})
	mustView(t, s, func(tx *kv.Tx) error {
		if tx.HasEntry("admin-credit:1") {
			t.Error("admin-credit:1 is journaled")
		}
		return nil
	})
}

// Ensure that a journal row is never overwritten: the store's only write to
// the journal refuses an existing sequence number, and the update that tried
// is rolled back.
//
// There is no delete: Tx has no method that removes a journal row or an
// idempotency key, so a correction can only be a new entry. Removal by a
// raw write to the file is what TestTx_VerifyJournal_Tamper detects.
func TestTx_PutJournalRow_Overwrite(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	credit(t, s, "bob", "5")
	orig := journalRows(t, s)[0]
	refusedAndRolledBack(t, s, holon.ErrJournalRowExists, func(tx *kv.Tx) error {
		forged := orig
		forged.Lines = []journal.Line{{Account: "external:demo-credit", Amount: -amt("500")}, {Account: "bob", Amount: amt("500")}}
		return tx.PutJournalRowForTest(forged)
	})
	rows := journalRows(t, s)
	if len(rows) != 1 || rows[0].Hash != orig.Hash || rows[0].Lines[1].Amount != amt("5") {
		t.Errorf("journal after the refused overwrite: %+v, want only %+v", rows, orig)
	}
}

// Ensure that a balance that goes negative (every external:* account does)
// reads back, so that the next entry touching the account commits.
func TestTx_AppendEntry_NegativeBalance(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	credit(t, s, "bob", "5")
	credit(t, s, "lena", "2.5")
	if got, want := balance(t, s, "external:demo-credit"), -amt("7.5"); got != want {
		t.Errorf("external:demo-credit = %s, want %s", got, want)
	}
	mustView(t, s, func(tx *kv.Tx) error {
		var sum journal.Amount
		err := tx.ForEachAccount(func(name string, a holon.Account) error { sum += a.Balance; return nil })
		if sum != 0 {
			t.Errorf("balances sum to %s, want 0", sum)
		}
		return err
	})
}

// Ensure that a settlement entry moves every balance it names and chains its
// row to the one before.
func TestTx_AppendEntry_Settlement(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	credit(t, s, "bob", "5")
	shares, err := journal.Split(amt("0.035"), "lena", []journal.Upstream{{Account: "acme", Rate: journal.MustParseRate("0.15")}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := journal.Settlement("settle:r1", "bob", shares)
	if err != nil {
		t.Fatal(err)
	}
	var row holon.JournalRow
	mustUpdate(t, s, func(tx *kv.Tx) (err error) { row, err = tx.AppendEntry(e); return err })
	prev := journalRows(t, s)[0]
	if row.Seq != 2 || row.Prev != prev.Hash || row.Hash != journal.RowHash(prev.Hash, 2, "settle:r1", row.Time, row.Lines) {
		t.Errorf("row = %+v, want seq 2 chained to %s", row, prev.Hash)
	}
	for account, want := range map[string]string{"bob": "4.965", "holon": "0.0035", "lena": "0.026775", "acme": "0.004725"} {
		if got := balance(t, s, account); got != amt(want) {
			t.Errorf("%s = %s, want %s", account, got, want)
		}
	}
	mustView(t, s, func(tx *kv.Tx) error {
		got, err := tx.EntryByKey("settle:r1")
		if err != nil || got.Hash != row.Hash {
			t.Errorf("EntryByKey = %+v, %v; want row %d", got, err, row.Seq)
		}
		if _, err := tx.EntryByKey("settle:r2"); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("EntryByKey(unknown) = %v, want ErrNotFound", err)
		}
		return nil
	})
}

// Ensure that a read transaction cannot write: the journal and counters
// refuse.
func TestStore_View_ReadOnly(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	err := s.View(func(tx *kv.Tx) error {
		if _, err := tx.AppendEntry(transfer(t, "signup:bob", "external:demo-credit", "bob", "5")); err == nil {
			t.Error("AppendEntry in a View succeeded")
		}
		if _, err := tx.AddCounter("c", 1); err == nil {
			t.Error("AddCounter in a View succeeded")
		}
		if err := tx.PutMandate("m", holon.Doc{Doc: json.RawMessage(`{}`)}); err == nil {
			t.Error("PutMandate in a View succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Ensure that VerifyJournal detects a journal altered behind the store's
// back: an amount changed (balanced or not, rehashed or not), the last row
// removed (only the head shows it), a middle row removed, a balance changed.
func TestTx_VerifyJournal_Tamper(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	for _, a := range []string{"bob", "lena", "acme", "dan", "eve"} {
		credit(t, s, a, "5")
	}
	if err := s.View(func(tx *kv.Tx) error { return tx.VerifyJournal() }); err != nil {
		t.Fatalf("untouched journal: %v", err)
	}
	seqKey := func(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
	raw := func(bucket string, key []byte) []byte {
		var v []byte
		if err := s.TamperForTest(func(btx *bolt.Tx) error {
			v = append([]byte(nil), btx.Bucket([]byte(bucket)).Get(key)...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return v
	}
	put := func(bucket string, key, v []byte) {
		t.Helper()
		if err := s.TamperForTest(func(btx *bolt.Tx) error {
			if v == nil {
				return btx.Bucket([]byte(bucket)).Delete(key)
			}
			return btx.Bucket([]byte(bucket)).Put(key, v)
		}); err != nil {
			t.Fatal(err)
		}
	}
	row3 := raw("journal", seqKey(3))
	row5 := raw("journal", seqKey(5))
	alter := func(f func(*holon.JournalRow)) []byte {
		var r holon.JournalRow
		if err := json.Unmarshal(row3, &r); err != nil {
			t.Fatal(err)
		}
		f(&r)
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tt := range []struct {
		name   string
		bucket string
		key    []byte
		value  []byte
		orig   []byte
		want   string
	}{
		{"amount changed, still balanced", "journal", seqKey(3), alter(func(r *holon.JournalRow) {
			r.Lines[0].Amount, r.Lines[1].Amount = -amt("50"), amt("50")
		}), row3, "journal row 3: hash chain broken"},
		{"amount changed, unbalanced", "journal", seqKey(3), alter(func(r *holon.JournalRow) {
			r.Lines[1].Amount = amt("50")
		}), row3, "unbalanced"},
		{"amount changed and row rehashed", "journal", seqKey(3), alter(func(r *holon.JournalRow) {
			r.Lines[0].Amount, r.Lines[1].Amount = -amt("50"), amt("50")
			r.Hash = journal.RowHash(r.Prev, r.Seq, r.Key, r.Time, r.Lines)
		}), row3, "journal row 4: hash chain broken"},
		{"last row removed", "journal", seqKey(5), nil, row5, "journal head"},
		{"middle row removed", "journal", seqKey(3), nil, row3, "journal row 4: hash chain broken"},
		{"balance changed", "accounts", []byte("lena"), []byte(`{"balance":"6.00","held":"0.00"}`), raw("accounts", []byte("lena")), "account lena"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			put(tt.bucket, tt.key, tt.value)
			err := s.View(func(tx *kv.Tx) error { return tx.VerifyJournal() })
			put(tt.bucket, tt.key, tt.orig)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("VerifyJournal = %v, want an error mentioning %q", err, tt.want)
			}
			if err := s.View(func(tx *kv.Tx) error { return tx.VerifyJournal() }); err != nil {
				t.Fatalf("after restoring: %v", err)
			}
		})
	}
}
