package kv

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
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

// restoreBatchBytes is how many bytes of rows one write transaction of a
// restore carries. A bbolt write transaction keeps every page it touches in
// memory until it commits, so this bounds the restore's heap (a few times
// this figure) whatever the size of the copy.
const restoreBatchBytes = 8 << 20

// Restore writes a copy of a store into the database at path: every row
// next returns, then each bucket's sequence. The target must be new (a
// missing or zero-length file) or an empty store; anything else is refused
// with ErrNotEmpty.
//
// The copy is written into a temporary file next to path, in transactions
// of a bounded size (memory stays flat however large the copy), without
// fsync; once every row came, the counts matched the snapshot and the
// schema row checked out, the file is synced and renamed into place. So a
// restore is all or nothing: next returning an error other than io.EOF
// after the last row, a row of a bucket snap does not list, rows out of key
// order, or counts that differ from snap abort it, leaving the target as it
// was and no temporary file behind. An existing empty target stays locked
// against a gateway starting on it until the copy replaces it.
func Restore(path string, snap Snapshot, next func() (Row, error)) error {
	return restore(path, snap, next, restoreBatchBytes)
}

func restore(path string, snap Snapshot, next func() (Row, error), batchBytes int) error {
	if snap.Schema != SchemaVersion {
		return fmt.Errorf("restore: the copy has store schema %d, this gateway reads %d", snap.Schema, SchemaVersion)
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) || (err == nil && fi.Mode().IsRegular() && fi.Size() == 0):
	case err != nil:
		return fmt.Errorf("restore into %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("restore into %s: not a regular file", path)
	default:
		// An existing store: it must be empty, and stays held (no gateway
		// can open it) until the copy replaces it. One not closed cleanly
		// is recovered from its log first (wal.go).
		if logPending(path) {
			if err := recoverStore(path); err != nil {
				return fmt.Errorf("restore into %s: %w", path, err)
			}
		}
		old, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second, FreelistType: bolt.FreelistMapType})
		if err != nil {
			if errors.Is(err, bolt.ErrTimeout) {
				return fmt.Errorf("restore into %s: %w (stop the gateway first)", path, ErrLocked)
			}
			return fmt.Errorf("restore into %s: %w", path, err)
		}
		defer old.Close()
		if err := old.View(checkEmpty); err != nil {
			return fmt.Errorf("restore into %s: %w", path, err)
		}
	}
	if err := restoreNew(path, snap, next, batchBytes); err != nil {
		return fmt.Errorf("restore into %s: %w", path, err)
	}
	return nil
}

// restoreNew loads the copy into a temporary file next to path, and renames
// it into place once complete, checked and synced.
func restoreNew(path string, snap Snapshot, next func() (Row, error), batchBytes int) error {
	dir := filepath.Dir(path)
	if err := mkdirAllDurable(dir); err != nil {
		return err
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+filepath.Base(path)+".restore-"+hex.EncodeToString(rnd[:]))
	// No fsync per batch: nobody sees the file before the rename, and it is
	// synced once, whole, before that.
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: 2 * time.Second, FreelistType: bolt.FreelistMapType,
		NoSync: true, InitialMmapSize: int(min(max(snap.SizeHint, 0), 1<<40) * 2)})
	if err != nil {
		return err
	}
	err = load(db, snap, next, batchBytes)
	if err == nil {
		err = db.Sync()
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	// The rename is the restore: durable once its directory is synced.
	return syncDir(dir)
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

// loader is a restore in progress: what the snapshot announced, what came,
// and where the rows go.
type loader struct {
	want    map[string]BucketInfo
	got     map[string]int64
	curName string
	cur     *bolt.Bucket
	last    []byte
}

// load writes the rows into db in transactions of about batchBytes, then
// the sequences, checking everything against snap.
func load(db *bolt.DB, snap Snapshot, next func() (Row, error), batchBytes int) error {
	l := &loader{want: map[string]BucketInfo{}, got: map[string]int64{}}
	for _, info := range snap.Buckets {
		if info.Name == "" {
			return errors.New("the copy lists a bucket without a name")
		}
		if _, dup := l.want[info.Name]; dup {
			return fmt.Errorf("the copy lists bucket %s twice", info.Name)
		}
		l.want[info.Name] = info
	}
	for eof := false; !eof; {
		err := db.Update(func(btx *bolt.Tx) error {
			var err error
			eof, err = l.batch(btx, next, batchBytes)
			return err
		})
		if err != nil {
			return err
		}
	}
	return db.Update(l.finish)
}

// batch writes rows into btx until about batchBytes went in or the rows
// ended (eof).
func (l *loader) batch(btx *bolt.Tx, next func() (Row, error), batchBytes int) (eof bool, err error) {
	for _, name := range allBuckets {
		if _, err := btx.CreateBucketIfNotExists(name); err != nil {
			return false, err
		}
	}
	// A bucket handle belongs to one transaction.
	l.cur = nil
	if l.curName != "" {
		l.cur = btx.Bucket([]byte(l.curName))
		l.cur.FillPercent = 1.0
	}
	for size := 0; size < batchBytes; {
		r, err := next()
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if r.Bucket != l.curName || l.cur == nil {
			if _, ok := l.want[r.Bucket]; !ok {
				return false, fmt.Errorf("row in bucket %q, which the copy does not list", r.Bucket)
			}
			if l.got[r.Bucket] > 0 {
				return false, fmt.Errorf("rows of bucket %s are not together: the copy is out of order", r.Bucket)
			}
			if l.cur, err = btx.CreateBucketIfNotExists([]byte(r.Bucket)); err != nil {
				return false, fmt.Errorf("bucket %s: %w", r.Bucket, err)
			}
			// Rows come in key order: full pages, as an append-only
			// bucket would be written.
			l.cur.FillPercent = 1.0
			l.curName, l.last = r.Bucket, nil
		}
		if len(r.Key) == 0 {
			return false, fmt.Errorf("bucket %s: a row with an empty key", r.Bucket)
		}
		if l.last != nil && bytes.Compare(r.Key, l.last) <= 0 {
			return false, fmt.Errorf("bucket %s: key %q is out of order or repeated", r.Bucket, r.Key)
		}
		if err := l.cur.Put(r.Key, r.Value); err != nil {
			return false, fmt.Errorf("bucket %s: %w", r.Bucket, err)
		}
		l.last = append(l.last[:0], r.Key...)
		l.got[r.Bucket]++
		size += len(r.Key) + len(r.Value)
	}
	return false, nil
}

// finish checks the counts and the schema row, sets the sequences and
// writes the approvals index.
func (l *loader) finish(btx *bolt.Tx) error {
	names := make([]string, 0, len(l.want))
	for name := range l.want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		info := l.want[name]
		if l.got[name] != info.Rows {
			return fmt.Errorf("bucket %s: the copy announces %d rows, %d came", name, info.Rows, l.got[name])
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
	// Every index key came in receipts_by_mandate: the file's format is
	// this code's, with an empty index log.
	if err := checkFormat(btx); err != nil {
		return err
	}
	// The copy has no approvals index: it is derived from the approvals.
	return buildApprovalIndex(btx)
}
