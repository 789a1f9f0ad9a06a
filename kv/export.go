package kv

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	"holon.dev/holon"
)

// Raw access to the whole store, for backups, restores and offline checks.
// Export reads every bucket of the file as of one read transaction; Restore
// (export_restore.go) writes a copy into a new file in batches and renames
// it into place once the whole copy checked out. Neither
// interprets the rows: a bucket added by any part of the product is copied
// like the others.

// ErrNotEmpty is returned by Restore when the target database holds rows.
var ErrNotEmpty = errors.New("target database is not empty")

// ErrLocked is returned when another process (a running gateway) holds the
// database file.
var ErrLocked = errors.New("database is held by another process")

// BucketInfo describes one bucket: its name, how many rows it holds and its
// sequence (the last id NextSequence gave: receipts, approvals, journal rows,
// call events, app logs).
type BucketInfo struct {
	Name     string
	Rows     int64
	Sequence uint64
}

// Snapshot describes what Export is about to stream.
type Snapshot struct {
	// Schema is the store's layout version (SchemaVersion).
	Schema uint64
	// Buckets lists every bucket of the file, in name order.
	Buckets []BucketInfo
	// SizeHint is roughly how many bytes the rows take (0: unknown). Restore
	// maps the new file that large from the start, so that it does not
	// remap the file again and again as it grows.
	SizeHint int64
}

// Row is one key/value pair of a bucket.
type Row struct {
	Bucket     string
	Key, Value []byte
}

// Export streams every row of every bucket, in bucket then key order, as
// of one moment: a consistent copy taken while writes go on (the
// approvals index, derived, is left out). begin gets
// the snapshot's description before the first row; row gets each row,
// whose slices are valid only during the call. Memory does not grow with
// the database.
//
// A serving store is first copied whole, as it stands, into a temporary
// file next to it (bbolt's Tx.WriteTo: one short read transaction, a
// sequential copy of the file), and the rows are streamed from the copy,
// which is removed after. Streaming from the serving store itself would
// hold its read transaction for as long as the consumer takes (seconds to
// minutes for a large store): every page the writer frees meanwhile stays
// reserved for that reader, so the free list that every commit writes and
// sorts grows with each commit (87,000 pages by the end of a backup of a
// million settled calls), and commits slow down for everyone (settled
// calls' p99 went from 45 to 360 ms during that backup; from the copy, the
// free list stays under 5,000 pages). The copy needs room for one more
// store on its file system; without it (or on a read-only store) the rows
// come from the store's own read transaction.
func (s *Store) Export(begin func(Snapshot) error, row func(bucket string, key, value []byte) error) error {
	if s.db.IsReadOnly() {
		return exportDB(s.read, begin, row)
	}
	cp, pend, done, err := s.copyFile()
	if err != nil {
		return exportDB(s.read, begin, row)
	}
	defer done()
	return exportDB(func(fn func(*bolt.Tx, *pending) error) error {
		return cp.View(func(btx *bolt.Tx) error { return fn(btx, pend) })
	}, begin, row)
}

// copyFile copies the store, as of one read transaction, into a temporary
// file next to it and opens the copy read-only; done closes and removes it.
// pend is the rows pending at that transaction, which the copy
// lacks (deferred.go).
func (s *Store) copyFile() (cp *bolt.DB, pend *pending, done func(), err error) {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, nil, nil, err
	}
	tmp := filepath.Join(filepath.Dir(s.path), "."+filepath.Base(s.path)+".export-"+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, nil, nil, err
	}
	err = s.read(func(btx *bolt.Tx, p *pending) error {
		pend = p
		_, err := btx.WriteTo(f)
		return err
	})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		cp, err = bolt.Open(tmp, 0o600, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second, FreelistType: bolt.FreelistMapType})
	}
	if err != nil {
		os.Remove(tmp)
		return nil, nil, nil, err
	}
	// Unlinked at once: nothing is left behind if the process dies, and
	// once the copy is closed its pages still in the page cache are
	// dropped rather than written to the disk.
	os.Remove(tmp)
	return cp, pend, func() { cp.Close() }, nil
}

// exportDB streams every row of a store from one read transaction, begun
// by view, with the rows pending in it.
func exportDB(view func(func(*bolt.Tx, *pending) error) error, begin func(Snapshot) error, row func(bucket string, key, value []byte) error) error {
	return view(func(btx *bolt.Tx, pend *pending) error {
		tx := &Tx{btx: btx, pend: pend}
		snap := Snapshot{}
		if v := btx.Bucket(bucketMeta).Get([]byte("schema")); len(v) == 8 {
			snap.Schema = binary.BigEndian.Uint64(v)
		}
		if snap.Schema == FileFormat || snap.Schema == FileFormatLogging {
			// The rows are those of SchemaVersion: the file's format
			// changed where the index keeps its keys, and says whether
			// a log is beside it, not the rows.
			snap.Schema = SchemaVersion
		}
		err := btx.ForEach(func(name []byte, b *bolt.Bucket) error {
			switch {
			case bytes.Equal(name, bucketApprovalsByMand) || bytes.Equal(name, bucketRollups):
				// Derived from the approvals (Restore writes it again), or
				// from the receipts (the engine rebuilds them).
				return nil
			case bytes.Equal(name, bucketReceiptsLog):
				// Streamed as rows of receipts_by_mandate.
				return nil
			case bytes.Equal(name, bucketReceiptsByMand):
				snap.Buckets = append(snap.Buckets, BucketInfo{Name: string(name), Rows: receiptIndexRows(btx), Sequence: b.Sequence()})
				return nil
			}
			snap.Buckets = append(snap.Buckets, BucketInfo{Name: string(name), Rows: tx.rows(name, b), Sequence: b.Sequence()})
			return nil
		})
		if err != nil {
			return err
		}
		if err := begin(snap); err != nil {
			return err
		}
		schemaRow := u64(snap.Schema)
		for _, info := range snap.Buckets {
			switch info.Name {
			case string(bucketReceiptsByMand):
				err := forEachReceiptIndexed(btx, func(k []byte) error { return row(info.Name, k, nil) })
				if err != nil {
					return err
				}
				continue
			}
			c := tx.cursor([]byte(info.Name))
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if v == nil {
					return fmt.Errorf("export %s/%x: nested buckets are not part of the store's layout", info.Name, k)
				}
				if info.Name == string(bucketMeta) && string(k) == "schema" {
					v = schemaRow
				}
				if err := row(info.Name, k, v); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// OpenReadOnly opens an existing store without writing to it, for backups
// and checks of a stopped gateway's file. Many readers may share the file;
// a running gateway holds it alone, which makes OpenReadOnly fail with
// ErrLocked. Update on the returned store returns ErrClosed.
func OpenReadOnly(path string) (*Store, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if logPending(path) {
		// Not closed cleanly: recovered from its log (wal.go) first.
		if err := recoverStore(path); err != nil {
			if errors.Is(err, ErrLocked) {
				return nil, fmt.Errorf("open store %s: %w (a running gateway holds its store: take a live copy through the gateway with holon backup --url, and check or restore that)", path, ErrLocked)
			}
			return nil, err
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second, FreelistType: bolt.FreelistMapType})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("open store %s: %w (a running gateway holds its store: take a live copy through the gateway with holon backup --url, and check or restore that)", path, ErrLocked)
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	err = db.View(func(btx *bolt.Tx) error {
		for _, name := range allBuckets {
			if btx.Bucket(name) == nil && !laterBuckets[string(name)] {
				return fmt.Errorf("bucket %s is missing: not a Holon store, or one from an older gateway (open it once with holon serve)", name)
			}
		}
		if v := btx.Bucket(bucketMeta).Get([]byte("schema")); !readableFormat(v) {
			return fmt.Errorf("store schema version %x, this gateway reads %d, %d and %d", v, SchemaVersion, FileFormat, FileFormatLogging)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// No writer runs: the store is closed to updates from the start.
	s := &Store{db: db, path: path, maxBatch: DefaultMaxBatch, now: time.Now, closed: true,
		reqs: make(chan *writeReq), closing: make(chan struct{}), writerEnd: make(chan struct{})}
	close(s.writerEnd)
	return s, nil
}

// Iteration over whole buckets, for offline checks (holon verify). Each
// reads every row of its bucket: never called by a serving gateway.

// ForEachReceipt calls fn for every receipt, oldest first.
func (tx *Tx) ForEachReceipt(fn func(*holon.Receipt) error) error {
	return tx.btx.Bucket(bucketReceipts).ForEach(func(k, v []byte) error {
		r := new(holon.Receipt)
		if err := json.Unmarshal(v, r); err != nil {
			return fmt.Errorf("decode receipt %x: %w", k, err)
		}
		if seq, ok := holon.ReceiptSeq(r.ID); !ok || !bytes.Equal(u64(seq), k) {
			return fmt.Errorf("receipt %q is stored under key %x", r.ID, k)
		}
		return fn(r)
	})
}

// ForEachApproval calls fn for every approval, oldest first.
func (tx *Tx) ForEachApproval(fn func(*holon.Approval) error) error {
	return tx.btx.Bucket(bucketApprovals).ForEach(func(k, v []byte) error {
		a := new(holon.Approval)
		if err := json.Unmarshal(v, a); err != nil {
			return fmt.Errorf("decode approval %x: %w", k, err)
		}
		return fn(a)
	})
}

// ForEachEvent calls fn for every call event, oldest first.
func (tx *Tx) ForEachEvent(fn func(*holon.Event) error) error {
	return tx.btx.Bucket(bucketEvents).ForEach(func(k, v []byte) error {
		ev := new(holon.Event)
		if err := json.Unmarshal(v, ev); err != nil {
			return fmt.Errorf("decode event %x: %w", k, err)
		}
		return fn(ev)
	})
}

// ForEachRecord calls fn for every agent's measured record.
func (tx *Tx) ForEachRecord(fn func(agent string, r holon.Record) error) error {
	if err := tx.flush(); err != nil {
		return err
	}
	return tx.forEach(bucketRecords, func(k, v []byte) error {
		var r holon.Record
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("decode record %s: %w", k, err)
		}
		return fn(string(k), r)
	})
}

// ForEachBudget calls fn for every mandate's budget.
func (tx *Tx) ForEachBudget(fn func(mandate string, b holon.Budget) error) error {
	if err := tx.flush(); err != nil {
		return err
	}
	return tx.forEach(bucketBudgets, func(k, v []byte) error {
		var b holon.Budget
		if err := json.Unmarshal(v, &b); err != nil {
			return fmt.Errorf("decode budget %s: %w", k, err)
		}
		return fn(string(k), b)
	})
}

// ForEachWindowBudget calls fn for every budget window of every mandate,
// in mandate then window order.
func (tx *Tx) ForEachWindowBudget(fn func(mandate, window string, b holon.Budget) error) error {
	if err := tx.flush(); err != nil {
		return err
	}
	// Nothing in a store from before budget windows, opened read-only.
	return tx.forEach(bucketBudgetWindows, func(k, v []byte) error {
		mandate, window, ok := bytes.Cut(k, []byte{0})
		if !ok {
			return fmt.Errorf("budget window key %q has no 0x00", k)
		}
		var b holon.Budget
		if err := json.Unmarshal(v, &b); err != nil {
			return fmt.Errorf("decode budget window %q: %w", k, err)
		}
		return fn(string(mandate), string(window), b)
	})
}

// ForEachCounter calls fn for every counter.
func (tx *Tx) ForEachCounter(fn func(name string, n uint64) error) error {
	if err := tx.flush(); err != nil {
		return err
	}
	return tx.forEach(bucketCounters, func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("counter %s: %d bytes, want 8", k, len(v))
		}
		return fn(string(k), binary.BigEndian.Uint64(v))
	})
}

// JournalHeads are the heads of the journal's chains, sorted: this
// store's own (chain 0, "journal_head") and those recorded by other
// writers, kept when a backup of a shared database was restored here
// (holon.JournalHeadKey). An empty journal has none.
func (tx *Tx) JournalHeads() []string {
	var heads []string
	if own, _ := tx.journalHead(); own != "" {
		heads = append(heads, own)
	}
	c := tx.btx.Bucket(bucketMeta).Cursor()
	prefix := []byte(holon.JournalHeadsFrom)
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if holon.IsJournalHeadKey(string(k)) && len(v) > 0 {
			heads = append(heads, string(v))
		}
	}
	slices.Sort(heads)
	return heads
}

// JournalKeys is the number of idempotency keys recorded.
func (tx *Tx) JournalKeys() int64 { return int64(tx.btx.Bucket(bucketJournalKeys).Stats().KeyN) }

// Sequence is the last id a bucket handed out (0 for an unknown bucket).
func (tx *Tx) Sequence(bucket string) uint64 {
	if b := tx.btx.Bucket([]byte(bucket)); b != nil {
		return b.Sequence()
	}
	return 0
}

// HasReceipt reports whether a receipt exists, without decoding it.
func (tx *Tx) HasReceipt(id string) bool {
	seq, ok := holon.ReceiptSeq(id)
	return ok && tx.btx.Bucket(bucketReceipts).Get(u64(seq)) != nil
}

// EntrySeq is the journal row recorded for an idempotency key.
func (tx *Tx) EntrySeq(key string) (uint64, bool) {
	v := tx.btx.Bucket(bucketJournalKeys).Get([]byte(key))
	if len(v) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(v), true
}

// BucketNames lists the buckets a backup holds, in name order: every
// bucket of the store but the approvals index, which is derived. Another
// store exporting the same records (the PostgreSQL one) lists these.
func BucketNames() []string {
	var out []string
	for _, b := range allBuckets {
		if !bytes.Equal(b, bucketApprovalsByMand) {
			out = append(out, string(b))
		}
	}
	slices.Sort(out)
	return out
}
