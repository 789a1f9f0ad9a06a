// Package storetest is the one test suite every holon.Store implementation
// runs: the behaviours the engine relies on, tested once against the
// interface (litestream's habit: one shared suite, every backend). A store
// package runs it from a _test.go file:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, path string) holon.Store {
//			s, err := mystore.Open(path)
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// It also holds CheckMoney, the money invariants every test of the engine
// and the hosted product checks of its store at the end.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// Run runs the suite against the store that open opens. open opens (or
// reopens, given a path it opened before and closed) the store at path;
// the suite makes the paths itself, in temporary directories, and closes
// every store it opened. Subtests are named by behaviour, such as
// "Journal/EntryMustSumToZero".
func Run(t *testing.T, open func(t *testing.T, path string) holon.Store) {
	for _, b := range behaviours {
		t.Run(b.name, func(t *testing.T) {
			b.test(t, newEnv(t, open))
		})
	}
}

// behaviour is one test of the suite.
type behaviour struct {
	name string
	test func(t *testing.T, e *env)
}

// behaviours is the suite, in the order it runs; each file of the package
// adds its own.
var behaviours []behaviour

// add registers behaviours (from the files' init functions).
func add(bs ...behaviour) { behaviours = append(behaviours, bs...) }

// Behaviours lists the suite's subtests by name.
func Behaviours() []string {
	names := make([]string, len(behaviours))
	for i, b := range behaviours {
		names[i] = b.name
	}
	return names
}

// env is one subtest's store, at a path of its own.
type env struct {
	t    *testing.T
	open func(t *testing.T, path string) holon.Store
	path string
	s    holon.Store // nil while closed
}

// newEnv opens a new store in a temporary directory. At cleanup the store
// (reopened if the test left it closed) must still verify its journal, and
// it is closed.
func newEnv(t *testing.T, open func(t *testing.T, path string) holon.Store) *env {
	t.Helper()
	e := &env{t: t, open: open, path: filepath.Join(t.TempDir(), "holon.db")}
	e.s = open(t, e.path)
	t.Cleanup(func() {
		if e.s == nil {
			e.s = open(t, e.path)
		}
		if err := e.s.View(func(tx holon.Tx) error { return verifyJournal(tx) }); err != nil {
			t.Errorf("journal at cleanup: %v", err)
		}
		if err := e.s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return e
}

// close closes the store.
func (e *env) close() {
	e.t.Helper()
	if err := e.s.Close(); err != nil {
		e.t.Fatalf("close: %v", err)
	}
	e.s = nil
}

// reopen closes the store (if open) and opens it again at the same path.
func (e *env) reopen() {
	e.t.Helper()
	if e.s != nil {
		e.close()
	}
	e.s = e.open(e.t, e.path)
}

// update runs fn in an update and fails the test on an error.
func (e *env) update(fn func(tx holon.Tx) error) {
	e.t.Helper()
	if err := e.s.Update(context.Background(), fn); err != nil {
		e.t.Fatalf("update: %v", err)
	}
}

// view runs fn in a read transaction and fails the test on an error.
func (e *env) view(fn func(tx holon.Tx) error) {
	e.t.Helper()
	if err := e.s.View(fn); err != nil {
		e.t.Fatalf("view: %v", err)
	}
}

// credit journals a transfer from external:demo-credit to account under key.
func (e *env) credit(key, account, amount string) {
	e.t.Helper()
	entry := transfer(e.t, key, "external:demo-credit", account, amount)
	e.update(func(tx holon.Tx) error { _, err := tx.AppendEntry(entry); return err })
}

// account reads an account.
func (e *env) account(name string) holon.Account {
	e.t.Helper()
	var a holon.Account
	e.view(func(tx holon.Tx) (err error) { a, err = tx.Account(name); return err })
	return a
}

// rows reads the whole journal, oldest first.
func (e *env) rows() []holon.JournalRow {
	e.t.Helper()
	var rows []holon.JournalRow
	e.view(func(tx holon.Tx) error {
		return tx.ForEachEntry(0, func(r holon.JournalRow) (bool, error) {
			rows = append(rows, r)
			return true, nil
		})
	})
	return rows
}

// counter reads a counter.
func (e *env) counter(name string) uint64 {
	e.t.Helper()
	var n uint64
	e.view(func(tx holon.Tx) error { n = tx.Counter(name); return nil })
	return n
}

// verifyJournal checks the journal's rules, with the store's own stronger
// check when its transaction has one (kv's adds the chain's head).
func verifyJournal(tx holon.Tx) error {
	if v, ok := tx.(interface{ VerifyJournal() error }); ok {
		return v.VerifyJournal()
	}
	return holon.VerifyJournal(tx, nil)
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

// bg is the context of the suite's updates.
var bg = context.Background()

// errRefused is the error of the suite's failing updates.
var errRefused = errors.New("storetest: refused on purpose")

// refused is errRefused for update i.
func refused(i int) error { return fmt.Errorf("update %d: %w", i, errRefused) }
