package kv

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"holon.dev/holon/journal"
)

// Ensure that deferredIndex names each deferred bucket's place, and no
// other bucket's.
func TestDeferred_Index(t *testing.T) {
	for i, b := range deferredBuckets {
		if got := deferredIndex(b); got != i {
			t.Errorf("deferredIndex(%s) = %d, want %d", b, got, i)
		}
	}
	for _, b := range [][]byte{bucketJournal, bucketMeta, bucketReceipts, bucketEvents, bucketHolds} {
		if got := deferredIndex(b); got != -1 {
			t.Errorf("deferredIndex(%s) = %d, want -1", b, got)
		}
	}
}

// Ensure that a transaction's cursor over a bucket with pending rows walks
// bbolt's rows and the pending ones as one bucket, in key order, a pending
// value in place of bbolt's under the same key, from First and from any
// Seek; and that the bucket's row count counts each key once.
func TestDeferred_CursorMerges(t *testing.T) {
	s := openTemp(t)
	err := s.db.Update(func(btx *bolt.Tx) error {
		for _, k := range []string{"a", "c", "e"} {
			if err := btx.Bucket(bucketAccounts).Put([]byte(k), []byte("file "+k)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	add := [len(deferredBuckets)]map[string][]byte{}
	add[deferredIndex(bucketAccounts)] = map[string][]byte{"b": []byte("pending b"), "c": []byte("pending c")}
	older := (*pending)(nil).with(&add)
	add[deferredIndex(bucketAccounts)] = map[string][]byte{"f": []byte("pending f")}
	pend := older.with(&add)
	if _, ok := older.get(deferredIndex(bucketAccounts), []byte("f")); ok {
		t.Fatal("with changed the pending set it was given")
	}

	walk := func(tx *Tx, seek string) string {
		c := tx.cursor(bucketAccounts)
		var k, v []byte
		if seek == "" {
			k, v = c.First()
		} else {
			k, v = c.Seek([]byte(seek))
		}
		var out []string
		for ; k != nil; k, v = c.Next() {
			out = append(out, fmt.Sprintf("%s=%s", k, v))
		}
		return strings.Join(out, " ")
	}
	err = s.db.View(func(btx *bolt.Tx) error {
		tx := &Tx{btx: btx, pend: pend}
		for _, c := range []struct{ seek, want string }{
			{"", "a=file a b=pending b c=pending c e=file e f=pending f"},
			{"b", "b=pending b c=pending c e=file e f=pending f"},
			{"bb", "c=pending c e=file e f=pending f"},
			{"c", "c=pending c e=file e f=pending f"},
			{"d", "e=file e f=pending f"},
			{"e", "e=file e f=pending f"},
			{"ee", "f=pending f"},
			{"g", ""},
		} {
			if got := walk(tx, c.seek); got != c.want {
				t.Errorf("from %q: %s, want %s", c.seek, got, c.want)
			}
		}
		if got := string(tx.get(bucketAccounts, []byte("c"))); got != "pending c" {
			t.Errorf("get c = %q, want the pending value", got)
		}
		if got := string(tx.get(bucketAccounts, []byte("e"))); got != "file e" {
			t.Errorf("get e = %q, want the file's", got)
		}
		if n := tx.rows(bucketAccounts, btx.Bucket(bucketAccounts)); n != 5 {
			t.Errorf("%d rows counted, want 5", n)
		}
		// Without pending rows, the cursor is bbolt's.
		if got := walk(&Tx{btx: btx}, ""); got != "a=file a c=file c e=file e" {
			t.Errorf("without pending rows: %s", got)
		}
		// Another bucket's pending rows are not this one's.
		if k, _ := tx.cursor(bucketBudgets).First(); k != nil {
			t.Errorf("the budgets walk the accounts' pending row %s", k)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Ensure that a chain of pending sets, each commit's rows over the ones
// before, reads the newest value of each key, before and after the chain
// is folded into one layer, and that each older set still reads its own.
func TestDeferred_Layers(t *testing.T) {
	i := deferredIndex(bucketRollups)
	var sets []*pending
	var p *pending
	for c := range 3*maxLayers + 1 {
		add := [len(deferredBuckets)]map[string][]byte{}
		add[i] = map[string][]byte{fmt.Sprintf("k%d", c%5): []byte(fmt.Sprintf("v%d", c))}
		if c%3 == 0 {
			add[deferredIndex(bucketAccounts)] = map[string][]byte{"a": []byte(fmt.Sprintf("a%d", c))}
		}
		p = p.with(&add)
		sets = append(sets, p)
	}
	for c, p := range sets {
		want := map[string]string{}
		for d := 0; d <= c; d++ {
			want[fmt.Sprintf("k%d", d%5)] = fmt.Sprintf("v%d", d)
		}
		keys, vals := p.sorted(i)
		var got []string
		for _, k := range keys {
			got = append(got, k+"="+string(vals[k]))
			if v, ok := p.get(i, []byte(k)); !ok || string(v) != want[k] {
				t.Errorf("set %d: get %s = %s, want %s", c, k, v, want[k])
			}
		}
		var w []string
		for _, k := range slices.Sorted(maps.Keys(want)) {
			w = append(w, k+"="+want[k])
		}
		if strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("set %d walks %v, want %v", c, got, w)
		}
		if v, _ := p.get(deferredIndex(bucketAccounts), []byte("a")); string(v) != fmt.Sprintf("a%d", c/3*3) {
			t.Errorf("set %d: account a = %s, want a%d", c, v, c/3*3)
		}
		if _, ok := p.get(i, []byte("k9")); ok {
			t.Errorf("set %d has a key never written", c)
		}
	}
	if d := sets[len(sets)-1].b[i].depth; d > maxLayers {
		t.Errorf("the chain is %d layers deep, want at most %d", d, maxLayers)
	}
}

// Ensure that a commit putting the pending rows into bbolt (the one
// before a checkpoint) keeps the writer's hot cache: it writes the
// cache's own rows, not around it.
func TestDeferred_MaterializeKeepsHotRows(t *testing.T) {
	s := openTemp(t)
	credit := func(account string) {
		t.Helper()
		e, err := journal.Transfer("signup:"+account, "external:demo-credit", account, journal.MustParseAmount("1.00"))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Update(context.Background(), func(tx *Tx) error { _, err := tx.AppendEntry(e); return err }); err != nil {
			t.Fatal(err)
		}
	}
	credit("alice")
	if _, ok := s.hot.accounts["alice"]; !ok {
		t.Fatal("a committed account is not in the hot cache: the test shows nothing")
	}
	s.flushNext = true // as a due checkpoint asks
	credit("bob")
	if s.pend != nil {
		t.Fatalf("%d rows still pending after the commit that puts them into bbolt", s.pend.n)
	}
	if _, ok := s.hot.accounts["alice"]; !ok {
		t.Error("the commit that put the pending rows into bbolt emptied the hot cache")
	}
}

// openTemp opens a store of the test's own, closed when it ends.
func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "holon.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
