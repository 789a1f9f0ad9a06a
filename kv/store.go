// Package kv is Holon's store: one bbolt file holding agents, mandates,
// accounts, the journal, receipts, approvals, holds, call events and
// counters. It is the only package that imports bbolt.
//
// Writes go through one writer goroutine that groups concurrent updates into
// one bbolt transaction (group commit): one fsync pays for a whole batch,
// which is what takes the store from ~2k to ~15k+ settlements per second on
// a small machine. Woken with few of the callers it was told are in flight
// (Expect), the writer waits a bounded time (Options.Pace) for the others,
// so that more updates share a commit; it never waits for a lone caller.
// An update that fails is undone alone, inside the batch's transaction
// (every write logs how to take it back), so it never fails its
// neighbours and none of them runs again; only a panic rolls the
// transaction back, and then no update runs more than twice.
//
// The journal's three rules (entries sum to zero, rows are never overwritten
// or deleted, idempotency keys are unique) are enforced inside the write
// transaction, before commit.
//
// # Durability
//
// Update returns once its writes are durable: written to the store's
// write-ahead log and fdatasynced (wal.go). Apply returns earlier, once
// its writes are applied in its transaction and every other update of
// that transaction has run (so no rollback can undo them), and just before
// that transaction is logged and committed; its Commit says when they are
// durable.
// That is how the gateway keeps its rule, "a call's state is durable before
// any effect leaves the process and before the caller is answered; nothing
// else waits for an fsync": an in-process agent runs while its reservation
// commits, and its settlement, which the caller waits for, can only land in
// that commit or a later one (one writer, one transaction at a time, the
// log written in order), so the settlement's sync covers the reservation
// too. A batch's record is written to the log and fdatasynced while bbolt
// commits it (without a sync of its own), and readers see the commit only
// once that sync returned (snapshot), so a reader never sees a write the
// disk does not hold; checkpoints make bbolt's file alone hold a
// commit, and a start after a crash or a power cut replays the log onto
// the last one. A commit that fails after Apply let its callers go on
// makes the store refuse every later write (ErrBroken): no settlement can
// then commit on top of a reservation that was lost, and the process
// stops (gateway.md §7).
//
// What a read (View) sees: committed transactions only, never an applied
// one, so a concurrent reader never sees a reservation an Apply caller is
// running on before it is committed, and every commit it sees is durable.
//
// Where the store cannot log (a 32-bit address space, or a nearly full
// disk: wal.go), each commit is made durable by bbolt's own two
// fdatasyncs instead, as before the log; the guarantees are the same.
package kv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	"holon.dev/holon"
)

// DefaultMaxBatch is how many updates one write transaction may group.
const DefaultMaxBatch = 256

// DefaultPace is how long at most the writer waits for updates announced
// as coming (Expect) before it commits what it holds.
const DefaultPace = 300 * time.Microsecond

// Options configure a Store.
type Options struct {
	// MaxBatch bounds the updates grouped into one transaction
	// (DefaultMaxBatch when 0).
	MaxBatch int
	// NoSync skips fsync: for tests and benchmarks of the CPU path only.
	// A gateway never runs with it.
	NoSync bool
	// Now is the clock used for journal rows (time.Now when nil).
	Now func() time.Time
	// OnCommit, when set, is told the size of each batch committed (from
	// the writer goroutine: it must return quickly). Metrics use it.
	OnCommit func(batch int)
	// Pace bounds how long the writer, woken with fewer updates than
	// callers announced as coming (Expect), waits for them before it
	// commits (DefaultPace when 0, none when negative).
	Pace time.Duration
	// OnFailure, when set, is told (from the writer goroutine) when a
	// commit fails: the store then refuses every update (ErrBroken), and
	// the process should stop (gateway.md §7).
	OnFailure func(error)
}

// Store is an open Holon database.
type Store struct {
	db       *bolt.DB
	path     string
	maxBatch int
	now      func() time.Time
	onCommit func(batch int)

	reqs chan *writeReq
	// changes counts, by app bucket (appBit), the commits that wrote to it
	// (BucketChanges).
	changes [32]atomic.Uint64
	// coming counts the callers in flight (Expect, until their done):
	// those about to submit an update and those whose update is queued;
	// pace bounds the writer's wait for them.
	coming    atomic.Int64
	pace      time.Duration
	closing   chan struct{}
	writerEnd chan struct{}
	closeOnce sync.Once
	// closeMu orders submissions before Close: Update sends under the read
	// lock, Close sets closed under the write lock, so once closing is
	// closed no update can enter the queue behind the writer's last look.
	closeMu sync.RWMutex
	closed  bool
	// broken is set by the writer once a commit failed; every later
	// update is refused with it.
	broken    atomic.Pointer[error]
	onFailure func(error)
	// commitFault, set by tests only, fails a commit after its updates
	// were applied and Apply's callers let go, as a failed write would.
	commitFault func() error
	// faults, for the drills only, fail commits (FaultEnv).
	faults *faults
	// logKeys is about how many keys the receipt index's log holds, and
	// foldAt how many make the writer fold it (receipts_index.go); the
	// writer's alone.
	logKeys, foldAt int
	// Folds counts the folds, for tests.
	folds int

	// The write-ahead log (wal.go, checkpoint.go): wal is the writer's
	// (nil when the store does not log), redo its buffer; file reads the
	// meta pages back, pageSize is bbolt's. pin is the last durable
	// checkpoint's read transaction, the checkpointer's (and Close's).
	wal      *wal
	redo     *redoBuf
	file     *os.File
	pageSize int
	pin      *bolt.Tx
	ckpts    chan ckptJob
	ckptEnd  chan struct{}
	ckptBusy atomic.Bool
	// ckptMu is held by the checkpointer while it works, and by whoever
	// stops the log.
	ckptMu sync.Mutex

	// snap is the readers' snapshot while the store logs (View).
	snapMu sync.RWMutex
	snap   *snapshot
	// pend is the rows committed but not yet in bbolt, as of the
	// last commit (deferred.go): the writer's, changed under snapMu.
	pend *pending
	// flushNext asks the writer's next commit to put them into bbolt: a
	// checkpoint waits for it.
	flushNext bool
	// hot is the writer's cache of decoded rows across its transactions
	// (cache.go); wcache the write cache each of them starts empty.
	hot    *hotCache
	wcache *writeCache

	statsMu sync.Mutex
	stats   Stats
	opened  time.Time
}

// Stats describes the write path since the store was opened.
type Stats struct {
	// Commits is the number of write transactions committed.
	Commits uint64
	// Updates is the number of updates committed (Updates/Commits is the mean batch).
	Updates uint64
	// Undone counts updates that failed and were undone inside their
	// batch's transaction, the rest of the batch going on.
	Undone uint64
	// Replays counts transactions rolled back because one of their updates
	// panicked (or could not be undone), the updates that had succeeded in
	// them running again.
	Replays uint64
	// MaxBatch is the largest batch committed.
	MaxBatch int
	// Elapsed is the time since the store was opened: with UpdateTime and
	// CommitTime, how busy the writer is.
	Elapsed time.Duration
	// UpdateTime is the writer's time running update functions (replays
	// included); CommitTime its time committing them (page writes and
	// fsyncs included).
	UpdateTime, CommitTime time.Duration
	// WriteTime is the part of CommitTime spent writing pages and syncing
	// the file (bbolt's own measure).
	WriteTime time.Duration
	// PageBytes is the size of the pages written (every page a
	// transaction touches is written whole).
	PageBytes int64
	// FreePages and FreelistBytes describe the file's free list, which
	// every commit writes out when the store does not log (Open).
	FreePages, FreelistBytes int
	// LogBytes is what the write-ahead log wrote (wal.go), LogSyncs its
	// fdatasyncs and LogSyncTime their time (part of CommitTime).
	LogBytes    int64
	LogSyncs    int64
	LogSyncTime time.Duration
	// Checkpoints counts the checkpoints completed, and Replayed the log's
	// records replayed when the store was opened.
	Checkpoints int64
	Replayed    int
}

type writeReq struct {
	fn func(*Tx) error
	// done receives the outcome once the update is committed and fsynced
	// (or refused).
	done chan error
	// applied, for Apply, is closed once the update is applied and the
	// batch is about to commit; nil for Update.
	applied chan struct{}
}

// Commit is the durability of an update that Apply returned early from.
type Commit struct {
	done <-chan error
	once sync.Once
	err  error
}

// Wait returns once the update is committed and fsynced (nil), or the
// commit failed (the store is then broken). It may be called any number of
// times, from any goroutine.
func (c *Commit) Wait() error {
	c.once.Do(func() { c.err = <-c.done })
	return c.err
}

// Open opens (or creates) the database at path and starts its writer. A
// store that was not closed cleanly is recovered from its log first
// (wal.go).
func Open(path string, opts Options) (*Store, error) {
	dir := filepath.Dir(path)
	if err := mkdirAllDurable(dir); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	faults, err := faultsFromEnv(path)
	if err != nil {
		return nil, err
	}
	ck, recovering, err := readCheckpoint(walDir(path))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if recovering {
		if err := lockedRestoreMeta(path, ck); err != nil {
			return nil, err
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      2 * time.Second,
		NoSync:       true, // until the log is started (startLog)
		FreelistType: bolt.FreelistMapType,
		// While the store logs, a checkpoint's pin keeps the pages freed
		// since from reuse, so the free list grows between checkpoints:
		// written with every commit, it would cost more and more. It is
		// written once, at a clean close (stopLog); opened after a
		// crash, bbolt finds the free pages by walking the file.
		NoFreelistSync: walMapBytes > 0,
		// The file grows without a sync of its own: a checkpoint's
		// fdatasync makes its size durable with its pages (and bbolt's
		// own syncs, when the store does not log, do too).
		NoGrowSync:      walMapBytes > 0,
		InitialMmapSize: walMapBytes,
	})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("open store %s: %w (is a gateway already running?)", path, ErrLocked)
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{
		db:        db,
		path:      path,
		maxBatch:  opts.MaxBatch,
		pace:      opts.Pace,
		now:       opts.Now,
		onCommit:  opts.OnCommit,
		onFailure: opts.OnFailure,
		faults:    faults,
		reqs:      make(chan *writeReq, 4096),
		closing:   make(chan struct{}),
		writerEnd: make(chan struct{}),
		opened:    time.Now(),
		hot:       newHotCache(),
	}
	if s.maxBatch <= 0 {
		s.maxBatch = DefaultMaxBatch
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.pace == 0 {
		s.pace = DefaultPace
	}
	s.foldAt = defaultFoldAt
	fail := func(err error) (*Store, error) {
		s.closeLog()
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if recovering {
		// The checkpoint's pages stay as they are on disk until the
		// replay is synced: a crash in the middle of it recovers from
		// the same checkpoint again.
		if s.pin, err = db.Begin(false); err != nil {
			return fail(err)
		}
		if _, s.stats.Replayed, err = replay(db, walDir(path), ck); err != nil {
			return fail(err)
		}
	}
	// A store already set up is only read: no commit, nothing to sync.
	var ready bool
	err = db.View(func(btx *bolt.Tx) error {
		if ready = setUp(btx); ready {
			s.logKeys = logKeys(btx)
		}
		return nil
	})
	dirty := recovering || !ready
	if err == nil && !ready {
		err = db.Update(func(btx *bolt.Tx) error {
			if err := createBuckets(btx); err != nil {
				return err
			}
			s.logKeys = logKeys(btx)
			return nil
		})
	}
	if err != nil {
		return fail(err)
	}
	if recovering {
		// The file holds everything the log did once synced: the old log
		// goes first (its space too, on a full disk), then a new one
		// starts.
		if err := db.Sync(); err != nil {
			return fail(err)
		}
		if err := removeLog(walDir(path)); err != nil {
			return fail(err)
		}
		s.pin.Rollback()
		s.pin = nil
	}
	// The planted bug "nosync" (fault.go) syncs nothing, as NoSync does.
	noSync := opts.NoSync || s.faults.noSync()
	if walMapBytes > 0 && roomToLog(dir) {
		// startLog syncs the directory (the file's name with the log's).
		// What Open itself committed is synced even under the planted
		// bug "nosync", which is about the writer's commits.
		err = s.startLog(noSync, dirty && !opts.NoSync, !opts.NoSync)
	} else {
		// No room to map the file ahead, or little space left (wal.go):
		// bbolt's own syncs.
		db.NoSync, db.NoFreelistSync, db.NoGrowSync = noSync, false, false
		if err = db.Update(func(*bolt.Tx) error { return nil }); err == nil {
			err = db.Sync()
		}
		// bbolt syncs the file it creates, not its name: sync the
		// directory, or a power cut could take the whole store with it.
		if err == nil {
			err = syncDir(dir)
		}
	}
	if err != nil {
		return fail(err)
	}
	go s.writer()
	return s, nil
}

// Path is the file the store lives in.
func (s *Store) Path() string { return s.path }

// Close stops the writer after the updates already submitted, and closes
// the file: synced, and without its log (wal.go), unless the store broke.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.stopWriter()
		err = s.stopLog(s.broken.Load() == nil)
		if cerr := s.db.Close(); err == nil {
			err = cerr
		}
	})
	return err
}

// stopWriter refuses new updates and waits for the writer to commit the
// ones submitted, and stop.
func (s *Store) stopWriter() {
	s.closeMu.Lock()
	s.closed = true
	s.closeMu.Unlock()
	close(s.closing)
	<-s.writerEnd
}

// Update runs fn in a write transaction, grouped with concurrent updates.
// fn must have no effect outside the transaction: it may run twice when a
// neighbour in its batch panics, and its writes count only if Update
// returns nil. An error from fn (or a panic) takes back fn's writes alone.
func (s *Store) Update(ctx context.Context, fn func(*Tx) error) error {
	req := &writeReq{fn: fn, done: make(chan error, 1)}
	if err := s.submit(ctx, req); err != nil {
		return err
	}
	// Once submitted, the update is committed or refused whatever the
	// caller's context says: the answer must not be lost.
	return <-req.done
}

// Apply runs fn in a write transaction like Update, but returns as soon as
// fn's writes are applied and its batch is about to commit, without waiting
// for the commit and its fsync; the Commit it returns waits for those. An
// error from fn is returned at once, as from Update (nothing was written).
// Until the commit, fn's writes are invisible to View, and an update
// submitted after Apply returned lands in the same commit or a later one:
// whoever waits for that later update's durability waits for fn's too.
func (s *Store) Apply(ctx context.Context, fn func(*Tx) error) (*Commit, error) {
	req := &writeReq{fn: fn, done: make(chan error, 1), applied: make(chan struct{})}
	if err := s.submit(ctx, req); err != nil {
		return nil, err
	}
	c := &Commit{done: req.done}
	select {
	case <-req.applied:
		return c, nil
	case err := <-req.done:
		c.once.Do(func() { c.err = err })
		select {
		case <-req.applied:
			// Applied, and its commit ended before this looked: the
			// commit's outcome, failure included, comes with Wait.
			return c, nil
		default:
		}
		// Refused (fn failed, or the store did) before being applied.
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// Expect counts a caller in flight (until done, which may be called more
// than once): one that is about to submit an update, or has submitted
// one and will soon submit another. When the writer wakes with at most
// half of the callers in flight queued, it waits for more, at most
// Options.Pace, before it commits: one commit (its page writes and
// fsyncs) then pays for more updates. A lone caller is never waited for.
func (s *Store) Expect() (done func()) {
	if s.pace <= 0 {
		return func() {}
	}
	var left atomic.Bool
	s.coming.Add(1)
	return func() {
		if left.CompareAndSwap(false, true) {
			s.coming.Add(-1)
		}
	}
}

// submit queues a request for the writer.
func (s *Store) submit(ctx context.Context, req *writeReq) error {
	if p := s.broken.Load(); p != nil {
		return *p
	}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return holon.ErrClosed
	}
	// The writer runs until Close has taken the write lock, so this send
	// cannot block forever.
	select {
	case s.reqs <- req:
	case <-ctx.Done():
		s.closeMu.RUnlock()
		return ctx.Err()
	}
	s.closeMu.RUnlock()
	return nil
}

// View runs fn in a read-only transaction, which sees the last durable
// commit and never waits for the writer.
func (s *Store) View(fn func(*Tx) error) error {
	return s.read(func(btx *bolt.Tx, pend *pending) error { return fn(&Tx{btx: btx, now: s.now, pend: pend}) })
}

// Stats returns the write path's counters.
func (s *Store) Stats() Stats {
	s.statsMu.Lock()
	st := s.stats
	s.statsMu.Unlock()
	st.Elapsed = time.Since(s.opened)
	db := s.db.Stats()
	st.WriteTime = db.TxStats.GetWriteTime()
	st.PageBytes = db.TxStats.GetPageAlloc()
	st.FreePages, st.FreelistBytes = db.FreePageN+db.PendingPageN, db.FreelistInuse
	return st
}

// Size is the size of the database file in bytes.
func (s *Store) Size() int64 {
	var n int64
	_ = s.read(func(btx *bolt.Tx, _ *pending) error { n = btx.Size(); return nil })
	return n
}

// writer is the one goroutine that writes. It takes whatever updates are
// queued when it is free (at most maxBatch), so a lone update commits at once
// and a crowd shares one fsync; when at most half of the callers in flight
// (Expect) are queued, it waits for the others, at most Options.Pace (await).
func (s *Store) writer() {
	defer close(s.writerEnd)
	batch := make([]*writeReq, 0, s.maxBatch)
	for {
		var first *writeReq
		select {
		case first = <-s.reqs:
		case <-s.closing:
			// Nothing can be submitted any more: commit what is queued,
			// in batches, then stop.
			select {
			case first = <-s.reqs:
			default:
				return
			}
		}
		batch = s.await(s.drain(append(batch[:0], first)))
		s.commit(batch)
	}
}

// await adds to batch, for at most s.pace, the updates of the callers in
// flight (Expect) when the batch holds at most half of them; it returns
// batch at once otherwise.
func (s *Store) await(batch []*writeReq) []*writeReq {
	if s.pace <= 0 || len(batch) >= s.maxBatch {
		return batch
	}
	if s.coming.Load() < int64(2*len(batch)) {
		return batch
	}
	timer := time.NewTimer(s.pace)
	defer timer.Stop()
	for len(batch) < s.maxBatch && int64(len(batch)) < s.coming.Load() {
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
			continue
		case <-timer.C:
		case <-s.closing:
		}
		break
	}
	// What was queued meanwhile goes too.
	return s.drain(batch)
}

// drain adds to batch the updates queued, up to s.maxBatch.
func (s *Store) drain(batch []*writeReq) []*writeReq {
	for len(batch) < s.maxBatch {
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// commit runs a batch in one transaction, in order, and commits it. An
// update that fails is undone inside the transaction (undo.go) and gets its
// error; the others go on, and none of them runs again. An update that
// panics, or whose writes could not be undone, leaves the transaction in a
// state nothing can vouch for: it is rolled back, the panicking update gets
// its error, the updates before it that succeeded run again alone in a new
// transaction and commit (they succeeded on that very state), and the ones
// after it, which had not run, make the next transaction. So a failing
// update runs once and every other update at most twice (one that succeeds
// and then fails on the same state may run once more), and the writer's
// work grows with the batch, never with its square.
func (s *Store) commit(batch []*writeReq) {
	// The updates of this transaction are batch[:n].
	n := len(batch)
	for len(batch) > 0 {
		if p := s.broken.Load(); p != nil {
			for _, r := range batch {
				r.done <- *p
			}
			return
		}
		kept, stop, stopErr, err := s.runTx(batch[:n])
		if stop < 0 {
			s.committed(kept, err)
			batch = batch[n:]
			n = len(batch)
			continue
		}
		batch[stop].done <- stopErr
		rest := batch[stop+1:]
		if len(kept) > 0 {
			s.statsMu.Lock()
			s.stats.Replays++
			s.statsMu.Unlock()
		}
		batch = append(kept, rest...)
		if n = len(kept); n == 0 {
			n = len(batch)
		}
	}
}

// runTx runs reqs in one transaction and commits it. It answers each update
// that failed and was undone, and returns the ones kept, in order. When an
// update panics or cannot be undone, it rolls the transaction back and
// returns at once: stop is its index in reqs and stopErr its error, and
// kept the updates before it that succeeded (stop is -1 otherwise). err is
// the transaction's own failure (the disk's) when it did not stop.
func (s *Store) runTx(reqs []*writeReq) (kept []*writeReq, stop int, stopErr, err error) {
	stop = -1
	kept = make([]*writeReq, 0, len(reqs))
	logged := s.logKeys
	start := time.Now()
	ran := start
	appended, size, logAt := 0, int64(0), time.Time{}
	var wtx *Tx
	var btx *bolt.Tx
	body := func() error {
		// An empty cache with each transaction (the writer's one, reset):
		// a rolled-back one's rows are dropped.
		// While the store logs, its hot and derived rows may wait in the log and
		// in the pending set for a later commit to put them into bbolt
		// (deferred.go).
		if s.wcache == nil {
			s.wcache = newWriteCache(s.hot)
		}
		s.wcache.reset(s.hot)
		tx := &Tx{btx: btx, now: s.now, writable: true, cache: s.wcache, pend: s.pend,
			deferring: s.wal != nil && !s.flushNext && (s.pend == nil || s.pend.n < maxPending)}
		wtx = tx
		if s.wal != nil {
			s.redo.reset()
			tx.redo = s.redo
		}
		defer func() { ran = time.Now() }()
		for i, r := range reqs {
			tx.beginUpdate()
			err := runUpdate(r.fn, tx)
			if err == nil {
				err = tx.overdrafts.Check(tx.Account)
			}
			if err == nil {
				err = tx.limits.Check(tx.budgetOf)
			}
			tx.overdrafts.Reset()
			tx.limits.Reset()
			if err == nil {
				kept = append(kept, r)
				continue
			}
			if _, panicked := err.(*updatePanic); !panicked {
				uerr := tx.undoUpdate()
				if uerr == nil {
					s.statsMu.Lock()
					s.stats.Undone++
					s.statsMu.Unlock()
					r.done <- err
					continue
				}
				err = fmt.Errorf("%w (and undoing it: %v)", err, uerr)
			}
			stop, stopErr = i, err
			return err
		}
		if len(kept) == 0 {
			// Every update failed and was undone: nothing to commit.
			return errNothingKept
		}
		tx.endUpdates()
		if err := tx.writeBack(); err != nil {
			return err
		}
		logged = s.logKeys + tx.logged
		if logged >= s.foldAt {
			if _, err := foldLog(btx); err != nil {
				return err
			}
			if tx.redo != nil {
				tx.redo.fold()
			}
			logged = 0
		}
		// Nothing can undo an update of this transaction now but a failed
		// commit, which breaks the store: Apply's callers go on.
		for _, r := range kept {
			if r.applied != nil {
				close(r.applied)
			}
		}
		if s.commitFault != nil {
			if err := s.commitFault(); err != nil {
				return err
			}
		}
		if err := s.faults.beforeCommit(); err != nil {
			return err
		}
		if s.wal == nil {
			return nil
		}
		// The record is written to the log, and its fdatasync runs
		// while bbolt commits (without a sync): no reader sees the
		// commit until both are done (publish). The log's write and
		// sync are the commit's time.
		logAt = time.Now()
		size = btx.Size()
		if err := s.wal.write(uint64(btx.ID()), tx.redo); err != nil {
			return err
		}
		appended = len(tx.redo.b)
		return nil
	}
	if btx, err = s.db.Begin(true); err == nil {
		err = runBody(btx, body)
		switch {
		case err != nil:
			_ = btx.Rollback()
		case appended > 0:
			serr, cerr := s.wal.commitWhileSyncing(btx)
			// A failed sync wins: bbolt committed what the log may not
			// hold, no reader sees it (it is never published), and the
			// store breaks.
			err = cmp.Or(serr, cerr)
		default:
			err = btx.Commit()
		}
	}
	if err != nil && appended > 0 {
		// bbolt failed to commit what the log holds, or the log's sync
		// failed: the callers hear of a failure, so a restart must not
		// replay it (if it can still be taken back).
		if terr := s.wal.takeBack(appended); terr != nil {
			err = fmt.Errorf("%w (and taking its record back from the log: %v)", err, terr)
		}
	}
	if err == nil && len(kept) > 0 {
		if logged < s.logKeys {
			s.folds++
		}
		s.logKeys = logged
		s.committedPending(wtx)
		err = s.faults.afterCommit()
		if err == nil && s.wal != nil {
			// Durable: readers see it from now on.
			err = s.publishLatest()
		}
		if err == nil {
			// Readers see it: before its callers hear.
			s.published(wtx)
		}
		if err == nil && s.wal != nil {
			// The batch is durable whatever this says: a failed
			// checkpoint breaks the store for what comes after.
			if cerr := s.afterLogged(size); cerr != nil {
				s.fail(cerr)
			}
		}
	}
	end := time.Now()
	s.statsMu.Lock()
	if !logAt.IsZero() {
		ran = logAt
	}
	s.stats.UpdateTime += ran.Sub(start)
	s.stats.CommitTime += end.Sub(ran)
	if s.wal != nil {
		s.stats.LogBytes, s.stats.LogSyncs, s.stats.LogSyncTime = s.wal.bytes, s.wal.syncs, s.wal.syncTime
	}
	s.statsMu.Unlock()
	if stop >= 0 {
		return kept, stop, stopErr, nil
	}
	if err == errNothingKept {
		err = nil
	}
	return kept, -1, nil, err
}

// runBody runs body in btx, rolling btx back if body panics (the panic
// goes on), as bbolt's own Update does.
func runBody(btx *bolt.Tx, body func() error) (err error) {
	done := false
	defer func() {
		if !done {
			_ = btx.Rollback()
		}
	}()
	err = body()
	done = true
	return err
}

// committed answers the updates of a transaction that committed (err nil)
// or failed to (the store is then broken).
func (s *Store) committed(reqs []*writeReq, err error) {
	if len(reqs) == 0 {
		return
	}
	if err != nil {
		// The transaction failed, not an update: the disk did.
		broken := fmt.Errorf("%w: %w", holon.ErrBroken, err)
		s.broken.Store(&broken)
		if s.onFailure != nil {
			s.onFailure(err)
		}
	} else {
		// Counted before the callers hear: whoever reads Stats after an
		// update returned sees its commit.
		s.statsMu.Lock()
		s.stats.Commits++
		s.stats.Updates += uint64(len(reqs))
		s.stats.MaxBatch = max(s.stats.MaxBatch, len(reqs))
		s.statsMu.Unlock()
		if s.onCommit != nil {
			s.onCommit(len(reqs))
		}
	}
	for _, r := range reqs {
		r.done <- err
	}
}

// errNothingKept rolls back a transaction whose every update was undone.
var errNothingKept = errors.New("no update kept")

// updatePanic is the error of an update that panicked.
type updatePanic struct{ msg string }

func (p *updatePanic) Error() string { return p.msg }

// runUpdate runs fn, turning a panic into an *updatePanic.
func runUpdate(fn func(*Tx) error, tx *Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &updatePanic{fmt.Sprintf("update panicked: %v\n%s", p, debug.Stack())}
		}
	}()
	return fn(tx)
}
