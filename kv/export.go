package kv

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Raw access to the whole store, for backups, restores and offline checks.
// Export reads every bucket of the file in one read transaction; Restore
// writes a copy into an empty database in one write transaction. Neither
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
	// maps the new file that large from the start: growing the map in the
	// middle of its one transaction would copy every row written so far.
	SizeHint int64
}

// Row is one key/value pair of a bucket.
type Row struct {
	Bucket     string
	Key, Value []byte
}

// Export streams every row of every bucket, in bucket then key order, from
// one read transaction: a consistent copy taken while writes go on. begin
// gets the snapshot's description before the first row; row gets each row,
// whose slices are valid only during the call. Memory does not grow with
// the database.
//
// A long export delays the store's writer only when the file must grow past
// its memory map (bbolt remaps then, which waits for readers).
func (s *Store) Export(begin func(Snapshot) error, row func(bucket string, key, value []byte) error) error {
	return s.db.View(func(btx *bolt.Tx) error {
		snap := Snapshot{}
		if v := btx.Bucket(bucketMeta).Get([]byte("schema")); len(v) == 8 {
			snap.Schema = binary.BigEndian.Uint64(v)
		}
		err := btx.ForEach(func(name []byte, b *bolt.Bucket) error {
			snap.Buckets = append(snap.Buckets, BucketInfo{Name: string(name), Rows: int64(b.Stats().KeyN), Sequence: b.Sequence()})
			return nil
		})
		if err != nil {
			return err
		}
		if err := begin(snap); err != nil {
			return err
		}
		for _, info := range snap.Buckets {
			c := btx.Bucket([]byte(info.Name)).Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if v == nil {
					return fmt.Errorf("export %s/%x: nested buckets are not part of the store's layout", info.Name, k)
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
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second, FreelistType: bolt.FreelistMapType})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("open store %s: %w (a running gateway holds its store: take a live copy through the gateway with holon backup --url, and check or restore that)", path, ErrLocked)
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	err = db.View(func(btx *bolt.Tx) error {
		for _, name := range allBuckets {
			if btx.Bucket(name) == nil {
				return fmt.Errorf("bucket %s is missing: not a Holon store, or one from an older gateway (open it once with holon serve)", name)
			}
		}
		v := btx.Bucket(bucketMeta).Get([]byte("schema"))
		if len(v) != 8 || binary.BigEndian.Uint64(v) != SchemaVersion {
			return fmt.Errorf("store schema version %x, this gateway reads %d", v, SchemaVersion)
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

// Restore writes a copy of a store into the database at path, in one write
// transaction: every row next returns, then each bucket's sequence. The
// target must be new (a missing or zero-length file) or an empty store;
// anything else is refused with ErrNotEmpty. next returns io.EOF after the
// last row; any other error from it, a row of a bucket snap does not list,
// rows out of key order, or counts that differ from snap abort the restore,
// leaving the target as it was: a new target is written under a temporary
// name and renamed into place only once committed.
func Restore(path string, snap Snapshot, next func() (Row, error)) error {
	if snap.Schema != SchemaVersion {
		return fmt.Errorf("restore: the copy has store schema %d, this gateway reads %d", snap.Schema, SchemaVersion)
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) || (err == nil && fi.Mode().IsRegular() && fi.Size() == 0):
		return restoreNew(path, snap, next)
	case err != nil:
		return fmt.Errorf("restore into %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("restore into %s: not a regular file", path)
	}
	db, err := bolt.Open(path, 0o600, restoreOptions(snap))
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return fmt.Errorf("restore into %s: %w (stop the gateway first)", path, ErrLocked)
		}
		return fmt.Errorf("restore into %s: %w", path, err)
	}
	defer db.Close()
	err = db.Update(func(btx *bolt.Tx) error {
		if err := checkEmpty(btx); err != nil {
			return err
		}
		// The copy brings its own schema row.
		if meta := btx.Bucket(bucketMeta); meta != nil {
			if err := meta.Delete([]byte("schema")); err != nil {
				return err
			}
		}
		return load(btx, snap, next)
	})
	if err != nil {
		return fmt.Errorf("restore into %s: %w", path, err)
	}
	return nil
}

// restoreNew loads the copy into a temporary file next to path, and renames
// it into place once committed and synced.
func restoreNew(path string, snap Snapshot, next func() (Row, error)) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("restore into %s: %w", path, err)
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+filepath.Base(path)+".restore-"+hex.EncodeToString(rnd[:]))
	db, err := bolt.Open(tmp, 0o600, restoreOptions(snap))
	if err != nil {
		return fmt.Errorf("restore into %s: %w", path, err)
	}
	err = db.Update(func(btx *bolt.Tx) error { return load(btx, snap, next) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore into %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// restoreOptions maps the target once, with room to spare: pages cost
// address space, not memory, until written.
func restoreOptions(snap Snapshot) *bolt.Options {
	return &bolt.Options{Timeout: 2 * time.Second, FreelistType: bolt.FreelistMapType,
		InitialMmapSize: int(min(max(snap.SizeHint, 0), 1<<40) * 2)}
}

// checkEmpty accepts a store that holds nothing but its schema version.
func checkEmpty(btx *bolt.Tx) error {
	var held []string
	err := btx.ForEach(func(name []byte, b *bolt.Bucket) error {
		n := b.Stats().KeyN
		if bytes.Equal(name, bucketMeta) {
			if v := b.Get([]byte("schema")); v != nil {
				n--
			}
		}
		if n > 0 {
			held = append(held, fmt.Sprintf("%d %s", n, name))
		} else if b.Sequence() > 0 {
			held = append(held, fmt.Sprintf("%s sequence at %d", name, b.Sequence()))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(held) > 0 {
		return fmt.Errorf("%w (it holds %s): restore only into a new or empty database", ErrNotEmpty, strings.Join(held, ", "))
	}
	return nil
}

// load writes the rows and sequences into btx, checking them against snap.
func load(btx *bolt.Tx, snap Snapshot, next func() (Row, error)) error {
	want := map[string]BucketInfo{}
	for _, info := range snap.Buckets {
		if info.Name == "" {
			return errors.New("the copy lists a bucket without a name")
		}
		if _, dup := want[info.Name]; dup {
			return fmt.Errorf("the copy lists bucket %s twice", info.Name)
		}
		want[info.Name] = info
	}
	for _, name := range allBuckets {
		if _, err := btx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	got := map[string]int64{}
	var cur *bolt.Bucket
	var curName string
	var last []byte
	for {
		r, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if r.Bucket != curName || cur == nil {
			if _, ok := want[r.Bucket]; !ok {
				return fmt.Errorf("row in bucket %q, which the copy does not list", r.Bucket)
			}
			if got[r.Bucket] > 0 {
				return fmt.Errorf("rows of bucket %s are not together: the copy is out of order", r.Bucket)
			}
			if cur, err = btx.CreateBucketIfNotExists([]byte(r.Bucket)); err != nil {
				return fmt.Errorf("bucket %s: %w", r.Bucket, err)
			}
			// Rows come in key order: full pages, as an append-only
			// bucket would be written.
			cur.FillPercent = 1.0
			curName, last = r.Bucket, nil
		}
		if len(r.Key) == 0 {
			return fmt.Errorf("bucket %s: a row with an empty key", r.Bucket)
		}
		if last != nil && bytes.Compare(r.Key, last) <= 0 {
			return fmt.Errorf("bucket %s: key %q is out of order or repeated", r.Bucket, r.Key)
		}
		if err := cur.Put(r.Key, r.Value); err != nil {
			return fmt.Errorf("bucket %s: %w", r.Bucket, err)
		}
		last = append(last[:0], r.Key...)
		got[r.Bucket]++
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		info := want[name]
		if got[name] != info.Rows {
			return fmt.Errorf("bucket %s: the copy announces %d rows, %d came", name, info.Rows, got[name])
		}
		b, err := btx.CreateBucketIfNotExists([]byte(name))
		if err != nil {
			return err
		}
		if err := b.SetSequence(info.Sequence); err != nil {
			return err
		}
	}
	if v := btx.Bucket(bucketMeta).Get([]byte("schema")); len(v) != 8 || binary.BigEndian.Uint64(v) != SchemaVersion {
		return fmt.Errorf("the copy's meta/schema row is %x, want schema %d", v, SchemaVersion)
	}
	return nil
}

// Iteration over whole buckets, for offline checks (holon verify). Each
// reads every row of its bucket: never called by a serving gateway.

// ForEachReceipt calls fn for every receipt, oldest first.
func (tx *Tx) ForEachReceipt(fn func(*Receipt) error) error {
	return tx.btx.Bucket(bucketReceipts).ForEach(func(k, v []byte) error {
		r := new(Receipt)
		if err := json.Unmarshal(v, r); err != nil {
			return fmt.Errorf("decode receipt %x: %w", k, err)
		}
		if seq, ok := ReceiptSeq(r.ID); !ok || !bytes.Equal(u64(seq), k) {
			return fmt.Errorf("receipt %q is stored under key %x", r.ID, k)
		}
		return fn(r)
	})
}

// ForEachApproval calls fn for every approval, oldest first.
func (tx *Tx) ForEachApproval(fn func(*Approval) error) error {
	return tx.btx.Bucket(bucketApprovals).ForEach(func(k, v []byte) error {
		a := new(Approval)
		if err := json.Unmarshal(v, a); err != nil {
			return fmt.Errorf("decode approval %x: %w", k, err)
		}
		return fn(a)
	})
}

// ForEachEvent calls fn for every call event, oldest first.
func (tx *Tx) ForEachEvent(fn func(*Event) error) error {
	return tx.btx.Bucket(bucketEvents).ForEach(func(k, v []byte) error {
		ev := new(Event)
		if err := json.Unmarshal(v, ev); err != nil {
			return fmt.Errorf("decode event %x: %w", k, err)
		}
		return fn(ev)
	})
}

// ForEachRecord calls fn for every agent's measured record.
func (tx *Tx) ForEachRecord(fn func(agent string, r Record) error) error {
	if err := tx.flush(); err != nil {
		return err
	}
	return tx.btx.Bucket(bucketRecords).ForEach(func(k, v []byte) error {
		var r Record
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("decode record %s: %w", k, err)
		}
		return fn(string(k), r)
	})
}

// ForEachBudget calls fn for every mandate's budget.
func (tx *Tx) ForEachBudget(fn func(mandate string, b Budget) error) error {
	if err := tx.flush(); err != nil {
		return err
	}
	return tx.btx.Bucket(bucketBudgets).ForEach(func(k, v []byte) error {
		var b Budget
		if err := json.Unmarshal(v, &b); err != nil {
			return fmt.Errorf("decode budget %s: %w", k, err)
		}
		return fn(string(k), b)
	})
}

// ForEachCounter calls fn for every counter.
func (tx *Tx) ForEachCounter(fn func(name string, n uint64) error) error {
	if err := tx.flush(); err != nil {
		return err
	}
	return tx.btx.Bucket(bucketCounters).ForEach(func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("counter %s: %d bytes, want 8", k, len(v))
		}
		return fn(string(k), binary.BigEndian.Uint64(v))
	})
}

// JournalHead is the hash of the last journal row ("" for an empty journal).
func (tx *Tx) JournalHead() string { return string(tx.btx.Bucket(bucketMeta).Get(metaJournalHead)) }

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
	seq, ok := ReceiptSeq(id)
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
