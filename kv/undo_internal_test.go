package kv

import "testing"

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
	if c, ok := tx.cache.counters["new"]; ok {
		t.Errorf("the undone update's new entry is still cached: %+v", c)
	}
	if c := tx.cache.counters["kept"]; c == nil || c.v != 1 || !c.dirty {
		t.Errorf("kept = %+v, want 1, dirty (as the first update left it)", c)
	}
}
