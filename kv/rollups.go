package kv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// bucketRollups holds the spend and earnings rollups (holon.RollupsTx):
// kind, owner, 0x00, dimension, day (4 bytes, big-endian), value →
// tallies (rollupValue). Like the approvals index, it is derived: from
// the receipts and refunds, by the engine (gateway.RebuildRollups). It is
// not one of Buckets(): a backup leaves it out, and a store restored, or
// written before rollups were kept, has none (or rows not yet marked
// kept); the engine rebuilds it before it serves. In the writer's transactions its rows go through the
// write cache: a commit writes each row it touched once.
var bucketRollups = []byte("rollups")

// rollupsKept is the row that says the rollups count every receipt: a key
// no row's can be (a row's starts with its kind).
var rollupsKept = []byte{0}

// createRollups creates the bucket as the store opens. It is not marked
// kept: the engine marks it as it starts (gateway.RebuildRollups), after
// counting whatever receipts the store holds, so that a store written
// before, or by hand, is never taken for one whose rollups are whole.
func createRollups(btx *bolt.Tx) error {
	if _, err := btx.CreateBucketIfNotExists(bucketRollups); err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketRollups, err)
	}
	return nil
}

// appendRollupKey appends a row's key.
func appendRollupKey(b []byte, k holon.RollupKey) []byte {
	b = rollupPrefix(b, k.Kind, k.Owner, k.Dim)
	b = binary.BigEndian.AppendUint32(b, uint32(k.Day))
	return append(b, k.Value...)
}

func rollupPrefix(b []byte, kind byte, owner string, dim byte) []byte {
	b = append(b, kind)
	b = append(b, owner...)
	return append(b, 0, dim)
}

// appendTallies encodes a row's value: per currency, in currency order,
// its length and name, then calls, amount and refunded as varints.
func appendTallies(b []byte, t holon.Tallies) []byte {
	if len(t) == 1 { // most rows: one currency, nothing to sort
		for c, x := range t {
			b = appendTally(b, c, x)
		}
		return b
	}
	for _, c := range sortedKeys(t) {
		b = appendTally(b, c, t[c])
	}
	return b
}

func appendTally(b []byte, c string, x holon.Tally) []byte {
	b = append(b, byte(len(c)))
	b = append(b, c...)
	b = binary.AppendVarint(b, x.Calls)
	b = binary.AppendVarint(b, int64(x.Amount))
	return binary.AppendVarint(b, int64(x.Refunded))
}

// rollupValue is a row's value as the write transaction's encoder
// (encodeValue) takes it: encoded by appendRollupRow into the transaction's
// arena. rollupRowKey is a row's key for the same arena.
type (
	rollupValue  rollupRow
	rollupRowKey string
)

func sortedKeys(t holon.Tallies) []string {
	ks := make([]string, 0, len(t))
	for k := range t {
		ks = append(ks, k)
	}
	if len(ks) > 1 {
		slices.Sort(ks)
	}
	return ks
}

var errBadTallies = errors.New("bad rollup value")

func decodeTallies(b []byte) (holon.Tallies, error) {
	t := holon.Tallies{}
	for len(b) > 0 {
		n := int(b[0])
		if len(b) < 1+n {
			return nil, errBadTallies
		}
		c := string(b[1 : 1+n])
		b = b[1+n:]
		var v [3]int64
		for i := range v {
			x, w := binary.Varint(b)
			if w <= 0 {
				return nil, errBadTallies
			}
			v[i], b = x, b[w:]
		}
		t[c] = holon.Tally{Calls: v[0], Amount: journal.Amount(v[1]), Refunded: journal.Amount(v[2])}
	}
	return t, nil
}

// rollupRow is a rollup row as the write cache holds it: its first
// currency and tally inline, any others in more. A row is a value: the
// cache keeps a copy of it as it was before an update changed it (for the
// update's undo), which costs nothing where a map would be cloned, and
// more (rows in several currencies: rare) is never changed in place but
// replaced.
type rollupRow struct {
	cur  string
	t    holon.Tally
	more holon.Tallies
}

// rowOf is t as a rollupRow (its currencies in any order).
func rowOf(t holon.Tallies) rollupRow {
	var r rollupRow
	for c, x := range t {
		if r.cur == "" {
			r.cur, r.t = c, x
			continue
		}
		if r.more == nil {
			r.more = make(holon.Tallies, len(t)-1)
		}
		r.more[c] = x
	}
	return r
}

// tallies is the row as a map of its own.
func (r rollupRow) tallies() holon.Tallies {
	t := make(holon.Tallies, 1+len(r.more))
	if r.cur != "" {
		t[r.cur] = r.t
	}
	for c, x := range r.more {
		t[c] = x
	}
	return t
}

// add adds d to the tally in currency, as holon.Tallies.Add does: it
// refuses, changing nothing, a change that would leave a sum below zero.
func (r *rollupRow) add(currency string, d holon.Tally) error {
	if r.cur == "" || r.cur == currency {
		x, err := r.t.Plus(d)
		if err != nil {
			return err
		}
		r.cur, r.t = currency, x
		return nil
	}
	more := make(holon.Tallies, len(r.more)+1)
	for c, x := range r.more {
		more[c] = x
	}
	if err := more.Add(currency, d); err != nil {
		return err
	}
	r.more = more
	return nil
}

// appendRollupRow encodes a row as appendTallies encodes its map.
func appendRollupRow(b []byte, r rollupRow) []byte {
	if len(r.more) == 0 {
		if r.cur == "" {
			return b
		}
		return appendTally(b, r.cur, r.t)
	}
	return appendTallies(b, r.tallies())
}

// AddRollup adds d to a rollup row in currency.
func (tx *Tx) AddRollup(k holon.RollupKey, currency string, d holon.Tally) error {
	if len(currency) == 0 || len(currency) > 255 {
		return fmt.Errorf("rollup: currency %q", currency)
	}
	var kb [128]byte
	key := string(appendRollupKey(kb[:0], k))
	r, err := tx.rollup(key)
	if err != nil {
		return err
	}
	if err := r.add(currency, d); err != nil {
		return fmt.Errorf("rollup %c %s %c %s %s: %w", k.Kind, k.Owner, k.Dim, k.Day, k.Value, err)
	}
	if tx.cache != nil {
		cachedPut(tx, &tx.cache.rollups, key, r)
		return nil
	}
	return tx.put(tx.bkt(bucketRollups), []byte(key), appendRollupRow(nil, r))
}

// rollup reads a row (empty when it never moved), a value of the
// caller's.
func (tx *Tx) rollup(key string) (rollupRow, error) {
	if tx.cache != nil {
		return cachedGet(&tx.cache.rollups, tx.cache.hot.rollups, key, func() (rollupRow, error) { return tx.readRollup(key) })
	}
	return tx.readRollup(key)
}

// readRollup reads a row from the store.
func (tx *Tx) readRollup(key string) (rollupRow, error) {
	v := tx.get(bucketRollups, []byte(key))
	if v == nil {
		return rollupRow{}, nil
	}
	t, err := decodeTallies(v)
	return rowOf(t), err
}

// flushRollups writes the rows the cache changed (cache.go's flush).
func (tx *Tx) flushRollups(c *writeCache) error {
	var errs []error
	for k, e := range c.rollups.m {
		if e.dirty {
			// Key and value in the arena, which lasts as long as the
			// transaction, as bbolt and the undo log keep them.
			key, err := tx.encode(rollupRowKey(k))
			if err == nil {
				var v []byte
				if v, err = tx.encode(rollupValue(e.v)); err == nil {
					err = tx.putCached(bucketRollups, key, v)
				}
			}
			errs = append(errs, err)
			tx.logFlushed(&e.dirty)
			e.dirty = false
		}
	}
	return errors.Join(errs...)
}

// ForEachRollup calls fn for the rows of one kind, owner and dimension
// from day from to day to, in key order.
func (tx *Tx) ForEachRollup(kind byte, owner string, dim byte, from, to holon.Day, fn func(k holon.RollupKey, t holon.Tallies) error) error {
	if err := tx.flush(); err != nil {
		return err
	}
	if tx.bkt(bucketRollups) == nil || from > to {
		return nil
	}
	p := rollupPrefix(nil, kind, owner, dim)
	start := binary.BigEndian.AppendUint32(bytes.Clone(p), uint32(max(from, 0)))
	c := tx.cursor(bucketRollups)
	for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, p) && len(k) >= len(p)+4; k, v = c.Next() {
		day := holon.Day(binary.BigEndian.Uint32(k[len(p):]))
		if day > to {
			return nil
		}
		t, err := decodeTallies(v)
		if err != nil {
			return fmt.Errorf("rollup %q: %w", k, err)
		}
		if err := fn(holon.RollupKey{Kind: kind, Owner: owner, Dim: dim, Day: day, Value: string(k[len(p)+4:])}, t); err != nil {
			return err
		}
	}
	return nil
}

// RollupsKept reports whether the rollups count every receipt.
func (tx *Tx) RollupsKept() bool {
	return tx.get(bucketRollups, rollupsKept) != nil
}

// MarkRollupsKept records that they do.
func (tx *Tx) MarkRollupsKept() error {
	return tx.put(tx.bkt(bucketRollups), rollupsKept, []byte{1})
}

// ClearRollups deletes every row (and the mark), for a rebuild.
func (tx *Tx) ClearRollups() error {
	if err := tx.flush(); err != nil {
		return err
	}
	if tx.cache != nil {
		clear(tx.cache.rollups.m)
		tx.cache.forgetHot()
	}
	b := tx.bkt(bucketRollups)
	var keys [][]byte
	if err := b.ForEach(func(k, _ []byte) error { keys = append(keys, bytes.Clone(k)); return nil }); err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.del(b, k); err != nil {
			return err
		}
	}
	return nil
}

// ForEachRollupRow calls fn for every rollup row, in key order (holon
// verify's recomputation compares them all).
func (tx *Tx) ForEachRollupRow(fn func(k holon.RollupKey, t holon.Tallies) error) error {
	if err := tx.flush(); err != nil {
		return err
	}
	if tx.bkt(bucketRollups) == nil {
		return nil
	}
	return tx.forEach(bucketRollups, func(k, v []byte) error {
		if bytes.Equal(k, rollupsKept) {
			return nil
		}
		owner, rest, ok := bytes.Cut(k[min(1, len(k)):], []byte{0})
		if len(k) < 1 || !ok || len(rest) < 5 {
			return fmt.Errorf("rollup key %q is malformed", k)
		}
		t, err := decodeTallies(v)
		if err != nil {
			return fmt.Errorf("rollup %q: %w", k, err)
		}
		return fn(holon.RollupKey{Kind: k[0], Owner: string(owner), Dim: rest[0], Day: holon.Day(binary.BigEndian.Uint32(rest[1:5])), Value: string(rest[5:])}, t)
	})
}
