package kv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
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
	r := closeAndReadOnly(t, s, path)
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

// Ensure that the idempotency keys' log (holon.IdempotencyLogPrefix) waits
// in the store's log for a later commit to put it into bbolt, as the hot
// rows do, while the bucket's other rows go into bbolt at once; that every
// reader sees a logged key meanwhile (Get, GetRaw, ForEach, Export), the
// update that appended it too; that deleting one (the log's fold) puts the
// pending rows into bbolt first; and that they survive a crash and a clean
// close.
func TestDeferred_IdempotencyLogWaits(t *testing.T) {
	defer kv.SetCheckpointBytesForTest(1 << 30)()
	path := filepath.Join(t.TempDir(), "holon.db")
	s, err := kv.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	doc := func(v string) map[string]string { return map[string]string{"v": v} }
	logKey := idemLogKey
	raw := func(key string) bool {
		t.Helper()
		found := false
		if err := s.RawViewForTest(func(tx *kv.Tx) error {
			_, err := tx.GetRaw(holon.BucketIdempotency, key)
			found = err == nil
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return found
	}
	logged := func(s *kv.Store) []string {
		t.Helper()
		var keys []string
		mustView(t, s, func(tx *kv.Tx) error {
			return tx.ForEach(holon.BucketIdempotency, holon.IdempotencyLogPrefix, func(k string, v json.RawMessage) (bool, error) {
				keys = append(keys, k+"="+string(v))
				return true, nil
			})
		})
		return keys
	}

	mustUpdate(t, s, func(tx *kv.Tx) error {
		if err := tx.Put(holon.BucketIdempotency, logKey(1), doc("one")); err != nil {
			return err
		}
		// The update that appended it reads it.
		var got map[string]string
		if err := tx.Get(holon.BucketIdempotency, logKey(1), &got); err != nil || got["v"] != "one" {
			return fmt.Errorf("the appending update reads %v (%v)", got, err)
		}
		n := 0
		if err := tx.ForEach(holon.BucketIdempotency, holon.IdempotencyLogPrefix, func(string, json.RawMessage) (bool, error) { n++; return true, nil }); err != nil || n != 1 {
			return fmt.Errorf("the appending update walks %d log rows (%v)", n, err)
		}
		return tx.Put(holon.BucketIdempotency, "key/scope/k", doc("layout"))
	})
	mustUpdate(t, s, func(tx *kv.Tx) error { return tx.Put(holon.BucketIdempotency, logKey(2), doc("two")) })
	if raw(logKey(1)) || raw(logKey(2)) {
		t.Error("bbolt holds the log's rows at once: their commits wrote the bucket's pages")
	}
	if !raw("key/scope/k") {
		t.Error("bbolt lacks a row of the bucket outside the log: it was deferred too")
	}
	mustView(t, s, func(tx *kv.Tx) error {
		b, err := tx.GetRaw(holon.BucketIdempotency, logKey(2))
		if err != nil || string(b) != `{"v":"two"}` {
			t.Errorf("GetRaw of a pending log row: %s (%v)", b, err)
		}
		return nil
	})
	if got := strings.Join(logged(s), " "); got != logKey(1)+`={"v":"one"} `+logKey(2)+`={"v":"two"}` {
		t.Errorf("the log walked: %s", got)
	}
	if rows := export(t, s).count(holon.BucketIdempotency); rows != 3 {
		t.Errorf("Export has %d idempotency rows, want 3", rows)
	}

	// A fold deletes a pending row: the pending rows go into bbolt first.
	mustUpdate(t, s, func(tx *kv.Tx) error { return tx.Delete(holon.BucketIdempotency, logKey(1)) })
	if raw(logKey(1)) || !raw(logKey(2)) {
		t.Errorf("after deleting a pending log row: bbolt holds the deleted %v, the other %v", raw(logKey(1)), raw(logKey(2)))
	}
	mustUpdate(t, s, func(tx *kv.Tx) error { return tx.Put(holon.BucketIdempotency, logKey(3), doc("three")) })
	if raw(logKey(3)) {
		t.Error("a log row appended after the fold went into bbolt at once")
	}

	// A crash: the log's records put them back.
	s.CrashForTest()
	if s, err = kv.Open(path, kv.Options{}); err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, s, func(tx *kv.Tx) error { return tx.Put(holon.BucketIdempotency, logKey(4), doc("four")) })
	want := logKey(2) + `={"v":"two"} ` + logKey(3) + `={"v":"three"} ` + logKey(4) + `={"v":"four"}`
	if got := strings.Join(logged(s), " "); got != want {
		t.Errorf("after a crash, the log walked: %s, want %s", got, want)
	}
	if got := strings.Join(logged(closeAndReadOnly(t, s, path)), " "); got != want {
		t.Errorf("after a clean close, the log walked: %s, want %s", got, want)
	}
}

// closeAndReadOnly closes s cleanly and opens its file read-only, closed
// when the test ends.
func closeAndReadOnly(t *testing.T, s *kv.Store, path string) *kv.Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := kv.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
