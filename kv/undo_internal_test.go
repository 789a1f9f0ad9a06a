package kv

import (
	"fmt"
	"testing"
)

// Ensure that undoing an update takes out of the write cache an entry the
// update put there without reading it first, and restores one it changed.
func TestTx_UndoUpdate_Cache(t *testing.T) {
	tx := &Tx{cache: newWriteCache(newHotCache())}
	tx.beginUpdate()
	cachedPut(tx, &tx.cache.counters, "kept", 1)
	tx.beginUpdate() // the first update succeeded
	cachedPut(tx, &tx.cache.counters, "kept", 2)
	cachedPut(tx, &tx.cache.counters, "kept", 3)
	cachedPut(tx, &tx.cache.counters, "new", 7)
	if err := tx.undoUpdate(); err != nil {
		t.Fatal(err)
	}
	if c, ok := tx.cache.counters.m["new"]; ok {
		t.Errorf("the undone update's new entry is still cached: %+v", c)
	}
	if c := tx.cache.counters.m["kept"]; c == nil || c.v != 1 || !c.dirty {
		t.Errorf("kept = %+v, want 1, dirty (as the first update left it)", c)
	}
}

// Ensure that a write cache's entries stay right as its tables grow past
// the blocks they are allocated from (an entry of a full block must not
// move or be reused), that undo takes out entries of an earlier block,
// and that reset leaves it empty for the next transaction with nothing
// of the last one readable, however often it is reused.
func TestWriteCache_BlocksAndReset(t *testing.T) {
	hot := newHotCache()
	c := newWriteCache(hot)
	for round := range 3 {
		c.reset(hot)
		tx := &Tx{cache: c}
		tx.beginUpdate()
		const n = 200
		for i := range n {
			cachedPut(tx, &c.counters, fmt.Sprint("k", i), uint64(round*1000+i))
		}
		tx.beginUpdate()
		for i := range n {
			if i%2 == 0 {
				cachedPut(tx, &c.counters, fmt.Sprint("k", i), 1)
			}
			cachedPut(tx, &c.counters, fmt.Sprint("new", i), 9)
		}
		if err := tx.undoUpdate(); err != nil {
			t.Fatal(err)
		}
		if len(c.counters.m) != n {
			t.Fatalf("round %d: %d entries after the undo, want %d", round, len(c.counters.m), n)
		}
		for i := range n {
			e := c.counters.m[fmt.Sprint("k", i)]
			if e == nil || e.v != uint64(round*1000+i) || !e.dirty {
				t.Fatalf("round %d: k%d = %+v, want %d, dirty", round, i, e, round*1000+i)
			}
		}
	}
	c.reset(hot)
	if len(c.counters.m) != 0 || len(c.counters.slab) != 0 {
		t.Fatalf("after reset: %d entries, %d in the block", len(c.counters.m), len(c.counters.slab))
	}
	hot.counters["k1"] = 42
	if v, err := cachedGet(&c.counters, hot.counters, "k1", func() (uint64, error) { return 0, nil }); err != nil || v != 42 {
		t.Fatalf("after reset, k1 = %d, %v; want the hot cache's 42", v, err)
	}
}
