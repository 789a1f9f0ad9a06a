package accounts

import (
	"bytes"
	"sync"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
)

// Every authenticated request reads its key's record and its account's,
// and decoding them (encoding/json) was most of what the check cost. So
// the key check keeps what it decoded of each record with the record's
// exact stored bytes, and decodes again only when the bytes it reads, in
// the request's own read of the store, differ: a key revoked or expired,
// an account disabled, any change to the record shows at once, as without
// it. It needs a store that can give a record's bytes (rawGetter: the bbolt
// store); on another, records are decoded on every read.

// rawGetter reads an app bucket's record as stored (kv.Tx.GetRaw).
type rawGetter interface {
	GetRaw(bucket, key string) ([]byte, error)
}

// maxByRaw bounds each kept set: when it is full, any one entry goes.
const maxByRaw = 4096

// byRaw is what was decoded of records, by key, with their bytes.
type byRaw[T any] struct {
	mu sync.RWMutex
	m  map[string]rawEntry[T]
}

type rawEntry[T any] struct {
	raw []byte
	v   T
}

// get returns what was decoded of key's record when it was raw.
func (c *byRaw[T]) get(key string, raw []byte) (T, bool) {
	c.mu.RLock()
	e, ok := c.m[key]
	c.mu.RUnlock()
	if !ok || !bytes.Equal(e.raw, raw) {
		var zero T
		return zero, false
	}
	return e.v, true
}

// put keeps v, decoded from raw (copied: raw is the store's).
func (c *byRaw[T]) put(key string, raw []byte, v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]rawEntry[T]{}
	}
	if _, ok := c.m[key]; !ok && len(c.m) >= maxByRaw {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[key] = rawEntry[T]{raw: bytes.Clone(raw), v: v}
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
