package kv

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"

	"holon.dev/holon"
)

// The write cache's buckets (cache.go) but the journal's head: the
// accounts, the mandates' budgets and their windows, the counters, and the
// rows derived from the calls (agents' records, latency histograms,
// earnings, rollups). Nearly every commit rewrites a few rows of each, and
// each is a tree of its own: putting their rows into bbolt at every commit
// costs a path of pages per bucket per commit (in row 1 of the bench, 42 KB
// of a commit's 131 KB). While the
// store logs (wal.go), a commit's new values of those rows go only into its
// log record, which is what makes the commit durable, and into the pending
// set below; bbolt gets them in a later commit: at the latest the one
// before a checkpoint (which drops the records before it, so the file must
// hold by then every value they held), or as the store stops logging. A
// crash loses nothing: recovery replays every record after the last
// checkpoint.
//
// Until bbolt holds them, every read of those buckets finds the pending
// value first (get, cursor): a snapshot carries the pending set of its
// commit, and the writer's transactions that of the last commit. A write
// to one of those buckets that does not go through the write cache puts
// the pending rows into bbolt first (beforeWrite).
//
// The last one, the idempotency keys' bucket, is not the write cache's:
// only its log of finished keys (holon.IdempotencyLogPrefix, a row
// appended by each settlement of a call with an Idempotency-Key, never
// rewritten) is deferred, put by the update that appends it (putDeferred)
// and taken back if that update fails. Its other rows go into bbolt as any
// app bucket's, and a write to one of its pending rows (the log's fold
// deletes them) puts the pending rows into bbolt first. A commit of row 1b
// of the bench put 32 KB more pages than row 1's for the log's appends,
// each rewriting the last page of a tree and its path.
var deferredBuckets = [...][]byte{bucketAccounts, bucketBudgets, bucketBudgetWindows, bucketCounters,
	bucketRecords, bucketLatency, bucketEarnings, bucketRollups, bucketIdempotency}

// bucketIdempotency is the app bucket of idempotency keys, whose log is
// deferred.
var bucketIdempotency = []byte(holon.BucketIdempotency)

// idemLogPrefix starts the keys of its deferred rows.
var idemLogPrefix = []byte(holon.IdempotencyLogPrefix)

// idemDeferred is bucketIdempotency's index in deferredBuckets.
const idemDeferred = len(deferredBuckets) - 1

// maxPending is the number of pending rows past which the next commit puts
// them all into bbolt, so that the set (and a fold of its layers) stays
// small.
const maxPending = 2048

// deferredIndex is the index of a bucket in deferredBuckets, or -1.
func deferredIndex(name []byte) int {
	switch string(name) {
	case "accounts":
		return 0
	case "budgets":
		return 1
	case "budget_windows":
		return 2
	case "counters":
		return 3
	case "records":
		return 4
	case "latency":
		return 5
	case "earnings":
		return 6
	case "rollups":
		return 7
	case holon.BucketIdempotency:
		return idemDeferred
	}
	return -1
}

// pending is the set of rows committed (and durable in the log) but not
// yet in bbolt, as of one commit: never changed once made, so that readers
// share it with the snapshot it belongs to. Each bucket's rows are a chain
// of layers, a commit's rows over those of the commits before it, folded
// into one layer every maxLayers commits: a commit adds its own rows
// without copying the others', and a read looks at a few maps at most.
type pending struct {
	n int // rows in all layers (a key rewritten counts once per layer)
	b [len(deferredBuckets)]*pendLayer
}

// maxLayers is the length of a chain past which it is folded into one.
const maxLayers = 8

type pendLayer struct {
	vals   map[string][]byte
	under  *pendLayer // the commits' before (nil at the bottom)
	depth  int        // layers in the chain from this one down
	rows   int        // rows in the chain, counted as in pending.n
	once   sync.Once
	keys   []string          // the chain's keys in order, made on the first walk
	merged map[string][]byte // the chain's newest values, made with keys
}

// get returns the pending value of key in bucket i.
func (p *pending) get(i int, key []byte) ([]byte, bool) {
	if p == nil || i < 0 {
		return nil, false
	}
	for l := p.b[i]; l != nil; l = l.under {
		if v, ok := l.vals[string(key)]; ok {
			return v, true
		}
	}
	return nil, false
}

// flat returns the chain's newest values (l's own map when it is alone).
func (l *pendLayer) flat() map[string][]byte {
	if l.under == nil {
		return l.vals
	}
	m := make(map[string][]byte, l.rows)
	var chain []*pendLayer
	for c := l; c != nil; c = c.under {
		chain = append(chain, c)
	}
	for _, c := range slices.Backward(chain) {
		for k, v := range c.vals {
			m[k] = v
		}
	}
	return m
}

// sorted returns bucket i's pending keys in order, and their values.
func (p *pending) sorted(i int) ([]string, map[string][]byte) {
	if p == nil || i < 0 || p.b[i] == nil {
		return nil, nil
	}
	l := p.b[i]
	l.once.Do(func() {
		l.merged = l.flat()
		l.keys = make([]string, 0, len(l.merged))
		for k := range l.merged {
			l.keys = append(l.keys, k)
		}
		slices.Sort(l.keys)
	})
	return l.keys, l.merged
}

// with returns the pending set of p's commit followed by one whose new
// rows are add, which it keeps (p is not changed).
func (p *pending) with(add *[len(deferredBuckets)]map[string][]byte) *pending {
	if !slices.ContainsFunc(add[:], func(m map[string][]byte) bool { return len(m) > 0 }) {
		return p
	}
	q := &pending{}
	for i := range q.b {
		var under *pendLayer
		if p != nil {
			under = p.b[i]
		}
		switch {
		case len(add[i]) == 0:
			q.b[i] = under // never changed once made: shared
		case under == nil:
			q.b[i] = &pendLayer{vals: add[i], depth: 1, rows: len(add[i])}
		case under.depth >= maxLayers:
			l := &pendLayer{vals: add[i], under: under, rows: under.rows + len(add[i])}
			m := l.flat()
			q.b[i] = &pendLayer{vals: m, depth: 1, rows: len(m)}
		default:
			q.b[i] = &pendLayer{vals: add[i], under: under, depth: under.depth + 1, rows: under.rows + len(add[i])}
		}
		if q.b[i] != nil {
			q.n += q.b[i].rows
		}
	}
	return q
}

// get reads key from bucket name as the transaction sees it: a pending
// value first, then bbolt's (nil when neither has it, or there is no such
// bucket: a later one, in a store opened read-only).
func (tx *Tx) get(name, key []byte) []byte {
	if tx.pend != nil || tx.deferring {
		// (Of the idempotency keys' bucket, only the log's rows are ever
		// pending.)
		if i := deferredIndex(name); i >= 0 && (i != idemDeferred || bytes.HasPrefix(key, idemLogPrefix)) {
			if v, ok := tx.deferred[i][string(key)]; ok {
				return v
			}
			if v, ok := tx.pend.get(i, key); ok {
				return v
			}
		}
	}
	b := tx.bkt(name)
	if b == nil {
		return nil
	}
	return b.Get(key)
}

// dcursor walks a bucket as the transaction sees it: bbolt's rows merged
// with the pending ones in key order, a pending value taking the place of
// bbolt's under the same key. Its slices are valid as a bbolt cursor's.
type dcursor struct {
	c    *bolt.Cursor // nil for a bucket the store lacks
	keys []string
	vals map[string][]byte
	i    int
	// bk, bv are the bbolt cursor's current row; fromPend says the row
	// returned last was the pending one, and same that bbolt's had its key.
	bk, bv         []byte
	fromPend, same bool
}

// cursor returns a cursor over bucket name as the transaction sees it.
func (tx *Tx) cursor(name []byte) *dcursor {
	d := &dcursor{}
	if b := tx.bkt(name); b != nil {
		d.c = b.Cursor()
	}
	i := deferredIndex(name)
	if tx.pend != nil {
		d.keys, d.vals = tx.pend.sorted(i)
	}
	if i >= 0 && len(tx.deferred[i]) > 0 {
		// Rows this transaction deferred (the idempotency log's, put by
		// its updates): merged over the pending ones.
		vals := make(map[string][]byte, len(d.vals)+len(tx.deferred[i]))
		maps.Copy(vals, d.vals)
		maps.Copy(vals, tx.deferred[i])
		d.keys, d.vals = slices.Sorted(maps.Keys(vals)), vals
	}
	return d
}

// First moves to the first row.
func (d *dcursor) First() (k, v []byte) {
	if d.c != nil {
		d.bk, d.bv = d.c.First()
	}
	d.i = 0
	return d.pick()
}

// Seek moves to the first row whose key is key or after it.
func (d *dcursor) Seek(key []byte) (k, v []byte) {
	if d.c != nil {
		d.bk, d.bv = d.c.Seek(key)
	}
	d.i, _ = slices.BinarySearch(d.keys, string(key))
	return d.pick()
}

// Next moves to the next row.
func (d *dcursor) Next() (k, v []byte) {
	if !d.fromPend || d.same {
		if d.c != nil && d.bk != nil {
			d.bk, d.bv = d.c.Next()
		}
	}
	if d.fromPend {
		d.i++
	}
	return d.pick()
}

func (d *dcursor) pick() (k, v []byte) {
	d.fromPend, d.same = false, false
	if d.i < len(d.keys) {
		pk := d.keys[d.i]
		if d.bk == nil || pk <= string(d.bk) {
			d.fromPend, d.same = true, d.bk != nil && pk == string(d.bk)
			return []byte(pk), d.vals[pk]
		}
	}
	return d.bk, d.bv
}

// forEach calls fn for every row of bucket name as the transaction sees
// it, in key order.
func (tx *Tx) forEach(name []byte, fn func(k, v []byte) error) error {
	c := tx.cursor(name)
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// putCached puts a row the write cache changed: into bbolt, or, in a
// deferred bucket of a transaction that defers them, into the log's
// record and the transaction's new pending rows (v is the arena's,
// copied).
func (tx *Tx) putCached(bucket, key, v []byte) error {
	b := tx.bkt(bucket)
	i := deferredIndex(bucket)
	if !tx.deferring || i < 0 {
		return tx.put(b, key, v)
	}
	if err := tx.redoPut(b, key, v); err != nil {
		return err
	}
	if tx.deferred[i] == nil {
		tx.deferred[i] = make(map[string][]byte, 8)
	}
	tx.deferred[i][string(key)] = bytes.Clone(v)
	return nil
}

// putDeferred puts a row of the idempotency keys' log (key under
// holon.IdempotencyLogPrefix, v encoded) in an update: into the log's
// record and the transaction's deferred rows when it defers them, else
// into bbolt. An update that fails takes it back (undo.go).
func (tx *Tx) putDeferred(key, v []byte) error {
	b := tx.bucket(bucketIdempotency)
	if !tx.deferring {
		return tx.put(b, key, v)
	}
	if err := tx.redoPut(b, key, v); err != nil {
		return err
	}
	if tx.deferred[idemDeferred] == nil {
		tx.deferred[idemDeferred] = make(map[string][]byte, 32)
	}
	k := string(key)
	tx.deferred[idemDeferred][k] = bytes.Clone(v)
	if tx.logging {
		tx.undo = append(tx.undo, undoStep{b: b, key: []byte(k), deferred: true})
	}
	return nil
}

// deferredKey says whether an app bucket's key is one whose writes may be
// deferred.
func deferredKey(bucket, key string) bool {
	return bucket == holon.BucketIdempotency && strings.HasPrefix(key, holon.IdempotencyLogPrefix)
}

// materialize puts into bbolt the rows pending before the
// transaction and those it deferred, so that bbolt holds every one: the
// transaction then reads and walks bbolt alone, and nothing is pending
// once it commits. Their values are in log records already (a replay
// writes them again), so they are not logged again; nor are they in the
// undo log, since an update that fails leaves them as they were.
func (tx *Tx) materialize() error {
	for i, name := range deferredBuckets {
		var vals []map[string][]byte
		if tx.pend != nil && tx.pend.b[i] != nil {
			vals = append(vals, tx.pend.b[i].flat())
		}
		vals = append(vals, tx.deferred[i])
		for _, m := range vals {
			if len(m) == 0 {
				continue
			}
			b := tx.bkt(name)
			for k, v := range m {
				if err := b.Put([]byte(k), v); err != nil {
					return err
				}
			}
		}
		tx.deferred[i] = nil
	}
	tx.pend, tx.deferring, tx.materialized = nil, false, true
	return nil
}

// committedPending makes the rows pending after tx's commit the store's
// (none when tx put them into bbolt, else those before it and those it
// deferred), and adds tx's cache to the hot cache.
func (s *Store) committedPending(tx *Tx) {
	if tx.cache.hotStale {
		s.hot = newHotCache()
	}
	if s.hot.absorb(tx.cache); s.hot.n > maxHot {
		s.hot = newHotCache()
	}
	var p *pending
	switch {
	case tx.materialized:
		s.flushNext = false
	default:
		p = tx.pend.with(&tx.deferred)
	}
	s.snapMu.Lock()
	s.pend = p
	s.snapMu.Unlock()
}

// rows counts the rows of bucket b (named name) as the transaction sees
// them: bbolt's and the pending ones it lacks.
func (tx *Tx) rows(name []byte, b *bolt.Bucket) int64 {
	n := int64(b.Stats().KeyN)
	keys, _ := tx.pend.sorted(deferredIndex(name))
	for _, k := range keys {
		if b.Get([]byte(k)) == nil {
			n++
		}
	}
	return n
}

// beforeWrite puts the pending rows into bbolt before a write to one of
// their buckets that does not go through the write cache, which would
// otherwise sit under a pending value of the same key. In the idempotency
// keys' bucket, whose pending rows are not the cache's, only a write to a
// pending row's key does.
func (tx *Tx) beforeWrite(b *bolt.Bucket, key []byte) error {
	if tx.redo == nil {
		return nil
	}
	i := deferredIndex(tx.redo.names[b])
	if i < 0 {
		return nil
	}
	if i == idemDeferred {
		if _, ok := tx.deferred[i][string(key)]; !ok {
			if _, ok := tx.pend.get(i, key); !ok {
				return nil
			}
		}
		return tx.materialize()
	}
	if tx.cache != nil && !tx.cache.writingBack {
		// Its rows in the writer's hot cache may no longer be the
		// committed ones (a write of the cache's own rows leaves them so).
		tx.cache.forgetHot()
	}
	if tx.pend == nil {
		return nil
	}
	return tx.materialize()
}
