package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"holon.dev/holon"
)

func init() {
	add(
		behaviour{"Docs/ForEachWithPrefix", testDocsForEach},
		behaviour{"Docs/ForEachAfterPages", testDocsForEachAfter},
		behaviour{"Docs/PutGetDelete", testDocsPutGetDelete},
		behaviour{"Docs/AppendInOrder", testDocsAppend},
		behaviour{"Docs/AppendOnlyBucketRefusesRewrites", testDocsAppendOnly},
	)
}

// Ensure that ForEach reads the documents whose keys start with a prefix,
// in key order, and stops when fn says so.
func testDocsForEach(t *testing.T, e *env) {
	e.update(func(tx holon.Tx) error {
		for _, k := range []string{"b/2", "a/1", "b/1", "b", "ba", "c/1", "b/10"} {
			if err := tx.Put(holon.BucketFiles, k, map[string]string{"k": k}); err != nil {
				return err
			}
		}
		return nil
	})
	e.view(func(tx holon.Tx) error {
		for _, tt := range []struct {
			prefix string
			stop   int
			want   string
		}{
			{"b/", 0, "[b/1 b/10 b/2]"},
			{"b", 0, "[b b/1 b/10 b/2 ba]"},
			{"", 0, "[a/1 b b/1 b/10 b/2 ba c/1]"},
			{"b/", 2, "[b/1 b/10]"},
			{"d", 0, "[]"},
		} {
			var keys []string
			err := tx.ForEach(holon.BucketFiles, tt.prefix, func(key string, raw json.RawMessage) (bool, error) {
				var v map[string]string
				if err := json.Unmarshal(raw, &v); err != nil || v["k"] != key {
					t.Errorf("document under %s reads %s (%v)", key, raw, err)
				}
				keys = append(keys, key)
				return tt.stop == 0 || len(keys) < tt.stop, nil
			})
			if err != nil {
				return err
			}
			if fmt.Sprint(keys) != tt.want {
				t.Errorf("ForEach(%q), stopping at %d: %v, want %s", tt.prefix, tt.stop, keys, tt.want)
			}
		}
		return nil
	})
}

// Ensure that ForEachAfter pages through a prefix from the key after its
// cursor, each document once, without gaps.
func testDocsForEachAfter(t *testing.T, e *env) {
	var want []string
	e.update(func(tx holon.Tx) error {
		for i := range 25 {
			k := fmt.Sprintf("alice/f%02d", i)
			want = append(want, k)
			if err := tx.Put(holon.BucketFiles, k, i); err != nil {
				return err
			}
			if err := tx.Put(holon.BucketFiles, fmt.Sprintf("bob/f%02d", i), i); err != nil {
				return err
			}
		}
		return tx.Put(holon.BucketFiles, "alicf", 0)
	})
	var got []string
	after := ""
	for range 100 {
		var page []string
		e.view(func(tx holon.Tx) error {
			return tx.ForEachAfter(holon.BucketFiles, "alice/", after, func(key string, _ json.RawMessage) (bool, error) {
				page = append(page, key)
				return len(page) < 10, nil
			})
		})
		got = append(got, page...)
		if len(page) < 10 {
			break
		}
		after = page[len(page)-1]
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pages of alice/: %v, want %v", got, want)
	}
	e.view(func(tx holon.Tx) error {
		var keys []string
		err := tx.ForEachAfter(holon.BucketFiles, "alice/", "alice/f09x", func(key string, _ json.RawMessage) (bool, error) {
			keys = append(keys, key)
			return len(keys) < 2, nil
		})
		if fmt.Sprint(keys) != "[alice/f10 alice/f11]" {
			t.Errorf("ForEachAfter a key that is not stored: %v, want [alice/f10 alice/f11]", keys)
		}
		return err
	})
}

// Ensure that a document reads back as put, that a missing one is
// ErrNotFound, and that Delete removes it.
func testDocsPutGetDelete(t *testing.T, e *env) {
	type doc struct {
		Name string `json:"name"`
		N    int    `json:"n"`
	}
	e.update(func(tx holon.Tx) error { return tx.Put(holon.BucketUsers, "bob", doc{"Bob", 1}) })
	e.update(func(tx holon.Tx) error { return tx.Put(holon.BucketUsers, "bob", doc{"Bob", 2}) })
	e.view(func(tx holon.Tx) error {
		var d doc
		if err := tx.Get(holon.BucketUsers, "bob", &d); err != nil || d != (doc{"Bob", 2}) {
			t.Errorf("Get(users, bob) = %+v, %v; want the last put", d, err)
		}
		if err := tx.Get(holon.BucketUsers, "eve", &d); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("Get(users, eve): %v, want ErrNotFound", err)
		}
		if err := tx.Get(holon.BucketKeys, "bob", &d); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("Get(keys, bob): %v, want ErrNotFound (buckets are apart)", err)
		}
		return nil
	})
	e.update(func(tx holon.Tx) error { return tx.Delete(holon.BucketUsers, "bob") })
	e.view(func(tx holon.Tx) error {
		var d doc
		if err := tx.Get(holon.BucketUsers, "bob", &d); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("Get after Delete: %v, want ErrNotFound", err)
		}
		return nil
	})
}

// Ensure that Append stores documents under increasing keys that ForEach
// reads in the order they were appended.
func testDocsAppend(t *testing.T, e *env) {
	var seqs []uint64
	for i := range 12 {
		e.update(func(tx holon.Tx) error {
			seq, err := tx.Append(holon.BucketModLog, i)
			seqs = append(seqs, seq)
			return err
		})
	}
	var got []int
	e.view(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketModLog, "", func(_ string, raw json.RawMessage) (bool, error) {
			var i int
			err := json.Unmarshal(raw, &i)
			got = append(got, i)
			return true, err
		})
	})
	if fmt.Sprint(got) != "[0 1 2 3 4 5 6 7 8 9 10 11]" {
		t.Errorf("appended documents read %v, want 0..11 in order", got)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Errorf("Append sequence numbers %v do not increase", seqs)
		}
	}
}

// Ensure that an append-only bucket (the moderation log) refuses to
// overwrite or delete a document.
func testDocsAppendOnly(t *testing.T, e *env) {
	var key string
	e.update(func(tx holon.Tx) error {
		if _, err := tx.Append(holon.BucketModLog, "first"); err != nil {
			return err
		}
		return tx.ForEach(holon.BucketModLog, "", func(k string, _ json.RawMessage) (bool, error) { key = k; return false, nil })
	})
	if err := e.s.Update(bg, func(tx holon.Tx) error { return tx.Put(holon.BucketModLog, key, "rewritten") }); err == nil {
		t.Error("Put over a moderation log entry: no error")
	}
	if err := e.s.Update(bg, func(tx holon.Tx) error { return tx.Delete(holon.BucketModLog, key) }); err == nil {
		t.Error("Delete of a moderation log entry: no error")
	}
	e.view(func(tx holon.Tx) error {
		var s string
		if err := tx.Get(holon.BucketModLog, key, &s); err != nil || s != "first" {
			t.Errorf("the moderation log entry reads %q, %v; want first", s, err)
		}
		return nil
	})
}
