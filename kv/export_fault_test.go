package kv

import (
	"sync"

	bolt "go.etcd.io/bbolt"
)

// FailCommitsForTest makes every later commit fail after its updates were
// applied (and Apply's callers let go), as a write to a failing disk would.
func (s *Store) FailCommitsForTest(err error) { s.commitFault = func() error { return err } }

// CrashForTest stops the store as a killed process would leave it: the
// updates already submitted are committed, and then nothing is synced,
// the log is left as it is and the file unlocked.
func (s *Store) CrashForTest() {
	s.closeOnce.Do(func() {
		s.stopWriter()
		if s.ckpts != nil {
			close(s.ckpts)
			<-s.ckptEnd
		}
		s.closeLog()
		s.db.Close()
	})
}

// SetCheckpointBytesForTest makes checkpoints begin after n bytes of log,
// until the returned function puts the default back.
func SetCheckpointBytesForTest(n int64) (restore func()) {
	old := checkpointBytes
	checkpointBytes = n
	return func() { checkpointBytes = old }
}

// CheckFileForTest runs bbolt's consistency check of the file (every page
// reachable once, none both free and used).
func (s *Store) CheckFileForTest() error {
	return s.db.View(func(btx *bolt.Tx) error {
		var first error
		for err := range btx.Check() {
			if first == nil {
				first = err
			}
		}
		return first
	})
}

// LogDirForTest is the directory of the store's write-ahead log.
func (s *Store) LogDirForTest() string { return walDir(s.path) }

// CrashReplayForTest makes the next Open stop (as a crash would) before
// replaying record n of its log, until the returned function is called.
func CrashReplayForTest(n int) (restore func()) {
	replayFault = func(i int) bool { return i == n }
	return func() { replayFault = nil }
}

// SetMinFreeForTest sets the free space the store needs to log, until the
// returned function puts the default back.
func SetMinFreeForTest(n int64) (restore func()) {
	old := walMinFree
	walMinFree = n
	return func() { walMinFree = old }
}

// HoldLogSyncForTest holds the log's next fdatasync until release is
// called: started is closed once that sync is about to run (its batch
// written to the log, and being committed by bbolt meanwhile).
func (s *Store) HoldLogSyncForTest() (started <-chan struct{}, release func()) {
	st, rel := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.wal.beforeSync = func() {
		once.Do(func() {
			close(st)
			<-rel
		})
	}
	return st, sync.OnceFunc(func() { close(rel) })
}

// RawViewForTest reads bbolt's latest commit, durable or not, where View
// reads the last durable one.
func (s *Store) RawViewForTest(fn func(*Tx) error) error {
	return s.db.View(func(btx *bolt.Tx) error { return fn(&Tx{btx: btx, now: s.now}) })
}
