package kv

import (
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The log's syncer: the goroutine that makes the writer's batches durable
// and answers their callers, so that the writer goes on to the next batch
// while a batch's record is being synced.
//
// The writer writes a batch's record to the log and hands the batch to
// the syncer (loggedBatch), which starts the fdatasync at once; meanwhile
// bbolt commits the batch (without a sync), and the writer begins a read
// transaction on that commit (the batch's snapshot), says the batch is
// ready, and takes the next one. Once the sync has returned and the batch
// is ready, the syncer publishes the snapshot (readers see the batch from
// then on) and answers the callers. Batches are synced, published and
// answered in the order they were committed, and one fdatasync covers
// every record written before it began: the batches queued while one sync
// ran share the next.
//
// A later batch is committed on top of an earlier one whose record may
// not be synced yet. That is safe: the log is replayed in order, so a
// record that survives a crash has every record before it; a reader sees
// neither until both are synced; and if a sync fails, the store breaks
// and no caller of a batch after it hears of success.

// loggedBatch is a batch whose record is written to the log.
type loggedBatch struct {
	// f is the segment the record went to.
	f *os.File
	// ready is closed by the writer once bbolt committed the batch (reqs
	// are its updates, snap a read transaction on that commit) or failed
	// to, or the batch otherwise failed (err).
	ready chan struct{}
	reqs  []*writeReq
	snap  *bolt.Tx
	err   error
	// retire, on an entry of its own, is a segment the log moved on from,
	// to close once what was written to it is synced.
	retire *os.File
}

// startSyncer starts the syncer, for a log synced unless noSync.
func (s *Store) startSyncer(noSync bool) {
	s.syncNoSync = noSync
	s.syncQ = make(chan *loggedBatch, 64)
	s.syncEnd = make(chan struct{})
	go s.syncer(s.syncQ, s.syncEnd)
}

// endSyncer waits until the syncer has answered every batch handed to it,
// and stops it. Only the writer hands it batches: it is called from the
// writer, or once the writer has stopped.
func (s *Store) endSyncer() {
	if s.syncQ == nil {
		return
	}
	close(s.syncQ)
	<-s.syncEnd
	s.syncQ = nil
}

func (s *Store) syncer(q <-chan *loggedBatch, end chan<- struct{}) {
	defer close(end)
	group := make([]*loggedBatch, 0, cap(q))
	for first := range q {
		group = append(group[:0], first)
	more:
		for {
			select {
			case l, ok := <-q:
				if !ok {
					break more
				}
				group = append(group, l)
			default:
				break more
			}
		}
		s.settle(group, s.syncGroup(group))
	}
}

// syncGroup fdatasyncs the segments the group's records were written to
// (every record was written before it was handed over).
func (s *Store) syncGroup(group []*loggedBatch) error {
	if s.syncNoSync {
		return nil
	}
	var last *os.File
	for _, l := range group {
		if l.f == nil || l.f == last {
			continue
		}
		last = l.f
		start := time.Now()
		err := error(nil)
		if s.beforeSync != nil {
			err = s.beforeSync()
		}
		if err == nil {
			err = datasync(l.f)
		}
		if err != nil {
			return fmt.Errorf("sync the store's log: %w", err)
		}
		d := time.Since(start)
		s.statsMu.Lock()
		s.stats.LogSyncs++
		s.stats.LogSyncTime += d
		s.statsMu.Unlock()
	}
	return nil
}

// settle publishes the snapshot of the group's last batch that
// succeeded, then answers the callers, in order. A failed sync breaks the
// store: the group's batches fail, and so does every batch after them
// (their records may be synced, but a replay stops at the first record
// missing).
func (s *Store) settle(group []*loggedBatch, syncErr error) {
	if syncErr != nil && s.syncFailed == nil {
		s.syncFailed = syncErr
		s.fail(syncErr)
	}
	var pub *bolt.Tx
	for _, l := range group {
		if l.retire != nil {
			l.retire.Close()
			continue
		}
		<-l.ready
		if l.err == nil {
			l.err = s.syncFailed
		}
		if l.snap == nil {
			continue
		}
		if l.err != nil {
			_ = l.snap.Rollback()
			continue
		}
		if pub != nil {
			_ = pub.Rollback()
		}
		pub = l.snap
	}
	if pub != nil {
		s.publish(pub)
	}
	for _, l := range group {
		if l.retire == nil {
			s.committed(l.reqs, l.err)
		}
	}
}
