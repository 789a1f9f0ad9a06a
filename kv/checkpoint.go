package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	"holon.dev/holon"
)

// The store's side of the write-ahead log (wal.go): starting it, the
// checkpoints, and stopping it.

// ckptJob is a checkpoint to make durable: pin holds its transaction's
// pages.
type ckptJob struct {
	c   checkpoint
	pin *bolt.Tx
}

// startLog begins logging on a file that holds every commit so far (it
// syncs it when dirty, something having been committed since it was
// opened, to be synced, and when it writes the file's format and
// syncOpen): a checkpoint of the current transaction, in a log of its
// own.
// It syncs the store's directory, which makes the file's name durable
// too.
func (s *Store) startLog(noSync, dirty, syncOpen bool) error {
	dir := walDir(s.path)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := syncDir(filepath.Dir(s.path)); err != nil {
		return err
	}
	f, err := os.Open(s.path)
	if err != nil {
		return err
	}
	s.file, s.pageSize = f, s.db.Info().PageSize
	old, err := segments(dir)
	if err != nil {
		return err
	}
	seg := uint64(1)
	if len(old) > 0 {
		seg = old[len(old)-1] + 1
	}
	// The file says it is logging (FileFormatLogging) before the log
	// holds anything, durably: a gateway that does not know the log
	// refuses it from now on, until a clean close.
	err = s.db.Update(func(btx *bolt.Tx) error {
		if v := btx.Bucket(bucketMeta).Get([]byte("schema")); len(v) == 8 && binary.BigEndian.Uint64(v) == FileFormatLogging {
			return nil
		}
		dirty = dirty || syncOpen
		return setFormat(btx, FileFormatLogging)
	})
	if err != nil {
		return err
	}
	if dirty {
		if err := s.db.Sync(); err != nil {
			return err
		}
	}
	pin, err := s.db.Begin(false)
	if err != nil {
		return err
	}
	s.pin = pin
	meta, err := readMeta(s.file, s.pageSize, uint64(pin.ID()))
	if err != nil {
		return err
	}
	segFile, err := os.OpenFile(filepath.Join(dir, segmentName(seg)), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	s.wal = &wal{dir: dir, noSync: noSync, seg: seg, f: segFile, last: time.Now()}
	// The checkpoint's directory sync makes the new segment's name
	// durable too.
	if err := writeCheckpoint(dir, checkpoint{txid: uint64(pin.ID()), first: seg, meta: meta}, noSync); err != nil {
		return err
	}
	for _, n := range old {
		os.Remove(filepath.Join(dir, segmentName(n)))
	}
	s.redo = newRedoBuf()
	if err := s.publishLatest(); err != nil {
		return err
	}
	s.ckpts = make(chan ckptJob, 1)
	s.ckptEnd = make(chan struct{})
	go s.checkpointer()
	return nil
}

// afterLogged runs in the writer after each commit it logged: it begins a
// checkpoint when one is due, or stops logging when the file nears the
// end of its map (size is its size before the commit).
func (s *Store) afterLogged(size int64) error {
	if size+walMapSpare > int64(walMapBytes) {
		return s.stopLog(true)
	}
	if s.ckptBusy.Load() {
		return nil
	}
	st := s.db.Stats()
	pages := st.TxStats.GetPageAlloc()
	if !s.wal.due(pages) {
		return nil
	}
	if s.pend != nil {
		// The checkpoint's commit must hold every row the log holds
		// before it, pending ones too (deferred.go): the next commit puts
		// them into bbolt, and the checkpoint begins after it.
		s.flushNext = true
		return nil
	}
	if !roomToLog(filepath.Dir(s.path)) {
		return s.stopLog(true)
	}
	pin, err := s.db.Begin(false)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	txid := uint64(pin.ID())
	meta, err := readMeta(s.file, s.pageSize, txid)
	if err == nil {
		err = s.wal.rotate()
	}
	if err != nil {
		pin.Rollback()
		return fmt.Errorf("checkpoint: %w", err)
	}
	s.wal.pagesAt = pages
	s.ckptBusy.Store(true)
	s.ckpts <- ckptJob{c: checkpoint{txid: txid, first: s.wal.seg, meta: meta}, pin: pin}
	return nil
}

// checkpointer makes the checkpoints the writer begins durable, one at a
// time.
func (s *Store) checkpointer() {
	defer close(s.ckptEnd)
	for job := range s.ckpts {
		s.ckptMu.Lock()
		err := s.checkpoint(job)
		s.ckptMu.Unlock()
		if err != nil {
			s.fail(fmt.Errorf("checkpoint: %w", err))
		}
		s.ckptBusy.Store(false)
	}
}

// checkpoint syncs the file, which then holds job's transaction, records
// that, and frees what the previous checkpoint kept: its pin, and the
// segments before job's (the newest becomes the next spare).
func (s *Store) checkpoint(job ckptJob) error {
	w := s.wal
	if !w.noSync {
		if err := s.db.Sync(); err != nil {
			job.pin.Rollback()
			return err
		}
	}
	if err := writeCheckpoint(w.dir, job.c, w.noSync); err != nil {
		job.pin.Rollback()
		return err
	}
	if s.pin != nil {
		s.pin.Rollback()
	}
	s.pin = job.pin
	s.statsMu.Lock()
	s.stats.Checkpoints++
	s.statsMu.Unlock()
	segs, err := segments(w.dir)
	if err != nil {
		return err
	}
	spare := job.c.first + 1
	spareName := filepath.Join(w.dir, segmentName(spare))
	recycled := false
	for i := len(segs) - 1; i >= 0; i-- {
		n := segs[i]
		if n >= job.c.first {
			continue
		}
		name := filepath.Join(w.dir, segmentName(n))
		if !recycled {
			recycled = true
			if err := os.Rename(name, spareName); err == nil {
				continue
			}
		}
		os.Remove(name)
	}
	f, err := prepareSegment(spareName, w.noSync)
	if err != nil {
		return err
	}
	if !w.noSync {
		if err := syncDir(w.dir); err != nil {
			f.Close()
			return err
		}
	}
	w.spareMu.Lock()
	w.spare, w.spareSeg = f, spare
	w.spareMu.Unlock()
	return nil
}

// stopLog ends logging: once a checkpoint in progress is done, it syncs
// the file and removes the log (when clean), or leaves the log for the
// next start to recover from (a broken store's). The store then commits
// with bbolt's own syncs, if it goes on.
func (s *Store) stopLog(clean bool) error {
	if s.wal == nil {
		return s.closeLog()
	}
	if clean && s.pend != nil {
		// The rows still pending go into bbolt (its commits are not
		// synced while the store logs: the sync below makes them durable),
		// while readers still see them in the snapshot.
		err := s.db.Update(func(btx *bolt.Tx) error { return (&Tx{btx: btx, pend: s.pend}).materialize() })
		if err != nil {
			return err
		}
		s.snapMu.Lock()
		s.pend = nil
		s.snapMu.Unlock()
	}
	// Readers begin their own transactions again: bbolt, which syncs
	// before its meta page from now on, may need to grow its map, which
	// waits for every read transaction to end.
	s.publish(nil)
	if s.ckpts != nil {
		close(s.ckpts)
		<-s.ckptEnd
		s.ckpts = nil
	}
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	var err error
	if clean {
		// A commit writes the free list (see Open), so that the next
		// start reads it instead of walking the file, and the format of
		// a file that holds everything: any gateway of that format opens
		// it.
		s.db.NoFreelistSync = false
		err = s.db.Update(func(btx *bolt.Tx) error { return setFormat(btx, FileFormat) })
		if err == nil && !s.wal.noSync {
			err = s.db.Sync()
		}
		if err == nil {
			err = removeLog(s.wal.dir)
		}
	}
	s.db.NoSync, s.db.NoGrowSync = s.wal.noSync, false
	s.wal.close()
	s.wal = nil
	if cerr := s.closeLog(); err == nil {
		err = cerr
	}
	return err
}

// closeLog lets go of the log's pin and file handles.
func (s *Store) closeLog() error {
	s.publish(nil)
	if s.pin != nil {
		s.pin.Rollback()
		s.pin = nil
	}
	if s.wal != nil {
		s.wal.close()
		s.wal = nil
	}
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
	return nil
}

// fail breaks the store: every later update is refused.
func (s *Store) fail(err error) {
	broken := fmt.Errorf("%w: %w", holon.ErrBroken, err)
	if s.broken.CompareAndSwap(nil, &broken) && s.onFailure != nil {
		s.onFailure(err)
	}
}

// lockedRestoreMeta writes a checkpoint's meta page over the file's, while
// holding the file's lock (as bbolt takes it), so that no running gateway
// has it open.
func lockedRestoreMeta(path string, c checkpoint) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	defer f.Close()
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return fmt.Errorf("open store %s: %w (is a gateway already running?)", path, ErrLocked)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if err := restoreMeta(path, c); err != nil {
		return fmt.Errorf("open store %s: recover from its log: %w", path, err)
	}
	return nil
}

// recoverStore opens the store at path, which recovers it from its log,
// and closes it, which leaves a plain file.
func recoverStore(path string) error {
	s, err := Open(path, Options{})
	if err != nil {
		return err
	}
	return s.Close()
}

// roomToLog reports whether dir's filesystem has room for the log
// (walMinFree), or cannot tell.
func roomToLog(dir string) bool {
	n, ok := freeBytes(dir)
	return !ok || n >= walMinFree
}
