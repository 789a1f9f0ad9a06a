package kv

import (
	"encoding/binary"
	"errors"

	"holon.dev/holon"
)

// writeCache keeps, for one write transaction (one batch of updates), the
// small records that nearly every update of the batch reads and writes: the
// platform's and the authors' accounts, the mandates' budgets, the agents'
// records, latency histograms and earnings, the counters and the journal's
// head. Each is read and decoded once, changed in
// memory, and encoded and put once, just before the commit, instead of
// once per update. An update that fails is undone in the cache as in bbolt
// (each change logs how to take it back, undo.go), and a transaction that
// is rolled back drops its cache (the next one starts a new one), so the
// cache never outlives what it caches. Every read and write of these
// buckets in a write transaction goes through it; a raw iteration over one
// of them flushes it first.
type writeCache struct {
	accounts cacheTable[holon.Account]
	budgets  cacheTable[holon.Budget]
	windows  cacheTable[holon.Budget]
	records  cacheTable[holon.Record]
	latency  cacheTable[holon.Latency]
	earnings cacheTable[holon.Earnings]
	counters cacheTable[uint64]
	rollups  cacheTable[rollupRow] // rollups.go
	// meta holds the journal's head (journal.go): every entry reads and
	// moves it.
	meta cacheTable[string]
	// hot is the store's: the values of earlier transactions' caches, as
	// committed (never nil in the writer's transactions); hotStale says
	// the transaction wrote around the cache (forgetHot).
	hot      *hotCache
	hotStale bool
	// writingBack is set while writeBack puts the cache's rows.
	writingBack bool
}

// hotCache keeps, across the writer's transactions, the decoded values
// its caches held when their transactions committed, so that the next
// transaction to use a row finds it decoded instead of reading it again
// (from the pending rows or bbolt: about a tenth of the writer's time in
// row 1 of the bench). It is the writer's alone. A transaction that
// commits adds its cache's rows (absorb), each as committed; one rolled
// back adds nothing; and one that wrote one of these tables around its
// cache, or a test that tampers with the file, empties it.
type hotCache struct {
	accounts map[string]holon.Account
	budgets  map[string]holon.Budget
	windows  map[string]holon.Budget
	records  map[string]holon.Record
	latency  map[string]holon.Latency
	earnings map[string]holon.Earnings
	counters map[string]uint64
	rollups  map[string]rollupRow
	meta     map[string]string
	n        int
}

// maxHot is the number of rows past which the hot cache starts again
// empty, so that it never holds more than the rows in recent use.
const maxHot = 1 << 16

func newHotCache() *hotCache {
	return &hotCache{accounts: map[string]holon.Account{}, budgets: map[string]holon.Budget{},
		windows: map[string]holon.Budget{}, records: map[string]holon.Record{}, latency: map[string]holon.Latency{},
		earnings: map[string]holon.Earnings{}, counters: map[string]uint64{}, rollups: map[string]rollupRow{},
		meta: map[string]string{}}
}

// writeDirty writes each row of m changed since the last flush with put,
// and marks it written (logged, so that an update undone marks it again).
func writeDirty[T any](tx *Tx, m map[string]*cached[T], put func(key string, v T)) {
	for k, e := range m {
		if e.dirty {
			put(k, e.v)
			tx.logFlushed(&e.dirty)
			e.dirty = false
		}
	}
}

// writeEncoded writes each changed row of m, encoded, into bucket.
func writeEncoded[T any](tx *Tx, m map[string]*cached[T], bucket []byte, errs *[]error) {
	writeDirty(tx, m, func(k string, v T) {
		b, err := tx.encode(v)
		if err == nil {
			err = tx.putCached(bucket, []byte(k), b)
		}
		*errs = append(*errs, err)
	})
}

// forgetHot stops the transaction reading the hot cache, which its raw
// writes made stale, and has the store's emptied if it commits.
func (c *writeCache) forgetHot() { c.hot, c.hotStale = newHotCache(), true }

// absorb adds the rows of a committed transaction's cache: each holds its
// value as committed (an update undone restored it, or took it out).
func (h *hotCache) absorb(c *writeCache) {
	h.n += absorbRows(h.accounts, c.accounts.m) + absorbRows(h.budgets, c.budgets.m) + absorbRows(h.windows, c.windows.m) +
		absorbRows(h.records, c.records.m) + absorbRows(h.latency, c.latency.m) + absorbRows(h.earnings, c.earnings.m) +
		absorbRows(h.counters, c.counters.m) + absorbRows(h.rollups, c.rollups.m) + absorbRows(h.meta, c.meta.m)
}

func absorbRows[T any](h map[string]T, c map[string]*cached[T]) int {
	added := 0
	for k, e := range c {
		if _, ok := h[k]; !ok {
			added++
		}
		h[k] = e.v
	}
	return added
}

type cached[T any] struct {
	v     T
	dirty bool
	// saved is the update (Tx.update) that saved in prev and prevDirty the
	// entry as it was before that update first changed it, so that undo
	// can restore it; created, when set, is the map that update added the
	// entry to, under key, and undo takes it out again.
	saved     uint64
	prev      T
	prevDirty bool
	created   *map[string]*cached[T]
	key       string
}

// undo restores the entry as it was before the update that saved it.
func (c *cached[T]) undo() {
	if c.created != nil {
		delete(*c.created, c.key)
		return
	}
	c.v, c.dirty = c.prev, c.prevDirty
}

func newWriteCache(hot *hotCache) *writeCache { return &writeCache{hot: hot} }

// reset makes c a new transaction's cache (on hot), keeping the memory of
// its tables and entries: the writer uses one cache for all its
// transactions, each starting empty, none outliving the next's start
// (committedPending takes what it keeps by value).
func (c *writeCache) reset(hot *hotCache) {
	c.accounts.reset()
	c.budgets.reset()
	c.windows.reset()
	c.records.reset()
	c.latency.reset()
	c.earnings.reset()
	c.counters.reset()
	c.rollups.reset()
	c.meta.reset()
	c.hot, c.hotStale, c.writingBack = hot, false, false
}

// cacheTable is one table of a write cache: its entries by key, allocated
// from blocks that the next transaction reuses.
type cacheTable[T any] struct {
	m    map[string]*cached[T]
	slab []cached[T]
}

// entry is a new zeroed entry. A full block is left to the entries in it
// (this transaction's) and a larger one begun, which the next
// transactions reuse.
func (t *cacheTable[T]) entry() *cached[T] {
	if len(t.slab) == cap(t.slab) {
		t.slab = make([]cached[T], 0, max(16, 2*cap(t.slab)))
	}
	t.slab = t.slab[:len(t.slab)+1]
	return &t.slab[len(t.slab)-1]
}

func (t *cacheTable[T]) reset() {
	clear(t.m)
	clear(t.slab)
	t.slab = t.slab[:0]
}

// cachedGet returns the cached value of key, or its committed value from
// the hot cache (hot), or reads it with read (a missing record reads as
// the zero value), and caches it.
func cachedGet[T any](t *cacheTable[T], hot map[string]T, key string, read func() (T, error)) (T, error) {
	if c, ok := t.m[key]; ok {
		return c.v, nil
	}
	v, ok := hot[key]
	if !ok {
		var err error
		if v, err = read(); err != nil {
			return v, err
		}
	}
	if t.m == nil {
		t.m = make(map[string]*cached[T], 8)
	}
	c := t.entry()
	c.v = v
	t.m[key] = c
	return v, nil
}

// cachedPut changes the cached value of key, logged in tx's undo log the
// first time the update changes it.
func cachedPut[T any](tx *Tx, t *cacheTable[T], key string, v T) {
	if c, ok := t.m[key]; ok {
		if c.saved != tx.update {
			c.saved, c.prev, c.prevDirty, c.created = tx.update, c.v, c.dirty, nil
			tx.logCache(c)
		}
		c.v, c.dirty = v, true
		return
	}
	if t.m == nil {
		t.m = make(map[string]*cached[T], 8)
	}
	c := t.entry()
	*c = cached[T]{v: v, dirty: true, saved: tx.update, created: &t.m, key: key}
	tx.logCache(c)
	t.m[key] = c
}

// flush writes what changed since the last flush into bbolt, with every
// derived row still pending (deferred.go): a write transaction that walks
// a bucket raw flushes first, and from then on puts every row into bbolt.
func (tx *Tx) flush() error {
	tx.deferring = false
	return tx.writeBack()
}

// writeBack writes what changed since the last flush, as the writer does
// before it commits: into bbolt, but for the rows of the deferred buckets
// (deferred.go) in a transaction that defers them, which go into its log
// record and its new pending rows.
func (tx *Tx) writeBack() error {
	c := tx.cache
	if c == nil {
		return nil
	}
	if !tx.deferring && !tx.materialized {
		if err := tx.materialize(); err != nil {
			return err
		}
	}
	// What it puts are the cache's own rows: the hot cache stays right.
	c.writingBack = true
	defer func() { c.writingBack = false }()
	var errs []error
	writeEncoded(tx, c.accounts.m, bucketAccounts, &errs)
	writeEncoded(tx, c.budgets.m, bucketBudgets, &errs)
	writeEncoded(tx, c.windows.m, bucketBudgetWindows, &errs)
	writeEncoded(tx, c.records.m, bucketRecords, &errs)
	writeEncoded(tx, c.latency.m, bucketLatency, &errs)
	writeEncoded(tx, c.earnings.m, bucketEarnings, &errs)
	writeDirty(tx, c.counters.m, func(k string, n uint64) {
		v := make([]byte, 8)
		binary.BigEndian.PutUint64(v, n)
		errs = append(errs, tx.putCached(bucketCounters, []byte(k), v))
	})
	writeDirty(tx, c.meta.m, func(k, v string) {
		errs = append(errs, tx.put(tx.bkt(bucketMeta), []byte(k), []byte(v)))
	})
	errs = append(errs, tx.flushRollups(c))
	return errors.Join(errs...)
}
