package kv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/bits"
	"slices"

	"holon.dev/holon"
)

var appBuckets = map[string]bool{
	holon.BucketSignIn: true,
	holon.BucketUsers:  true, holon.BucketEmails: true, holon.BucketKeys: true, holon.BucketIdempotency: true,
	holon.BucketModLog: true, holon.BucketCredentials: true, holon.BucketFiles: true, holon.BucketSettings: true,
	holon.BucketSessions: true,
	holon.BucketEvals:    true, holon.BucketEvalQueue: true,
	holon.BucketOAuth:   true,
	holon.BucketRefunds: true,
	holon.BucketAlerts:  true, holon.BucketWebhooks: true, holon.BucketAlertOutbox: true,
}

// appendOnly buckets refuse overwrites and deletes.
var appendOnly = map[string]bool{holon.BucketModLog: true, holon.BucketRefunds: true, holon.BucketAlerts: true}

// appBit is each app bucket's bit in a transaction's wroteApp, and its
// index in the store's changes.
var appBit = map[string]uint32{}

func init() {
	for name := range appBuckets {
		allBuckets = append(allBuckets, []byte(name))
	}
	names := slices.Sorted(maps.Keys(appBuckets))
	if len(names) > 32 {
		panic("kv: more app buckets than a transaction's wroteApp has bits")
	}
	for i, name := range names {
		appBit[name] = 1 << i
	}
}

// BucketChanges is the number of commits that wrote to an app bucket and
// that readers see (holon.Changes): it grows after such a commit is
// published, before its callers hear it committed. A reader that reads
// it, then reads the bucket, and later reads the same number again knows
// that nothing changed the bucket in between. Each process counts from 0
// at Open.
func (s *Store) BucketChanges(bucket string) uint64 {
	bit := appBit[bucket]
	if bit == 0 {
		return 0
	}
	return s.changes[bits.TrailingZeros32(bit)].Load()
}

// published counts the commit of tx in the changes of every app bucket
// it wrote (updates that failed and were undone included: a number that
// grows without a change only costs a reader a read).
func (s *Store) published(tx *Tx) {
	for w := tx.wroteApp; w != 0; w &= w - 1 {
		s.changes[bits.TrailingZeros32(w)].Add(1)
	}
}

func (tx *Tx) appBucket(name string) ([]byte, error) {
	if !appBuckets[name] {
		return nil, fmt.Errorf("%q is not an app bucket", name)
	}
	return []byte(name), nil
}

// Put stores v as JSON under key in an app bucket.
func (tx *Tx) Put(bucket, key string, v any) error {
	b, err := tx.appBucket(bucket)
	if err != nil {
		return err
	}
	if appendOnly[bucket] && tx.bkt(b).Get([]byte(key)) != nil {
		return fmt.Errorf("%s is append-only: %s exists", bucket, key)
	}
	tx.wroteApp |= appBit[bucket]
	if deferredKey(bucket, key) {
		raw, err := tx.encodeFor(b, []byte(key), v)
		if err != nil {
			return err
		}
		return tx.putDeferred([]byte(key), raw)
	}
	return tx.putJSON(b, []byte(key), v)
}

// Get reads the JSON document under key in an app bucket into v;
// ErrNotFound when there is none.
func (tx *Tx) Get(bucket, key string, v any) error {
	b, err := tx.appBucket(bucket)
	if err != nil {
		return err
	}
	return tx.getJSON(b, []byte(key), v)
}

// GetRaw reads a document of an app bucket as stored, undecoded
// (holon.ErrNotFound when there is none); the slice is the store's, valid
// during the transaction only. A reader that keeps what it decoded of a
// record by the record's exact bytes reads it so (accounts' key checks).
func (tx *Tx) GetRaw(bucket, key string) ([]byte, error) {
	b, err := tx.appBucket(bucket)
	if err != nil {
		return nil, err
	}
	v := tx.get(b, []byte(key)) // nil for a later bucket, in a store opened read-only
	if v == nil {
		return nil, holon.ErrNotFound
	}
	return v, nil
}

// Delete removes a document from an app bucket (not from an append-only one).
func (tx *Tx) Delete(bucket, key string) error {
	b, err := tx.appBucket(bucket)
	if err != nil {
		return err
	}
	if appendOnly[bucket] {
		return fmt.Errorf("%s is append-only", bucket)
	}
	tx.wroteApp |= appBit[bucket]
	return tx.del(tx.bkt(b), []byte(key))
}

// ForEach calls fn for every document whose key starts with prefix, in key
// order, until fn returns false.
func (tx *Tx) ForEach(bucket, prefix string, fn func(key string, raw json.RawMessage) (bool, error)) error {
	return tx.ForEachAfter(bucket, prefix, "", fn)
}

// ForEachAfter is ForEach from the first key after after (a page's
// cursor; "" starts at the prefix), seeking to it rather than reading up
// to it.
func (tx *Tx) ForEachAfter(bucket, prefix, after string, fn func(key string, raw json.RawMessage) (bool, error)) error {
	b, err := tx.appBucket(bucket)
	if err != nil {
		return err
	}
	c := tx.cursor(b) // empty for a later bucket, in a store opened read-only
	p := []byte(prefix)
	start := p
	if after > prefix {
		start = []byte(after + "\x00")
	}
	for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		more, err := fn(string(k), v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// Append stores v under the next sequence number of an app bucket (keys are
// 8-byte big-endian, so ForEach reads them in order) and returns it.
func (tx *Tx) Append(bucket string, v any) (uint64, error) {
	b, err := tx.appBucket(bucket)
	if err != nil {
		return 0, err
	}
	seq, err := tx.nextSeq(b)
	if err != nil {
		return 0, err
	}
	tx.wroteApp |= appBit[bucket]
	return seq, tx.putJSON(b, u64(seq), v)
}
