package kv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// Per-version counters written in a settlement's own transaction, so that
// an author's earnings and an agent's latency are read, never computed by
// scanning the journal or the events. In the writer's transactions they go
// through the write cache (cache.go): each is decoded and put once per
// commit, however many settlements of the commit count in it. A cached
// value is never changed in place (the undo log keeps the one before):
// each change works on a copy.
var (
	bucketEarnings = []byte("earnings") // agent ref → Earnings
	bucketLatency  = []byte("latency")  // agent ref → Latency
)

func init() { allBuckets = append(allBuckets, bucketEarnings, bucketLatency) }

// metaEarningsFrom is the meta row holding the journal row of the first
// settlement counted in earnings (decimal text): a store written before
// the counters existed has earlier settlements that were never counted.
var metaEarningsFrom = []byte("earnings_from")

// AddEarnings adds to a version's earnings in a currency. A settlement
// calls it once per level of its split, in its own transaction, after
// appending its journal entry.
func (tx *Tx) AddEarnings(ref, currency string, paidCalls int64, own, royalties journal.Amount) error {
	if err := tx.markFrom(metaEarningsFrom, bucketJournal); err != nil {
		return err
	}
	e, err := tx.Earnings(ref)
	if err != nil {
		return err
	}
	e = maps.Clone(e)
	if err := e.Add(currency, paidCalls, own, royalties); err != nil {
		return fmt.Errorf("earnings of %s: %w", ref, err)
	}
	if tx.cache != nil {
		cachedPut(tx, &tx.cache.earnings, ref, e)
		return nil
	}
	return tx.putJSON(bucketEarnings, []byte(ref), e)
}

// markFrom records, the first time a counter is written, the row of seq
// (the one just appended) from which it counts.
func (tx *Tx) markFrom(key, seq []byte) error {
	meta := tx.bkt(bucketMeta)
	if meta.Get(key) != nil {
		return nil
	}
	return tx.put(meta, key, []byte(strconv.FormatUint(tx.bkt(seq).Sequence(), 10)))
}

// countsFrom reads a markFrom row.
func (tx *Tx) countsFrom(key []byte) (uint64, bool) {
	v := tx.bkt(bucketMeta).Get(key)
	if v == nil {
		return 0, false
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	return n, err == nil
}

// LatencyFrom is the first call event the latency histograms include;
// false when none was counted yet.
func (tx *Tx) LatencyFrom() (uint64, bool) { return tx.countsFrom(metaLatencyFrom) }

// EarningsFrom is the journal row of the first settlement the earnings
// counters include; false when none was counted yet.
func (tx *Tx) EarningsFrom() (uint64, bool) { return tx.countsFrom(metaEarningsFrom) }

// Earnings reads a version's earnings (empty when it never earned). In a
// write transaction the value may be the cache's: not to be changed.
func (tx *Tx) Earnings(ref string) (holon.Earnings, error) {
	if tx.cache != nil {
		return cachedGet(&tx.cache.earnings, tx.cache.hot.earnings, ref, func() (holon.Earnings, error) { return tx.readEarnings(ref) })
	}
	return tx.readEarnings(ref)
}

func (tx *Tx) readEarnings(ref string) (holon.Earnings, error) {
	e := holon.Earnings{}
	if err := tx.getJSON(bucketEarnings, []byte(ref), &e); err != nil && err != holon.ErrNotFound {
		return nil, err
	}
	return e, nil
}

// ForEachEarnings calls fn for every version whose ref starts with prefix
// ("" for all, "lena/" for an author's) that earned, in ref order.
func (tx *Tx) ForEachEarnings(prefix string, fn func(ref string, e holon.Earnings) error) error {
	if err := tx.flush(); err != nil {
		return err
	}
	c := tx.cursor(bucketEarnings)
	p := []byte(prefix)
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		e := holon.Earnings{}
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("decode earnings %s: %w", k, err)
		}
		if err := fn(string(k), e); err != nil {
			return err
		}
	}
	return nil
}

// metaLatencyFrom is the meta row holding the first call event counted in
// latency histograms (decimal text), as metaEarningsFrom for earnings.
var metaLatencyFrom = []byte("latency_from")

// AddLatency counts one settled run of a version, of that duration. The
// settlement calls it after appending the run's call event.
func (tx *Tx) AddLatency(ref string, ms int64) error {
	if err := tx.markFrom(metaLatencyFrom, bucketEvents); err != nil {
		return err
	}
	l, err := tx.Latency(ref)
	if err != nil {
		return err
	}
	l.Counts = slices.Clone(l.Counts)
	l.Counts[holon.LatencyBucket(ms)]++
	if tx.cache != nil {
		cachedPut(tx, &tx.cache.latency, ref, l)
		return nil
	}
	return tx.putJSON(bucketLatency, []byte(ref), l)
}

// Latency reads a version's latency histogram (all zero when it never
// ran). In a write transaction the value may be the cache's: not to be
// changed.
func (tx *Tx) Latency(ref string) (holon.Latency, error) {
	if tx.cache != nil {
		return cachedGet(&tx.cache.latency, tx.cache.hot.latency, ref, func() (holon.Latency, error) { return tx.readLatency(ref) })
	}
	return tx.readLatency(ref)
}

func (tx *Tx) readLatency(ref string) (holon.Latency, error) {
	var l holon.Latency
	if err := tx.getJSON(bucketLatency, []byte(ref), &l); err != nil && err != holon.ErrNotFound {
		return l, err
	}
	if len(l.Counts) != len(holon.LatencyBoundsMS)+1 {
		grown := make([]int64, len(holon.LatencyBoundsMS)+1)
		copy(grown, l.Counts)
		l.Counts = grown
	}
	return l, nil
}

// ForEachLatency calls fn for every version's histogram, in ref order.
func (tx *Tx) ForEachLatency(fn func(ref string, l holon.Latency) error) error {
	if err := tx.flush(); err != nil {
		return err
	}
	return tx.forEach(bucketLatency, func(k, v []byte) error {
		var l holon.Latency
		if err := json.Unmarshal(v, &l); err != nil {
			return fmt.Errorf("decode latency %s: %w", k, err)
		}
		return fn(string(k), l)
	})
}
