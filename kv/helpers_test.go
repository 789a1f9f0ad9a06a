package kv_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// mustOpen opens a store in a temporary directory. At cleanup it checks the
// journal (it sums to zero, balances are the sums of their lines, the hash
// chain is intact) and closes the store. A test that closed the store itself
// gets the check on the file, reopened.
func mustOpen(tb testing.TB, opts kv.Options) *kv.Store {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "holon.db")
	s, err := kv.Open(path, opts)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() {
		if s.ClosedForTest() {
			if s, err = kv.Open(path, kv.Options{NoSync: true}); err != nil {
				tb.Errorf("reopen for the final check: %v", err)
				return
			}
		}
		if err := s.View(func(tx *kv.Tx) error { return tx.VerifyJournal() }); err != nil {
			tb.Errorf("journal at cleanup: %v", err)
		}
		if err := s.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return s
}

// mustUpdate runs fn in an update and fails the test on an error.
func mustUpdate(tb testing.TB, s *kv.Store, fn func(*kv.Tx) error) {
	tb.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		tb.Fatalf("update: %v", err)
	}
}

// mustView runs fn in a read transaction and fails the test on an error.
func mustView(tb testing.TB, s *kv.Store, fn func(*kv.Tx) error) {
	tb.Helper()
	if err := s.View(fn); err != nil {
		tb.Fatalf("view: %v", err)
	}
}

// amt parses a decimal amount.
func amt(s string) journal.Amount { return journal.MustParseAmount(s) }

// transfer builds a two-line entry, failing the test if it is invalid.
func transfer(tb testing.TB, key, from, to, amount string) journal.Entry {
	tb.Helper()
	e, err := journal.Transfer(key, from, to, amt(amount))
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// credit journals a sign-up credit to account.
func credit(tb testing.TB, s *kv.Store, account, amount string) {
	tb.Helper()
	e := transfer(tb, "signup:"+account, "external:demo-credit", account, amount)
	mustUpdate(tb, s, func(tx *kv.Tx) error { _, err := tx.AppendEntry(e); return err })
}

// balance reads an account's balance.
func balance(tb testing.TB, s *kv.Store, account string) journal.Amount {
	tb.Helper()
	var a holon.Account
	mustView(tb, s, func(tx *kv.Tx) (err error) { a, err = tx.Account(account); return err })
	return a.Balance
}

// journalRows reads the whole journal, oldest first.
func journalRows(tb testing.TB, s *kv.Store) []holon.JournalRow {
	tb.Helper()
	var rows []holon.JournalRow
	mustView(tb, s, func(tx *kv.Tx) error {
		return tx.ForEachEntry(0, func(r holon.JournalRow) (bool, error) {
			rows = append(rows, r)
			return true, nil
		})
	})
	return rows
}

// gate holds the writer inside an update until it is opened, so that the
// updates submitted meanwhile queue up and share the next batch.
type gate struct {
	open    chan struct{}
	entered chan struct{}
	done    chan error
}

// closeGate starts an update that blocks the writer, and returns once the
// writer is blocked in it.
func closeGate(tb testing.TB, s *kv.Store) *gate {
	tb.Helper()
	g := &gate{open: make(chan struct{}), entered: make(chan struct{}), done: make(chan error, 1)}
	var once sync.Once
	go func() {
		g.done <- s.Update(context.Background(), func(*kv.Tx) error {
			once.Do(func() { close(g.entered) })
			<-g.open
			return nil
		})
	}()
	<-g.entered
	return g
}

// release opens the gate once n updates are queued behind it.
func (g *gate) release(tb testing.TB, s *kv.Store, n int) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.QueuedForTest() < n {
		if time.Now().After(deadline) {
			tb.Fatalf("only %d of %d updates queued", s.QueuedForTest(), n)
		}
		time.Sleep(time.Millisecond)
	}
	close(g.open)
	if err := <-g.done; err != nil {
		tb.Fatalf("gate update: %v", err)
	}
}
