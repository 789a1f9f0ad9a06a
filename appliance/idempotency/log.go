package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"holon.dev/holon"
)

// This file keeps the log of finished keys. On a store only this process
// writes (holon.WritersOf is holon.SoleWriter), a call's finished key is appended, in its
// settlement's transaction, to a log ordered as it was written
// ("log/<sequence in hex>" in holon.BucketIdempotency), rather than
// written under key/: the key/ layout is ordered by scope and key, so
// each settlement would rewrite a page somewhere in a large index, where
// the log's appends all land on its last page. An index in memory, rebuilt
// at start (Keys.Open), finds a key's newest log entry; the sweep folds
// the log into key/ in small transactions, and deletes the expired
// entries without writing them anywhere. A store several gateways share
// keeps no log (each gateway's index would miss the others' keys): Open
// folds there whatever log a sole writer left (a store moved over by a
// backup), and finished keys go to key/.

// logPrefix starts the keys of the log's entries: each is put once (a
// store may hold them back from its file for a while, and read them from
// memory meanwhile).
const logPrefix = holon.IdempotencyLogPrefix

// logKey is the key of the log's entry seq: fixed-width hex, so that key
// order is append order.
func logKey(seq uint64) string { return fmt.Sprintf("%s%016x", logPrefix, seq) }

// logSeq is the sequence number of a log entry's key.
func logSeq(k string) (uint64, error) { return strconv.ParseUint(k[len(logPrefix):], 16, 64) }

// logEntry is a finished key in the log: its scope and key, and its record.
type logEntry struct {
	Key string `json:"key"`
	Record
}

// AppendJSON appends the entry's JSON encoding, the bytes json.Marshal
// writes: the store encodes it so, in every settlement of a call with a
// key, without reflection.
func (e logEntry) AppendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"key":`...)
	b = holon.AppendJSONString(b, e.Key)
	b = append(b, `,"state":`...)
	b = holon.AppendJSONString(b, e.State)
	b = append(b, `,"request":`...)
	b = holon.AppendJSONString(b, e.Request)
	if e.Receipt != "" {
		b = append(b, `,"receipt":`...)
		b = holon.AppendJSONString(b, e.Receipt)
	}
	if e.Status != 0 {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(e.Status), 10)
	}
	b = append(b, `,"started":`...)
	if b, err = holon.AppendJSONTime(b, e.Started); err != nil {
		return nil, err
	}
	if e.Finished != nil {
		b = append(b, `,"finished":`...)
		if b, err = holon.AppendJSONTime(b, *e.Finished); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// foldGrace is how long a key folded out of the log stays in the index
// (pointing at the entry the fold deleted, so that a read finds it under
// key/ instead): a read transaction begun before the fold's commit, which
// still shows the entry in the log and not yet under key/, finds it there
// through the index. No read lasts that long.
const foldGrace = time.Minute

// foldBatch bounds the entries one of the fold's transactions moves. Each
// live key goes to its own place in key/ (about two pages of a large
// layout each), and the transaction holds the store's one writer, and
// shares its commit with the settlements queued beside it: into a layout
// of 200,000 keys, 128 keys wrote 1.3 MB of pages and held the writer
// 10-15 ms on this project's 2-core machine, 500 keys 4 MB and 25 ms
// (BenchmarkKeys_Fold).
const foldBatch = 128

// maxIndexed is how many keys the index holds, besides those folded and
// not yet forgotten, before the log is folded without waiting for the
// sweep's period (about 150 bytes each).
const maxIndexed = 1 << 20

// folded is an index entry whose log entry a fold deleted.
type folded struct {
	key string
	seq uint64
	at  time.Time
}

// Open reads the log of finished keys into the index, on a store only
// this process writes, and from then on finished keys are appended to it;
// on a store several gateways share it folds any log into key/. It runs at
// start, before the first claim.
func (d *Keys) Open(ctx context.Context) error {
	if holon.WritersOf(d.store) != holon.SoleWriter {
		for {
			_, more, err := d.foldChunk(ctx, d.now())
			if err != nil {
				return fmt.Errorf("fold the log of idempotency keys: %w", err)
			}
			if !more {
				return nil
			}
		}
	}
	index := map[string]uint64{}
	var next uint64 = 1
	err := d.store.View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketIdempotency, logPrefix, func(k string, raw json.RawMessage) (bool, error) {
			seq, err := logSeq(k)
			if err != nil {
				return false, fmt.Errorf("idempotency log entry %s: %w", k, err)
			}
			var e logEntry
			if err := json.Unmarshal(raw, &e); err != nil {
				return false, fmt.Errorf("idempotency log entry %s: %w", k, err)
			}
			index[e.Key] = seq
			next = seq + 1
			return true, nil
		})
	})
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.logging, d.index, d.next = true, index, next
	d.mu.Unlock()
	return nil
}

// appendLog takes the next sequence number of the log and notes it as
// key's newest entry; false when finished keys are not logged (Open did
// not find a sole writer). The transaction writing the entry may still be
// undone: the index then points at no entry, and a lookup reads key/.
func (d *Keys) appendLog(key string) (uint64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.logging {
		return 0, false
	}
	seq := d.next
	d.next++
	d.index[key] = seq
	if len(d.index)-len(d.folded) > maxIndexed {
		select {
		case d.foldNow <- struct{}{}:
		default:
		}
	}
	return seq, true
}

// logged is the sequence number of key's newest log entry.
func (d *Keys) logged(key string) (uint64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	seq, ok := d.index[key]
	return seq, ok
}

// lookupLog reads key's newest log entry, if it holds a live record.
func (c *Claim) lookupLog(tx holon.Tx) (Record, bool, error) {
	seq, ok := c.keys.logged(c.Key())
	if !ok {
		return Record{}, false, nil
	}
	var e logEntry
	err := tx.Get(holon.BucketIdempotency, logKey(seq), &e)
	switch {
	case errors.Is(err, holon.ErrNotFound):
		return Record{}, false, nil // folded, or its transaction undone
	case err != nil:
		return Record{}, false, err
	case e.Key != c.Key() || c.keys.expired(e.Record, c.keys.now()):
		return Record{}, false, nil
	}
	return e.Record, true, nil
}

// end is when a record's lifetime starts: its call's end, or its start
// for a record without one.
func (r Record) end() time.Time {
	if r.Finished != nil {
		return *r.Finished
	}
	return r.Started
}

// fold folds the whole log into key/, a chunk per transaction: a key whose
// lifetime has passed is deleted, a live one is written under key/ (unless
// key/ holds a later record of it). It returns how many expired keys it
// deleted.
func (d *Keys) fold(ctx context.Context) (int, error) {
	d.foldMu.Lock()
	defer d.foldMu.Unlock()
	now := d.now()
	d.forget(now)
	deleted := 0
	for {
		n, more, err := d.foldChunk(ctx, now)
		deleted += n
		if err != nil || !more {
			return deleted, err
		}
	}
}

// forget drops from the index the keys folded foldGrace ago.
func (d *Keys) forget(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := 0
	for ; i < len(d.folded) && !now.Before(d.folded[i].at.Add(foldGrace)); i++ {
		f := d.folded[i]
		if d.index[f.key] == f.seq {
			delete(d.index, f.key)
		}
	}
	d.folded = append(d.folded[:0], d.folded[i:]...)
}

// foldChunk folds the log's first foldBatch entries in one transaction:
// how many expired keys it deleted, and whether entries were left after
// them.
func (d *Keys) foldChunk(ctx context.Context, now time.Time) (int, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	var keys []string
	err := d.store.View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketIdempotency, logPrefix, func(k string, _ json.RawMessage) (bool, error) {
			keys = append(keys, k)
			return len(keys) < foldBatch, nil
		})
	})
	if err != nil || len(keys) == 0 {
		return 0, false, err
	}
	var done []folded
	deleted := 0
	err = d.store.Update(ctx, func(tx holon.Tx) error {
		done, deleted = done[:0], 0
		for _, k := range keys {
			var e logEntry
			err := tx.Get(holon.BucketIdempotency, k, &e)
			if errors.Is(err, holon.ErrNotFound) {
				continue // another gateway folded it
			}
			if err != nil {
				return err
			}
			if d.expired(e.Record, now) {
				deleted++
			} else if err := foldInto(tx, e); err != nil {
				return err
			}
			if err := tx.Delete(holon.BucketIdempotency, k); err != nil {
				return err
			}
			if seq, err := logSeq(k); err == nil {
				done = append(done, folded{key: e.Key, seq: seq, at: now})
			}
		}
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	if d.onSweep != nil {
		d.onSweep(len(keys))
	}
	d.mu.Lock()
	if d.logging {
		d.folded = append(d.folded, done...)
	}
	d.mu.Unlock()
	return deleted, len(keys) == foldBatch, nil
}

// foldInto writes a live log entry's record under key/, unless key/ holds
// a record of the key that ended later (a later call of the key, whose
// record went to key/: interrupted).
func foldInto(tx holon.Tx, e logEntry) error {
	k := "key/" + e.Key
	var cur Record
	err := tx.Get(holon.BucketIdempotency, k, &cur)
	switch {
	case err == nil && cur.end().After(e.end()):
		return nil
	case err != nil && !errors.Is(err, holon.ErrNotFound):
		return err
	}
	return tx.Put(holon.BucketIdempotency, k, e.Record)
}
