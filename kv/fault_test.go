package kv_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// Ensure that a commit that fails (each kind of the drills' injected
// faults) is reported to OnFailure, breaks the store (every later update is
// refused with ErrBroken, so nothing commits on top of a failed write), and
// that the file, reopened, holds the commits before it: for commit and
// short-write nothing of the failed batch, for fsync the batch the kernel
// kept.
func TestStore_CommitFault_BreaksStore(t *testing.T) {
	for _, tc := range []struct {
		kind    string
		entries int // journaled after reopening
	}{{"commit", 1}, {"short-write", 1}, {"fsync", 2}} {
		t.Run(tc.kind, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "holon.db")
			t.Setenv(kv.FaultEnv, tc.kind+":1")
			var failures atomic.Int32
			s, err := kv.Open(path, kv.Options{OnFailure: func(error) { failures.Add(1) }})
			if err != nil {
				t.Fatal(err)
			}
			put := func(key string) error {
				e := transfer(t, key, "external:demo-credit", "ann", "1.00")
				return s.Update(context.Background(), func(tx *kv.Tx) error { _, err := tx.AppendEntry(e); return err })
			}
			if err := put("admin-credit:1"); err != nil {
				t.Fatalf("the good commit: %v", err)
			}
			if err := put("admin-credit:2"); !errors.Is(err, kv.ErrInjected) {
				t.Fatalf("the faulty commit: %v, want the injected fault", err)
			}
			if failures.Load() != 1 {
				t.Errorf("OnFailure told %d times, want 1", failures.Load())
			}
			if err := put("admin-credit:3"); !errors.Is(err, holon.ErrBroken) {
				t.Errorf("an update after the failed commit: %v, want ErrBroken", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			os.Unsetenv(kv.FaultEnv)
			r, err := kv.OpenReadOnly(path)
			if err != nil {
				t.Fatalf("reopen after the fault: %v", err)
			}
			defer r.Close()
			if err := r.View(func(tx *kv.Tx) error {
				if err := tx.VerifyJournal(); err != nil {
					return err
				}
				if n := tx.JournalKeys(); n != int64(tc.entries) {
					t.Errorf("%d entries after reopening, want %d", n, tc.entries)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
