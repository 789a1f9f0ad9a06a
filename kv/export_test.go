package kv

import (
	"context"

	bolt "go.etcd.io/bbolt"
	"holon.dev/holon"
)

// PutJournalRowForTest exposes the journal's only row write, so a test can
// show that it refuses to overwrite a row.
func (tx *Tx) PutJournalRowForTest(row holon.JournalRow) error { return tx.putJournalRow(row) }

// TamperForTest runs fn in a raw bbolt write transaction, bypassing every
// rule of the store, as an attacker with the file would.
// What it writes is not logged; readers see it at once. The rows pending
// (deferred.go) are put into bbolt first, as they would be at the next
// checkpoint, so that fn finds and changes what the store holds.
func (s *Store) TamperForTest(fn func(*bolt.Tx) error) error {
	err := s.db.Update(func(btx *bolt.Tx) error {
		if err := (&Tx{btx: btx, pend: s.pend}).materialize(); err != nil {
			return err
		}
		return fn(btx)
	})
	if err != nil {
		return err
	}
	s.snapMu.Lock()
	s.pend = nil
	s.snapMu.Unlock()
	s.hot = newHotCache()
	if s.wal != nil {
		return s.publishLatest()
	}
	return nil
}

// QueuedForTest is the number of updates submitted and not yet taken by the
// writer, so a test can know that updates will share a batch.
func (s *Store) QueuedForTest() int { return len(s.reqs) }

// ClosedForTest reports whether Close has begun: from then on, updates are
// refused.
func (s *Store) ClosedForTest() bool {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	return s.closed
}

// RestoreInBatchesForTest is Restore with transactions of batchBytes, so a
// test can cut a restore short after several batches were committed.
func RestoreInBatchesForTest(path string, snap Snapshot, next func() (Row, error), batchBytes int) error {
	return restore(path, snap, next, batchBytes)
}

// OpenFoldAtForTest is Open with the receipt index's log folded once it
// holds n keys, so a test sees folds after a few receipts.
func OpenFoldAtForTest(path string, opts Options, n int) (*Store, error) {
	s, err := Open(path, opts)
	if err != nil {
		return nil, err
	}
	// Set through the writer, which alone reads it.
	err = s.Update(context.Background(), func(*Tx) error { s.foldAt = n; return nil })
	return s, err
}

// FoldsForTest is how many times the writer folded the receipt index's
// log (read it after an update returned).
func (s *Store) FoldsForTest() int { return s.folds }

// LogKeysForTest is how many keys the receipt index's log holds.
func (s *Store) LogKeysForTest() int {
	n := 0
	_ = s.db.View(func(btx *bolt.Tx) error { n = logKeys(btx); return nil })
	return n
}
