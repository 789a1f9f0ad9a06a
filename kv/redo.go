package kv

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// What a write transaction of the writer changed, as the log (log.go)
// keeps it: every put, delete and sequence change, in order, and the fold
// of the receipt index's log (which is deterministic, so it is logged as
// one operation). Replaying a record on the state it was written on gives
// the state its transaction committed.
//
// A record's operations, each: its kind (one byte), the bucket's name, and
// then for a put the key and the value, for a delete the key, for a
// sequence the bucket's new sequence; names, keys and values as a uvarint
// length and the bytes, a sequence as a uvarint.
const (
	opPut byte = 1 + iota
	opDel
	opSeq
	opFold
)

// redoBuf collects a write transaction's operations. Its first
// recordHeader bytes are the record's header, filled in when it is logged.
type redoBuf struct {
	b []byte
	// mark is where the current update's operations start: an update
	// undone (undo.go) takes them back with it.
	mark int
	// names are the buckets' names by bbolt's handle (a writable
	// transaction hands out one handle per bucket).
	names map[*bolt.Bucket][]byte
}

func newRedoBuf() *redoBuf {
	return &redoBuf{b: make([]byte, recordHeader, 16<<10)}
}

// reset empties the buffer for a new transaction.
func (r *redoBuf) reset() {
	r.b = r.b[:recordHeader]
	r.mark = recordHeader
	r.names = nil
}

// known records that b is the bucket called name.
func (r *redoBuf) known(b *bolt.Bucket, name []byte) {
	if r.names == nil {
		r.names = make(map[*bolt.Bucket][]byte, 24)
	}
	r.names[b] = name
}

// name is the name of bucket b, a top-level bucket of btx: the one the
// transaction asked for under it (Tx.bkt). A bucket had some other way is
// looked for among all of btx's, opening each.
func (r *redoBuf) name(btx *bolt.Tx, b *bolt.Bucket) ([]byte, error) {
	if n, ok := r.names[b]; ok {
		return n, nil
	}
	var found []byte
	err := btx.ForEach(func(name []byte, bk *bolt.Bucket) error {
		if bk == b {
			found = append([]byte(nil), name...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, errors.New("redo log: a write to a bucket that is not a top-level bucket of its transaction")
	}
	r.known(b, found)
	return found, nil
}

func (r *redoBuf) bytes(p []byte) {
	r.b = binary.AppendUvarint(r.b, uint64(len(p)))
	r.b = append(r.b, p...)
}

func (r *redoBuf) put(btx *bolt.Tx, b *bolt.Bucket, key, v []byte) error {
	name, err := r.name(btx, b)
	if err != nil {
		return err
	}
	r.b = append(r.b, opPut)
	r.bytes(name)
	r.bytes(key)
	r.bytes(v)
	return nil
}

func (r *redoBuf) del(btx *bolt.Tx, b *bolt.Bucket, key []byte) error {
	name, err := r.name(btx, b)
	if err != nil {
		return err
	}
	r.b = append(r.b, opDel)
	r.bytes(name)
	r.bytes(key)
	return nil
}

// seq logs a bucket's new sequence (name is the bucket's).
func (r *redoBuf) seq(name []byte, n uint64) error {
	r.b = append(r.b, opSeq)
	r.bytes(name)
	r.b = binary.AppendUvarint(r.b, n)
	return nil
}

// fold logs a fold of the receipt index's log, which replaces that
// bucket: the handles known so far are forgotten.
func (r *redoBuf) fold() {
	r.b = append(r.b, opFold)
	r.names = nil
}

// ops is the operations logged (after the header).
func (r *redoBuf) ops() []byte { return r.b[recordHeader:] }

// Tx's side: every logged write of the writer's transactions (undo.go)
// records itself here too, when the transaction has a redo buffer.

func (tx *Tx) redoPut(b *bolt.Bucket, key, v []byte) error {
	if tx.redo == nil {
		return nil
	}
	return tx.redo.put(tx.btx, b, key, v)
}

func (tx *Tx) redoDel(b *bolt.Bucket, key []byte) error {
	if tx.redo == nil {
		return nil
	}
	return tx.redo.del(tx.btx, b, key)
}

// applyOps replays a record's operations in btx.
func applyOps(btx *bolt.Tx, ops []byte) error {
	r := opReader{b: ops}
	for len(r.b) > 0 {
		op := r.b[0]
		r.b = r.b[1:]
		if op == opFold {
			if _, err := foldLog(btx); err != nil {
				return err
			}
			continue
		}
		name := r.bytes()
		if r.err != nil {
			return r.err
		}
		b := btx.Bucket(name)
		if b == nil {
			return fmt.Errorf("redo log: bucket %q is missing", name)
		}
		b.FillPercent = fillPercent(name)
		var err error
		switch op {
		case opPut:
			k, v := r.bytes(), r.bytes()
			if r.err != nil {
				return r.err
			}
			err = b.Put(k, v)
		case opDel:
			k := r.bytes()
			if r.err != nil {
				return r.err
			}
			err = b.Delete(k)
		case opSeq:
			n := r.uvarint()
			if r.err != nil {
				return r.err
			}
			err = b.SetSequence(n)
		default:
			return fmt.Errorf("redo log: unknown operation %d", op)
		}
		if err != nil {
			return fmt.Errorf("redo log: %s: %w", name, err)
		}
	}
	return nil
}

type opReader struct {
	b   []byte
	err error
}

func (r *opReader) uvarint() uint64 {
	n, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.err = errors.New("redo log: a record's operations are cut short")
		r.b = nil
		return 0
	}
	r.b = r.b[k:]
	return n
}

func (r *opReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errors.New("redo log: a record's operations are cut short")
		r.b = nil
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}
