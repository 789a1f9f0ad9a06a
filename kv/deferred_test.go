package kv_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// rawBalance reads an account's balance from bbolt's latest commit alone,
// without the rows pending in the log.
func rawBalance(tb testing.TB, s *kv.Store, account string) journal.Amount {
	tb.Helper()
	var a holon.Account
	if err := s.RawViewForTest(func(tx *kv.Tx) (err error) { a, err = tx.Account(account); return err }); err != nil {
		tb.Fatal(err)
	}
	return a.Balance
}

// Ensure that while the store logs, a commit's hot rows (here the
// accounts an entry moves) wait in its log record for a later commit to
// put them into bbolt, the one before a checkpoint; that every reader
// sees them meanwhile (View, a walk of the bucket, Export); and that a
// clean close leaves them in the file.
func TestDeferred_HotRowsWaitForCheckpoint(t *testing.T) {
	defer kv.SetCheckpointBytesForTest(1 << 30)()
	path := filepath.Join(t.TempDir(), "holon.db")
	s, err := kv.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	credit(t, s, "alice", "1.00")
	if got := rawBalance(t, s, "alice"); got != 0 {
		t.Errorf("bbolt holds alice's balance %s at once: the commit wrote the accounts' pages", got)
	}
	if got := balance(t, s, "alice"); got != amt("1.00") {
		t.Errorf("View sees alice's balance %s, want 1.00", got)
	}
	walked := map[string]journal.Amount{}
	mustView(t, s, func(tx *kv.Tx) error {
		return tx.ForEachAccount(func(name string, a holon.Account) error { walked[name] = a.Balance; return nil })
	})
	if walked["alice"] != amt("1.00") || walked["external:demo-credit"] != -amt("1.00") {
		t.Errorf("the accounts walked: %v", walked)
	}
	if rows := export(t, s).count("accounts"); rows != 2 {
		t.Errorf("Export has %d accounts, want 2", rows)
	}

	// A checkpoint due: the next commit puts the pending rows into bbolt,
	// and the checkpoint follows it.
	restore := kv.SetCheckpointBytesForTest(1)
	credit(t, s, "bob", "2.00")
	credit(t, s, "carol", "3.00")
	restore()
	if got := rawBalance(t, s, "alice"); got != amt("1.00") {
		t.Errorf("after a checkpoint, bbolt holds alice's balance %s, want 1.00", got)
	}
	// The checkpoint is made durable beside the writer.
	for deadline := time.Now().Add(5 * time.Second); s.Stats().Checkpoints == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint: the test shows nothing")
		}
	}
	credit(t, s, "dave", "4.00")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := kv.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for name, want := range map[string]string{"alice": "1.00", "bob": "2.00", "carol": "3.00", "dave": "4.00"} {
		if got := balance(t, r, name); got != amt(want) {
			t.Errorf("after a clean close, %s has %s, want %s", name, got, want)
		}
	}
}

// Ensure that a reader keeps the pending rows of its own snapshot while
// later commits change them: a View begun before an update sees the value
// before it to its end, and one begun after sees the new value.
func TestDeferred_ReaderKeepsItsSnapshot(t *testing.T) {
	s := mustOpen(t, kv.Options{})
	credit(t, s, "alice", "1.00")
	mustView(t, s, func(tx *kv.Tx) error {
		a, err := tx.Account("alice")
		if err != nil || a.Balance != amt("1.00") {
			t.Fatalf("alice: %v %v", a, err)
		}
		e := transfer(t, "gift", "external:demo-credit", "alice", "2.00")
		if err := s.Update(context.Background(), func(tx *kv.Tx) error { _, err := tx.AppendEntry(e); return err }); err != nil {
			t.Fatal(err)
		}
		if got := balance(t, s, "alice"); got != amt("3.00") {
			t.Errorf("a View after the update sees %s, want 3.00", got)
		}
		a, err = tx.Account("alice")
		if err != nil || a.Balance != amt("1.00") {
			t.Errorf("the View begun before the update sees %v (%v), want 1.00", a.Balance, err)
		}
		return nil
	})
}
