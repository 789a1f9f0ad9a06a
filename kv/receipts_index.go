package kv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// The receipts of a mandate, newest first, without reading anyone else's.
//
// receipts_by_mandate holds a key (mandate, 0x00, sequence) per receipt.
// Written as each receipt is made, those keys land all over the index (one
// run of keys per mandate), so each settlement of a commit made bbolt
// rewrite a page of its own: more than half of a commit's pages under 64
// mandates. So a new receipt goes to receipts_by_mandate_log instead
// (sequence → mandate, appended in order: a commit's receipts share a page
// or two), and the writer folds the log into the index once it holds
// foldAt keys, in one commit, sorted: each mandate's run of new keys then
// shares its pages. Reads merge the two; Export streams them merged, as
// the rows of receipts_by_mandate, so a backup is what it was before the
// log (the log is not a bucket of the backup, and Restore writes every key
// into the index). holon verify checks that the two together list every
// receipt under its mandate, once, and nothing else.

// bucketReceiptsLog is the index's log: receipt sequence → mandate id.
var bucketReceiptsLog = []byte("receipts_by_mandate_log")

// FileFormat is the version of the file's layout: 2 since the index log.
// It is what the file's meta/schema row says; a backup keeps saying
// SchemaVersion, the layout of its rows, which the log did not change.
// Open upgrades a store of format 1 (create the empty log); a gateway from
// before the log refuses a store of format 2, which it would misread.
const FileFormat = 2

// FileFormatLogging is what the file's meta/schema row says while the
// store logs (wal.go): its write-ahead log beside it may hold commits the
// file lacks, and only a gateway that replays the log may open it. A
// gateway from before the log reads format 2 and would open the file
// without them after a crash: it refuses format 3 instead. Open writes it
// (synced) before the log's first record; a clean close, and the store's
// return to bbolt's own syncs, write FileFormat back once the file holds
// everything.
const FileFormatLogging = 3

// defaultFoldAt is how many keys the log holds before the writer folds
// it: a read of a mandate's receipts reads the log's keys (a few hundred
// microseconds for 4,096) on top of its page of the index.
const defaultFoldAt = 4096

// checkFormat checks the file's meta/schema row, writes it in a new store,
// and upgrades a store of format 1 to FileFormat.
func checkFormat(btx *bolt.Tx) error {
	meta := btx.Bucket(bucketMeta)
	v := meta.Get([]byte("schema"))
	format := uint64(0)
	if v != nil {
		if len(v) != 8 {
			return fmt.Errorf("database schema row %x is not a version", v)
		}
		format = binary.BigEndian.Uint64(v)
	}
	switch format {
	case 0, SchemaVersion:
		// A new store, or one of format 1: the log starts empty.
		if _, err := btx.CreateBucketIfNotExists(bucketReceiptsLog); err != nil {
			return fmt.Errorf("create bucket %s: %w", bucketReceiptsLog, err)
		}
		return meta.Put([]byte("schema"), u64(FileFormat))
	case FileFormat, FileFormatLogging:
		if btx.Bucket(bucketReceiptsLog) == nil {
			return fmt.Errorf("database of format %d has no bucket %s", format, bucketReceiptsLog)
		}
		return nil
	}
	return fmt.Errorf("database schema version %d, this gateway reads %d (and upgrades %d)", format, FileFormat, SchemaVersion)
}

// readableFormat reports whether a read-only open can read a file whose
// meta/schema row is v: format 1 (its log is empty), FileFormat, or
// FileFormatLogging (its write-ahead log, if any, replayed by then).
func readableFormat(v []byte) bool {
	if len(v) != 8 {
		return false
	}
	f := binary.BigEndian.Uint64(v)
	return f == SchemaVersion || f == FileFormat || f == FileFormatLogging
}

// setFormat writes the file's format in its meta/schema row.
func setFormat(btx *bolt.Tx, format uint64) error {
	return btx.Bucket(bucketMeta).Put([]byte("schema"), u64(format))
}

// indexReceipt adds a new receipt to the index's log.
func (tx *Tx) indexReceipt(mandate string, seq uint64) error {
	b := tx.bkt(bucketReceiptsLog)
	b.FillPercent = 1.0
	v := tx.arenaBytes(len(mandate))
	copy(v, mandate)
	if err := tx.putNew(b, u64(seq), v); err != nil {
		return err
	}
	tx.logged++
	return nil
}

// arenaBytes carves n bytes from the transaction's arena.
func (tx *Tx) arenaBytes(n int) []byte {
	if cap(tx.arena)-len(tx.arena) < n {
		tx.arena = make([]byte, 0, min(max(2*cap(tx.arena), arenaMin, n), max(arenaMax, n)))
	}
	start := len(tx.arena)
	tx.arena = tx.arena[:start+n]
	return tx.arena[start : start+n : start+n]
}

// foldLog moves the log's keys into the index, sorted, and empties the
// log. The writer runs it after a batch's updates, outside the undo log:
// it changes no record, only where the index keeps its keys.
func foldLog(btx *bolt.Tx) (int, error) {
	if btx.Bucket(bucketReceiptsLog) == nil {
		return 0, nil
	}
	keys, err := loggedKeys(btx)
	if err != nil {
		return 0, err
	}
	idx := btx.Bucket(bucketReceiptsByMand)
	for _, k := range keys {
		if err := idx.Put(k, nil); err != nil {
			return 0, fmt.Errorf("fold the receipt index log: %w", err)
		}
	}
	if err := btx.DeleteBucket(bucketReceiptsLog); err != nil {
		return 0, err
	}
	_, err = btx.CreateBucket(bucketReceiptsLog)
	return len(keys), err
}

// loggedKeys is the log's keys as index keys, sorted (none when a store
// opened read-only has no log).
func loggedKeys(btx *bolt.Tx) ([][]byte, error) {
	b := btx.Bucket(bucketReceiptsLog)
	if b == nil {
		return nil, nil
	}
	var keys [][]byte
	err := b.ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			return fmt.Errorf("receipt index log key %x is not a sequence number", k)
		}
		keys = append(keys, mandateIndexKey(string(v), binary.BigEndian.Uint64(k)))
		return nil
	})
	slices.SortFunc(keys, bytes.Compare)
	return keys, err
}

// logKeys counts the log's keys (at most a fold's worth), at Open.
func logKeys(btx *bolt.Tx) int {
	if b := btx.Bucket(bucketReceiptsLog); b != nil {
		return b.Stats().KeyN
	}
	return 0
}

// receiptRun walks one mandate's receipts newest first: the index's run of
// keys and the log's keys of that mandate, merged.
type receiptRun struct {
	prefix []byte
	idx    *bolt.Cursor
	log    *bolt.Cursor
	// idxSeq and logSeq are the heads (0: that side is done).
	idxSeq, logSeq uint64
}

// newReceiptRun starts at the newest receipt of mandate at or below seq
// start.
func (tx *Tx) newReceiptRun(mandate string, start uint64) *receiptRun {
	r := &receiptRun{prefix: append([]byte(mandate), 0)}
	r.idx = tx.bkt(bucketReceiptsByMand).Cursor()
	k, _ := r.idx.Seek(mandateIndexKey(mandate, start))
	if k == nil || !bytes.Equal(k, mandateIndexKey(mandate, start)) {
		k, _ = r.idx.Prev()
	}
	r.idxHead(k)
	if b := tx.bkt(bucketReceiptsLog); b != nil {
		r.log = b.Cursor()
		k, v := r.log.Seek(u64(start))
		if k == nil || binary.BigEndian.Uint64(k) > start {
			k, v = r.log.Prev()
		}
		r.logHead(k, v, mandate)
	}
	return r
}

func (r *receiptRun) idxHead(k []byte) {
	r.idxSeq = 0
	if k != nil && bytes.HasPrefix(k, r.prefix) && len(k) == len(r.prefix)+8 {
		r.idxSeq = binary.BigEndian.Uint64(k[len(r.prefix):])
	}
}

// logHead moves back from k to the log's newest key of the mandate.
func (r *receiptRun) logHead(k, v []byte, mandate string) {
	for ; k != nil; k, v = r.log.Prev() {
		if string(v) == mandate {
			r.logSeq = binary.BigEndian.Uint64(k)
			return
		}
	}
	r.logSeq = 0
}

// next returns the newest receipt not returned yet (0 when none is left).
func (r *receiptRun) next() uint64 {
	switch {
	case r.idxSeq == 0 && r.logSeq == 0:
		return 0
	case r.idxSeq >= r.logSeq:
		seq := r.idxSeq
		k, _ := r.idx.Prev()
		r.idxHead(k)
		return seq
	default:
		seq := r.logSeq
		k, v := r.log.Prev()
		r.logHead(k, v, string(r.prefix[:len(r.prefix)-1]))
		return seq
	}
}

// ForEachReceiptIndexed calls fn for every key of the receipt index (its
// log's keys included), in mandate then sequence order, for holon verify
// and Export.
func (tx *Tx) ForEachReceiptIndexed(fn func(mandate string, seq uint64) error) error {
	return forEachReceiptIndexed(tx.btx, func(k []byte) error {
		return fn(string(k[:len(k)-9]), binary.BigEndian.Uint64(k[len(k)-8:]))
	})
}

// forEachReceiptIndexed calls fn for every index key, the log's merged in
// at their place, in key order. The log's keys are few (at most a fold's
// worth): they are sorted in memory.
func forEachReceiptIndexed(btx *bolt.Tx, fn func(key []byte) error) error {
	logged, err := loggedKeys(btx)
	if err != nil {
		return err
	}
	c := btx.Bucket(bucketReceiptsByMand).Cursor()
	k, _ := c.First()
	for k != nil || len(logged) > 0 {
		var key []byte
		switch {
		case k == nil:
			key, logged = logged[0], logged[1:]
		case len(logged) > 0 && bytes.Compare(logged[0], k) < 0:
			key, logged = logged[0], logged[1:]
		case len(logged) > 0 && bytes.Equal(logged[0], k):
			return fmt.Errorf("receipt index key %q is both in the index and in its log", k)
		default:
			key = k
			k, _ = c.Next()
		}
		if len(key) < 9 || key[len(key)-9] != 0 {
			return fmt.Errorf("receipt index key %q is not mandate, 0x00, sequence", key)
		}
		if err := fn(key); err != nil {
			return err
		}
	}
	return nil
}

// receiptIndexRows is how many keys the index and its log hold.
func receiptIndexRows(btx *bolt.Tx) int64 {
	n := int64(btx.Bucket(bucketReceiptsByMand).Stats().KeyN)
	if b := btx.Bucket(bucketReceiptsLog); b != nil {
		n += int64(b.Stats().KeyN)
	}
	return n
}
