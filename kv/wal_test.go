package kv_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/bench/drill/lossyfs"
	"holon.dev/holon/bench/drill/lossyfs/lossyfstest"
	"holon.dev/holon/kv"
)

// walLoad commits updates from 8 goroutines, each a journal entry and a
// row of its own (rows from..from+n), and returns the rows' keys whose
// update returned nil.
func walLoad(t *testing.T, s *kv.Store, from, n int) []string {
	t.Helper()
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := from + g; i < from+n; i += 8 {
				key := fmt.Sprintf("row-%06d", i)
				e := transfer(t, "wal:"+key, "external:demo-credit", fmt.Sprintf("acct-%d", i%13), "0.01")
				err := s.Update(context.Background(), func(tx *kv.Tx) error {
					if _, err := tx.AppendEntry(e); err != nil {
						return err
					}
					// A value of a few hundred bytes, so that pages split
					// and are freed and reused between checkpoints.
					return tx.Put(holon.BucketFiles, key, map[string]string{"k": key, "pad": fmt.Sprintf("%0300d", i)})
				})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, key)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return acked
}

// Ensure that a store whose process died (its file written without a sync
// since its last checkpoint, its log left behind) opens as it was: the log
// is replayed onto the last checkpoint, and the file is consistent; and
// that a clean close then leaves a plain file, with no log.
func TestWAL_CrashRecovers(t *testing.T) {
	defer kv.SetCheckpointBytesForTest(64 << 10)()
	path := filepath.Join(t.TempDir(), "holon.db")
	s, err := kv.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	walLoad(t, s, 0, 3000)
	// A transaction that writes nothing is logged too (bbolt counts it).
	mustUpdate(t, s, func(*kv.Tx) error { return nil })
	credit(t, s, "last", "1.00")
	if st := s.Stats(); st.Checkpoints < 3 || st.LogSyncs == 0 {
		t.Fatalf("%d checkpoints, %d log syncs: the test needs checkpoints while it writes", st.Checkpoints, st.LogSyncs)
	}
	want := export(t, s)
	s.CrashForTest()
	if _, err := os.Stat(s.LogDirForTest()); err != nil {
		t.Fatalf("a crashed store's log is gone: %v", err)
	}

	s, err = kv.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Replayed == 0 {
		t.Error("no record replayed: the crash left nothing after the last checkpoint, so the test shows nothing")
	}
	if err := s.CheckFileForTest(); err != nil {
		t.Errorf("the recovered file is inconsistent: %v", err)
	}
	if got := export(t, s); !reflect.DeepEqual(got, want) {
		t.Error("the recovered store differs from the one that crashed")
	}
	// It goes on writing, and closes clean.
	credit(t, s, "after", "1.00")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.LogDirForTest()); !os.IsNotExist(err) {
		t.Errorf("a clean close left the log: %v", err)
	}
	r, err := kv.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if balance(t, r, "after") != amt("1.00") {
		t.Error("the update after the recovery was lost")
	}
}

// Ensure that a crash in the middle of a recovery recovers again: the
// replay's own commits, not synced, must not overwrite the pages of the
// checkpoint it starts from.
func TestWAL_CrashDuringRecovery(t *testing.T) {
	defer kv.SetCheckpointBytesForTest(1 << 30)()
	path := filepath.Join(t.TempDir(), "holon.db")
	s, err := kv.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 600 {
		// One commit each: 600 records to replay.
		mustUpdate(t, s, func(tx *kv.Tx) error {
			return tx.Put(holon.BucketFiles, fmt.Sprintf("row-%06d", i%150), map[string]string{"pad": fmt.Sprintf("%0300d", i)})
		})
	}
	want := export(t, s)
	s.CrashForTest()
	restore := kv.CrashReplayForTest(400)
	if _, err := kv.Open(path, kv.Options{}); err == nil {
		t.Fatal("the injected crash did not stop the recovery")
	}
	restore()
	s, err = kv.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckFileForTest(); err != nil {
		t.Errorf("the file is inconsistent after a second recovery: %v", err)
	}
	if got := export(t, s); !reflect.DeepEqual(got, want) {
		t.Error("the store recovered twice differs from the one that crashed")
	}
}

// creditThenCut credits alice 2.50 in a store on the lossy filesystem,
// then the power goes: the credit is in the log alone, not in the file.
// It returns the store's path.
func creditThenCut(t *testing.T) string {
	t.Helper()
	f := lossyfstest.Mount(t)
	path := filepath.Join(f.Dir(), "holon.db")
	s := mustOpenAt(t, path)
	credit(t, s, "alice", "2.50")
	s.CrashForTest()
	if err := f.Cut(nil); err != nil {
		t.Fatal(err)
	}
	return path
}

// Ensure that a store read without a gateway (holon verify, a backup of a
// stopped gateway's file) after a power cut reads what was committed: it is
// recovered from its log first.
func TestWAL_OpenReadOnlyRecovers(t *testing.T) {
	path := creditThenCut(t)
	r, err := kv.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := balance(t, r, "alice"); got != amt("2.50") {
		t.Errorf("alice has %v after the power cut, want 2.50", got)
	}
}

// Ensure that after power cuts (every write since the file's last sync
// lost, or a random part of them kept: torn), each at a random moment of a
// load with checkpoints, the store opens consistent and holds every update
// that returned before the cut, and nothing that did not happen.
func TestWAL_PowerCut(t *testing.T) {
	defer kv.SetCheckpointBytesForTest(48 << 10)()
	f := lossyfstest.Mount(t)
	path := filepath.Join(f.Dir(), "data", "holon.db")
	rng := rand.New(rand.NewPCG(1, 2))
	var acked []string
	total := 0
	for cut := range 6 {
		s, err := kv.Open(path, kv.Options{})
		if err != nil {
			t.Fatalf("cut %d: open: %v", cut, err)
		}
		if err := s.CheckFileForTest(); err != nil {
			t.Fatalf("cut %d: the file is inconsistent after the power cut: %v", cut, err)
		}
		checkRows(t, s, acked, total)
		// Rows numbered on from the last cut's.
		n := 300 + rng.IntN(600)
		more := walLoad(t, s, total, n)
		if cut == 0 && s.Stats().Checkpoints == 0 {
			t.Fatal("no checkpoint during the load: the test would show nothing")
		}
		acked = append(acked, more...)
		total += n
		s.CrashForTest()
		var torn *rand.Rand
		if cut%2 == 1 {
			torn = rng
		}
		if err := f.Cut(torn); err != nil {
			t.Fatal(err)
		}
	}
	s, err := kv.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckFileForTest(); err != nil {
		t.Fatalf("the file is inconsistent after the last power cut: %v", err)
	}
	checkRows(t, s, acked, total)
}

// checkRows checks that every acked row of the first total is in the
// store, and that the rows and the journal agree: each row's update
// credited 0.01, in the same transaction.
func checkRows(t *testing.T, s *kv.Store, acked []string, total int) {
	t.Helper()
	present := map[string]bool{}
	mustView(t, s, func(tx *kv.Tx) error {
		for i := range total {
			key := fmt.Sprintf("row-%06d", i)
			var v map[string]string
			switch err := tx.Get(holon.BucketFiles, key, &v); err {
			case nil:
				present[key] = true
			case holon.ErrNotFound:
			default:
				return err
			}
		}
		return nil
	})
	for _, k := range acked {
		if !present[k] {
			t.Fatalf("%s was committed before the cut and is gone after it (%d of %d acked rows present)", k, len(present), len(acked))
		}
	}
	var sum int64
	for a := range 13 {
		sum += int64(balance(t, s, fmt.Sprintf("acct-%d", a)))
	}
	if want := int64(len(present)) * int64(amt("0.01")); sum != want {
		t.Fatalf("the accounts hold %d micro-units for %d rows, want %d: a row and its entry parted", sum, len(present), want)
	}
}

// Ensure that a store on a disk with too little free space commits with
// bbolt's own syncs, without a log (opened so, or stopping at a
// checkpoint), and keeps what it committed across a power cut either way.
func TestWAL_LowSpaceCommitsWithoutLog(t *testing.T) {
	defer kv.SetCheckpointBytesForTest(32 << 10)()
	f := lossyfstest.Mount(t)
	path := filepath.Join(f.Dir(), "holon.db")
	s := mustOpenAt(t, path)
	walLoad(t, s, 0, 100)
	if s.Stats().LogSyncs == 0 {
		t.Fatal("the store does not log with room to")
	}
	// The disk fills up: the next checkpoint stops the log.
	restore := kv.SetMinFreeForTest(1 << 62)
	defer restore()
	acked := walLoad(t, s, 100, 400)
	if _, err := os.Stat(s.LogDirForTest()); !os.IsNotExist(err) {
		t.Errorf("the log is still there with no room for it: %v", err)
	}
	syncs := s.Stats().LogSyncs
	credit(t, s, "after", "1.00")
	if s.Stats().LogSyncs != syncs {
		t.Error("a commit was logged after the log stopped")
	}
	s = cutPower(t, f, s, path)
	if _, err := os.Stat(s.LogDirForTest()); !os.IsNotExist(err) {
		t.Errorf("a store opened with no room to log made a log: %v", err)
	}
	checkRows(t, s, acked, 500)
	if balance(t, s, "after") != amt("1.00") {
		t.Error("the commit after the log stopped was lost")
	}
	credit(t, s, "again", "1.00")
	s = cutPower(t, f, s, path)
	defer s.Close()
	if err := s.CheckFileForTest(); err != nil {
		t.Fatal(err)
	}
	if balance(t, s, "again") != amt("1.00") {
		t.Error("a commit of the store without its log was lost")
	}
}

// Ensure that a store file says it is logging (format 3) whenever a log
// beside it may hold commits the file lacks, durably before the log's
// first record, so that a gateway from before the log (which reads format
// 2) refuses it after a crash rather than open it without them; and that
// a clean close, and a store that does not log, leave format 2, which
// such a gateway opens.
func TestWAL_FileFormatSaysLogging(t *testing.T) {
	f := lossyfstest.Mount(t)
	path := filepath.Join(f.Dir(), "holon.db")
	format := func(when string, want uint64) {
		t.Helper()
		if got := rawSchema(t, path); got != want {
			t.Errorf("%s: the file says format %d, want %d", when, got, want)
		}
	}
	s := mustOpenAt(t, path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	format("a new store closed", kv.FileFormat)
	// The power goes at once, before any checkpoint or record.
	mustOpenAt(t, path).CrashForTest()
	if err := f.Cut(nil); err != nil {
		t.Fatal(err)
	}
	format("after a power cut right after Open", kv.FileFormatLogging)
	s = mustOpenAt(t, path)
	walLoad(t, s, 0, 50)
	if s.Stats().LogSyncs == 0 {
		t.Fatal("the store does not log: the test shows nothing")
	}
	s.CrashForTest()
	if err := f.Cut(nil); err != nil {
		t.Fatal(err)
	}
	format("after a power cut of a store that logs", kv.FileFormatLogging)
	s = mustOpenAt(t, path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	format("after a clean close", kv.FileFormat)
	restore := kv.SetMinFreeForTest(1 << 62)
	defer restore()
	s = mustOpenAt(t, path)
	credit(t, s, "unlogged", "1.00")
	if s.Stats().LogSyncs != 0 {
		t.Fatal("the store logs with no room to")
	}
	s.CrashForTest()
	if err := f.Cut(nil); err != nil {
		t.Fatal(err)
	}
	format("after a power cut of a store that does not log", kv.FileFormat)
}

// cutPower stops s as a killed process would, cuts the power of f (every
// unsynced write lost), and opens the store at path again.
func cutPower(t *testing.T, f *lossyfs.FS, s *kv.Store, path string) *kv.Store {
	t.Helper()
	s.CrashForTest()
	if err := f.Cut(nil); err != nil {
		t.Fatal(err)
	}
	return mustOpenAt(t, path)
}

// mustOpenAt opens the store at path, which the test closes (or crashes).
func mustOpenAt(t *testing.T, path string) *kv.Store {
	t.Helper()
	s, err := kv.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Ensure that a restore into the path of a store that lost power checks
// that store as its log has it: one whose only commits are in its log is
// not taken for an empty one and overwritten (its log would then be
// replayed onto the copy at the next start).
func TestWAL_RestoreSeesTheLog(t *testing.T) {
	src := mustOpen(t, kv.Options{NoSync: true})
	credit(t, src, "bob", "1.00")
	e := export(t, src)

	path := creditThenCut(t)
	if err := kv.Restore(path, e.snap, feed(e.rows)); !errors.Is(err, kv.ErrNotEmpty) {
		t.Fatalf("restore over a store whose commits are in its log: %v, want ErrNotEmpty", err)
	}
	s := mustOpenAt(t, path)
	defer s.Close()
	if got := balance(t, s, "alice"); got != amt("2.50") {
		t.Errorf("alice has %v after the refused restore, want 2.50", got)
	}
}

// Ensure that bbolt commits a batch while its record's fdatasync runs, and
// that no reader sees the batch before that sync returns: View and
// Export read the last durable commit, never bbolt's latest; once the
// update returns, they see it.
func TestWAL_ReadersSeeOnlyDurable(t *testing.T) {
	s := mustOpen(t, kv.Options{})
	credit(t, s, "alice", "1.00")
	started, release := s.HoldLogSyncForTest()
	defer release()
	done := make(chan error, 1)
	e := transfer(t, "gift", "external:demo-credit", "alice", "2.00")
	go func() {
		done <- s.Update(context.Background(), func(tx *kv.Tx) error { _, err := tx.AppendEntry(e); return err })
	}()
	<-started
	// bbolt commits while the sync is held: wait until its latest commit
	// has the transfer's journal row (the balance it moves waits in the
	// log and the pending rows, deferred.go).
	deadline := time.Now().Add(10 * time.Second)
	for {
		var has bool
		if err := s.RawViewForTest(func(tx *kv.Tx) error { has = tx.HasEntry(e.Key); return nil }); err != nil {
			t.Fatal(err)
		}
		if has {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bbolt did not commit the batch while its record's sync ran")
		}
		time.Sleep(time.Millisecond)
	}
	if got := balance(t, s, "alice"); got != amt("1.00") {
		t.Errorf("View sees alice's balance %s before the transfer's record is synced, want 1.00", got)
	}
	if entries := export(t, s).count("journal"); entries != 1 {
		t.Errorf("Export sees %d journal entries before the transfer's record is synced, want 1", entries)
	}
	select {
	case err := <-done:
		t.Fatalf("the update returned (%v) before its record's sync", err)
	default:
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := balance(t, s, "alice"); got != amt("3.00") {
		t.Errorf("after the update returned, View sees alice's balance %s, want 3.00", got)
	}
}
