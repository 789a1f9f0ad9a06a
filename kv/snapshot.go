package kv

import (
	"fmt"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// A snapshot is a read transaction on the last durable commit, which every
// reader shares while the store logs: bbolt commits a batch while the
// log's fdatasync of its record runs (runTx), so its own latest commit
// may not be durable yet, and a read transaction of bbolt's always sees
// that latest. The writer begins one after each commit it logged, once
// the record is synced, and publishes it; the previous one ends when its
// last reader is done. A read-only bbolt transaction has no state that
// its reads change, so readers share it from any goroutine (as etcd's
// concurrent reads share one). Without the log (wal.go), bbolt's own
// syncs come before its meta page is written, and readers begin their own
// transactions: an open snapshot would stop bbolt from growing its map.
type snapshot struct {
	tx *bolt.Tx
	// pend is the rows its commit holds that bbolt does not yet
	// (deferred.go).
	pend *pending
	// refs counts the readers, and the store's own reference while the
	// snapshot is the current one.
	refs atomic.Int64
}

func (sn *snapshot) release() {
	if sn.refs.Add(-1) == 0 {
		_ = sn.tx.Rollback()
	}
}

// read runs fn in the current snapshot, with the rows pending in
// it, or in a read transaction of its own when there is none (the store
// does not log; nothing is pending then, but in a store that broke while
// it logged, which commits nothing more).
func (s *Store) read(fn func(*bolt.Tx, *pending) error) error {
	s.snapMu.RLock()
	sn, pend := s.snap, s.pend
	if sn != nil {
		sn.refs.Add(1)
	}
	s.snapMu.RUnlock()
	if sn == nil {
		return s.db.View(func(btx *bolt.Tx) error { return fn(btx, pend) })
	}
	defer sn.release()
	return fn(sn.tx, sn.pend)
}

// publishLatest makes bbolt's latest commit, durable by now, the one
// readers see.
func (s *Store) publishLatest() error {
	btx, err := s.db.Begin(false)
	if err != nil {
		return fmt.Errorf("begin the readers' snapshot: %w", err)
	}
	s.publish(btx)
	return nil
}

// publish makes btx the readers' snapshot, with the rows pending
// as of its commit (none, when nil: readers then begin their own
// transactions).
func (s *Store) publish(btx *bolt.Tx) {
	var sn *snapshot
	if btx != nil {
		sn = &snapshot{tx: btx, pend: s.pend}
		sn.refs.Store(1)
	}
	s.snapMu.Lock()
	old := s.snap
	s.snap = sn
	s.snapMu.Unlock()
	if old != nil {
		old.release()
	}
}
