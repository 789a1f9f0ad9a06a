package accounts

import (
	"bytes"
	"encoding/binary"
	"sync"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
)

// Every authenticated request needs its key's record and its account's,
// and reading and decoding them was most of what the check cost. So the
// key check keeps what it read, stamped with how it knows it is still
// what the store holds:
//
//   - the key and whether its account is disabled, by the key's hash,
//     stamped with the change numbers of the keys' and the accounts'
//     buckets (holon.Changes) read before the read: while neither grew,
//     the request reads nothing;
//   - what it decoded of each record, stamped with the record's exact
//     stored bytes (rawGetter), for when it does read: it decodes again
//     only when the bytes differ.
//
// A key revoked, an account disabled, any change to either record shows
// at once, as without them: a change grows its bucket's number before the
// change's own request is answered. Both need the embedded store (a
// store several gateways write cannot number the others' changes, and
// the PostgreSQL store gives no record's bytes); on another store, records
// are read and decoded on every request.

// rawGetter reads an app bucket's record as stored (kv.Tx.GetRaw).
type rawGetter interface {
	GetRaw(bucket, key string) ([]byte, error)
}

// maxStamped bounds each kept set: when it is full, any one entry goes.
const maxStamped = 4096

// stamped is what was read, by key, each with the stamp it was read under.
type stamped[T any] struct {
	mu sync.RWMutex
	m  map[string]stampedEntry[T]
}

type stampedEntry[T any] struct {
	stamp []byte
	v     T
}

// get returns what was kept of key under stamp.
func (c *stamped[T]) get(key string, stamp []byte) (T, bool) {
	c.mu.RLock()
	e, ok := c.m[key]
	c.mu.RUnlock()
	if !ok || !bytes.Equal(e.stamp, stamp) {
		var zero T
		return zero, false
	}
	return e.v, true
}

// put keeps v, read under stamp (copied: a record's bytes are the
// store's).
func (c *stamped[T]) put(key string, stamp []byte, v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]stampedEntry[T]{}
	}
	if _, ok := c.m[key]; !ok && len(c.m) >= maxStamped {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[key] = stampedEntry[T]{stamp: bytes.Clone(stamp), v: v}
}

// keyState is what the key check keeps of a key: its record, and whether
// its account is disabled.
type keyState struct {
	key      auth.Key
	disabled bool
}

// keyAndAccount reads the key whose SHA-256 is hash and whether its
// account is disabled, from what was kept while the store says neither
// bucket changed since (holon.ErrNotFound when there is no such key).
func (r *Repo) keyAndAccount(hash string) (*auth.Key, bool, error) {
	var buf [16]byte
	var stamp []byte
	if ch, ok := r.store.(holon.Changes); ok {
		stamp = binary.LittleEndian.AppendUint64(buf[:0], ch.BucketChanges(holon.BucketKeys))
		stamp = binary.LittleEndian.AppendUint64(stamp, ch.BucketChanges(holon.BucketUsers))
		if st, ok := r.keys.get(hash, stamp); ok {
			k := st.key
			return &k, st.disabled, nil
		}
	}
	var rec *auth.Key
	var disabled bool
	err := r.store.View(func(tx holon.Tx) error {
		var err error
		if rec, err = r.keyByHash(tx, hash); err != nil {
			return err
		}
		disabled, err = r.disabled(tx, rec.Account)
		return err
	})
	if err == nil && stamp != nil {
		r.keys.put(hash, stamp, keyState{key: *rec, disabled: disabled})
	}
	return rec, disabled, err
}

// keyByHash is KeyByHash, decoding the record only when its bytes are
// new. The key is the caller's own copy.
func (r *Repo) keyByHash(tx holon.Tx, hash string) (*auth.Key, error) {
	rg, ok := tx.(rawGetter)
	if !ok {
		return KeyByHash(tx, hash)
	}
	raw, err := rg.GetRaw(holon.BucketKeys, keyByHash(hash))
	if err != nil {
		return nil, err
	}
	if k, ok := r.keyRecs.get(hash, raw); ok {
		return &k, nil
	}
	k, err := KeyByHash(tx, hash)
	if err == nil {
		r.keyRecs.put(hash, raw, *k)
	}
	return k, err
}

// disabled reports whether an account is disabled (Get's account's
// Disabled), decoding its record only when its bytes are new.
func (r *Repo) disabled(tx holon.Tx, handle string) (bool, error) {
	rg, ok := tx.(rawGetter)
	var raw []byte
	if ok {
		var err error
		if raw, err = rg.GetRaw(holon.BucketUsers, handle); err != nil {
			return false, err
		}
		if d, ok := r.acctRecs.get(handle, raw); ok {
			return d, nil
		}
	}
	acct, err := Get(tx, handle)
	if err != nil {
		return false, err
	}
	if ok {
		r.acctRecs.put(handle, raw, acct.Disabled != nil)
	}
	return acct.Disabled != nil, nil
}
