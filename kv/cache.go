package kv

import (
	"encoding/binary"
	"errors"

	"holon.dev/holon"
)

// writeCache keeps, for one write transaction (one batch of updates), the
// small records that nearly every update of the batch reads and writes: the
// platform's and the authors' accounts, the mandates' budgets, the agents'
// records and the counters. Each is read and decoded once, changed in
// memory, and encoded and put once, just before the commit, instead of
// once per update. A transaction that fails is rolled back with its cache,
// and the batch is replayed in a new transaction with a new cache, so the
// cache never outlives what it caches. Every read and write of these
// buckets in a write transaction goes through it; a raw iteration over one
// of them flushes it first.
type writeCache struct {
	accounts map[string]*cached[holon.Account]
	budgets  map[string]*cached[holon.Budget]
	records  map[string]*cached[holon.Record]
	counters map[string]*cached[uint64]
}

type cached[T any] struct {
	v     T
	dirty bool
}

func newWriteCache() *writeCache { return &writeCache{} }

// cachedGet returns the cached value of key, or reads it with read (a
// missing record reads as the zero value) and caches it.
func cachedGet[T any](m *map[string]*cached[T], key string, read func() (T, error)) (T, error) {
	if c, ok := (*m)[key]; ok {
		return c.v, nil
	}
	v, err := read()
	if err != nil {
		return v, err
	}
	if *m == nil {
		*m = make(map[string]*cached[T], 8)
	}
	(*m)[key] = &cached[T]{v: v}
	return v, nil
}

func cachedPut[T any](m *map[string]*cached[T], key string, v T) {
	if c, ok := (*m)[key]; ok {
		c.v, c.dirty = v, true
		return
	}
	if *m == nil {
		*m = make(map[string]*cached[T], 8)
	}
	(*m)[key] = &cached[T]{v: v, dirty: true}
}

// flush writes what changed since the last flush.
func (tx *Tx) flush() error {
	c := tx.cache
	if c == nil {
		return nil
	}
	var errs []error
	put := func(bucket []byte, key string, v any) {
		b, err := tx.encode(v)
		if err == nil {
			err = tx.btx.Bucket(bucket).Put([]byte(key), b)
		}
		errs = append(errs, err)
	}
	for k, e := range c.accounts {
		if e.dirty {
			put(bucketAccounts, k, e.v)
			e.dirty = false
		}
	}
	for k, e := range c.budgets {
		if e.dirty {
			put(bucketBudgets, k, e.v)
			e.dirty = false
		}
	}
	for k, e := range c.records {
		if e.dirty {
			put(bucketRecords, k, e.v)
			e.dirty = false
		}
	}
	for k, e := range c.counters {
		if e.dirty {
			v := make([]byte, 8)
			binary.BigEndian.PutUint64(v, e.v)
			errs = append(errs, tx.btx.Bucket(bucketCounters).Put([]byte(k), v))
			e.dirty = false
		}
	}
	return errors.Join(errs...)
}
