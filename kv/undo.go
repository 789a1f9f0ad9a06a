package kv

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// An update that fails is undone inside its batch's transaction, so that
// the updates batched with it need not run again: bbolt has no savepoints,
// so every write of a write transaction (put, del, nextSeq, cachedPut and
// the cache's flush) first logs how to take it back, and undoUpdate takes
// back, newest first, what the failing update wrote. These are the only
// writes to bbolt in a write transaction of the writer (undo_test.go checks
// the sources for any other).

// undoStep takes back one write.
type undoStep struct {
	b *bolt.Bucket
	// key and old are the key written and, when existed, the value it had
	// (bbolt's own slices, valid for the life of the transaction).
	key, old []byte
	existed  bool
	// seq, when isSeq, is the bucket's sequence before NextSequence.
	seq   uint64
	isSeq bool
	// cache, when set, is a write cache entry to restore instead; and
	// dirty, when set, marks again a cache entry a flush wrote as changed.
	cache interface{ undo() }
	dirty *bool
	// deferred says key is a row the update deferred (putDeferred).
	deferred bool
}

// logValue logs how to restore key in b as it is now.
func (tx *Tx) logValue(b *bolt.Bucket, key []byte) {
	if !tx.logging {
		return
	}
	c := tx.cursors[b]
	if c == nil {
		// One cursor per bucket and transaction: each Seek starts afresh.
		if tx.cursors == nil {
			tx.cursors = make(map[*bolt.Bucket]*bolt.Cursor, 8)
		}
		c = b.Cursor()
		tx.cursors[b] = c
	}
	k, v := c.Seek(key)
	if k != nil && bytes.Equal(k, key) {
		tx.undo = append(tx.undo, undoStep{b: b, key: k, old: v, existed: true})
		return
	}
	tx.undo = append(tx.undo, undoStep{b: b, key: key})
}

// put writes v under key in b, logged.
func (tx *Tx) put(b *bolt.Bucket, key, v []byte) error {
	if err := tx.beforeWrite(b, key); err != nil {
		return err
	}
	tx.logValue(b, key)
	if err := b.Put(key, v); err != nil {
		return err
	}
	return tx.redoPut(b, key, v)
}

// putOver is put for a key whose value the caller has just read (old,
// nil when there was none, in a bucket that holds no empty values): it
// logs that value instead of looking it up again.
func (tx *Tx) putOver(b *bolt.Bucket, key, old, v []byte) error {
	if err := tx.beforeWrite(b, key); err != nil {
		return err
	}
	if tx.logging {
		tx.undo = append(tx.undo, undoStep{b: b, key: key, old: old, existed: old != nil})
	}
	if err := b.Put(key, v); err != nil {
		return err
	}
	return tx.redoPut(b, key, v)
}

// putNew is put for a key the caller has just found absent (Get returned
// nil, and the bucket holds no empty values): it saves put's lookup of the
// old value, which the journal's appends would pay on every settlement.
func (tx *Tx) putNew(b *bolt.Bucket, key, v []byte) error {
	if err := tx.beforeWrite(b, key); err != nil {
		return err
	}
	if tx.logging {
		tx.undo = append(tx.undo, undoStep{b: b, key: key})
	}
	if err := b.Put(key, v); err != nil {
		return err
	}
	return tx.redoPut(b, key, v)
}

// del deletes key from b, logged.
func (tx *Tx) del(b *bolt.Bucket, key []byte) error {
	if err := tx.beforeWrite(b, key); err != nil {
		return err
	}
	tx.logValue(b, key)
	if err := b.Delete(key); err != nil {
		return err
	}
	return tx.redoDel(b, key)
}

// nextSeq returns the next sequence number of a bucket (1, 2, …), logged:
// an update undone gives its numbers back, so ids stay dense.
func (tx *Tx) nextSeq(bucket []byte) (uint64, error) {
	b := tx.bkt(bucket)
	if tx.logging {
		tx.undo = append(tx.undo, undoStep{b: b, seq: b.Sequence(), isSeq: true})
	}
	n, err := b.NextSequence()
	if err != nil || tx.redo == nil {
		return n, err
	}
	return n, tx.redo.seq(bucket, n)
}

// logCache logs a write cache entry that saved how it was before the
// current update changed it.
func (tx *Tx) logCache(c interface{ undo() }) {
	if tx.logging {
		tx.undo = append(tx.undo, undoStep{cache: c})
	}
}

// logFlushed logs how to mark again as changed a cache entry that a flush
// in the middle of an update wrote (and marked clean).
func (tx *Tx) logFlushed(dirty *bool) {
	if tx.logging {
		tx.undo = append(tx.undo, undoStep{dirty: dirty})
	}
}

// beginUpdate starts the undo log of the next update.
func (tx *Tx) beginUpdate() {
	if tx.undo == nil {
		tx.undo = make([]undoStep, 0, 32)
	}
	clear(tx.undo)
	tx.undo, tx.logging = tx.undo[:0], true
	tx.update++
	if tx.redo != nil {
		tx.redo.mark = len(tx.redo.b)
	}
}

// endUpdates stops the log once the last update ran: what the transaction
// writes then (the cache's flush) is never undone.
func (tx *Tx) endUpdates() { tx.undo, tx.logging = nil, false }

// undoUpdate takes back every write since beginUpdate, newest first. An
// error leaves the transaction unusable: it must be rolled back.
func (tx *Tx) undoUpdate() error {
	for i := len(tx.undo) - 1; i >= 0; i-- {
		u := tx.undo[i]
		var err error
		switch {
		case u.cache != nil:
			u.cache.undo()
		case u.dirty != nil:
			*u.dirty = true
		case u.isSeq:
			err = u.b.SetSequence(u.seq)
		case u.deferred:
			// A row the update deferred (putDeferred), its key new: out of
			// the deferred rows, or out of bbolt when a later write of
			// the transaction materialized it there.
			if _, ok := tx.deferred[idemDeferred][string(u.key)]; ok {
				delete(tx.deferred[idemDeferred], string(u.key))
			} else {
				err = u.b.Delete(u.key)
			}
		case u.existed:
			err = u.b.Put(u.key, u.old)
		default:
			err = u.b.Delete(u.key)
		}
		if err != nil {
			return err
		}
	}
	clear(tx.undo)
	tx.undo = tx.undo[:0]
	if tx.redo != nil {
		// The update's writes are gone: so are their records.
		tx.redo.b = tx.redo.b[:tx.redo.mark]
	}
	return nil
}
