package kv_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// listReceipts lists a mandate's receipt ids newest first, in pages of
// limit, following each page's Next.
func listReceipts(tb testing.TB, s *kv.Store, mandate string, limit int) []string {
	tb.Helper()
	var ids []string
	before := ""
	for {
		var page holon.ReceiptPage
		mustView(tb, s, func(tx *kv.Tx) error {
			var err error
			page, err = tx.Receipts(mandate, before, limit)
			return err
		})
		for _, r := range page.Receipts {
			if r.Mandate != mandate {
				tb.Errorf("receipts of %s list %s of %s", mandate, r.ID, r.Mandate)
			}
			ids = append(ids, r.ID)
		}
		if page.Next == "" {
			return ids
		}
		before = page.Next
	}
}

// indexed is the receipt index's every key, as holon verify reads it.
func indexed(tb testing.TB, s *kv.Store) []string {
	tb.Helper()
	var keys []string
	mustView(tb, s, func(tx *kv.Tx) error {
		return tx.ForEachReceiptIndexed(func(m string, seq uint64) error {
			keys = append(keys, fmt.Sprintf("%s %08d", m, seq))
			return nil
		})
	})
	return keys
}

// Ensure that a mandate's receipts are listed newest first, page by page,
// whether their index keys are still in the log or already folded into the
// index, with a fold between receipts whose ids were drawn in another
// order than they were written; and that Export streams the index's keys
// the same before and after a fold.
func TestReceiptIndex_LogFolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "holon.db")
	s, err := kv.OpenFoldAtForTest(path, kv.Options{NoSync: true}, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mandates := []string{"alice/a", "alice/b", "bob/x"}
	want := map[string][]string{}
	var late []string // ids drawn early, written after a fold
	mustUpdate(t, s, func(tx *kv.Tx) error {
		for range 3 {
			id, err := tx.NewReceiptID()
			if err != nil {
				return err
			}
			late = append(late, id)
		}
		return nil
	})
	put := func(tx *kv.Tx, id, m string) error {
		want[m] = append([]string{id}, want[m]...)
		return tx.PutReceipt(&holon.Receipt{ID: id, Mandate: m, Status: "denied", Payer: "alice", Created: tx.Now()})
	}
	check := func(when string) {
		t.Helper()
		for _, m := range mandates {
			w := slices.Clone(want[m])
			slices.SortFunc(w, func(a, b string) int {
				sa, _ := holon.ReceiptSeq(a)
				sb, _ := holon.ReceiptSeq(b)
				return int(sb) - int(sa)
			})
			for _, limit := range []int{1, 2, 50} {
				if got := listReceipts(t, s, m, limit); !slices.Equal(got, w) {
					t.Errorf("%s: receipts of %s in pages of %d: %v, want %v", when, m, limit, got, w)
				}
			}
		}
	}
	for round := range 6 {
		mustUpdate(t, s, func(tx *kv.Tx) error {
			for i := range 2 + round%3 {
				id, err := tx.NewReceiptID()
				if err != nil {
					return err
				}
				if err := put(tx, id, mandates[(round+i)%len(mandates)]); err != nil {
					return err
				}
			}
			if round == 4 {
				// The ids drawn first, written now: below keys already folded.
				for i, id := range late {
					if err := put(tx, id, mandates[i]); err != nil {
						return err
					}
				}
			}
			return nil
		})
		check(fmt.Sprintf("round %d (%d keys in the log, %d folds)", round, s.LogKeysForTest(), s.FoldsForTest()))
	}
	if s.FoldsForTest() < 2 || s.LogKeysForTest() == 0 {
		t.Fatalf("%d folds, %d keys left in the log: want at least 2 folds and some keys not folded", s.FoldsForTest(), s.LogKeysForTest())
	}
	keys := indexed(t, s)
	if !slices.IsSorted(keys) || len(keys) != 21 {
		t.Errorf("index keys (%d): %v", len(keys), keys)
	}
	before := export(t, s)
	// A fold changes where the keys are, not what Export streams.
	mustUpdate(t, s, func(tx *kv.Tx) error { return nil })
	s.Close()
	s2, err := kv.OpenFoldAtForTest(path, kv.Options{NoSync: true}, 1)
	if err != nil {
		t.Fatal(err)
	}
	s = s2
	mustUpdate(t, s, func(tx *kv.Tx) error { _, err := tx.NewApprovalID(); return err })
	if n := s.LogKeysForTest(); n != 0 {
		t.Fatalf("%d keys in the log after a fold", n)
	}
	check("after reopening and folding")
	after := export(t, s)
	idx := func(e exported) []kv.Row {
		var out []kv.Row
		for _, r := range e.rows {
			if r.Bucket == "receipts_by_mandate" {
				out = append(out, r)
			}
		}
		return out
	}
	if !reflect.DeepEqual(idx(before), idx(after)) || len(idx(after)) != 21 {
		t.Errorf("receipts_by_mandate exported %d rows before the fold, %d after, or they differ", len(idx(before)), len(idx(after)))
	}
	for _, b := range after.snap.Buckets {
		if b.Name == "receipts_by_mandate_log" {
			t.Errorf("the index's log is exported: %+v", b)
		}
	}
}

// copyGolden copies a store of kv/testdata into a temporary directory.
func copyGolden(tb testing.TB, name string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "holon.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Ensure that a store of file format 1 (written by the gateway as it was
// before the receipt index's log, on 2026-12-01 and 2026-12-03) is
// upgraded at Open: its backup is the same to the byte as before the
// upgrade, its mandates list the same receipts, a new receipt joins them,
// and it opens again; and that a format this code does not know is
// refused, read-write and read-only.
func TestStore_Open_UpgradesFormat1(t *testing.T) {
	for _, golden := range []string{"store-2026-12-01.db", "store-2026-12-03.db"} {
		t.Run(golden, func(t *testing.T) {
			path := copyGolden(t, golden)
			ro, err := kv.OpenReadOnly(path)
			if err != nil {
				t.Fatal(err)
			}
			before := export(t, ro)
			var mandates []string
			mustView(t, ro, func(tx *kv.Tx) error {
				return tx.ForEachMandate(func(id string, _ holon.Doc) error { mandates = append(mandates, id); return nil })
			})
			lists := map[string][]string{}
			total := 0
			for _, m := range mandates {
				lists[m] = listReceipts(t, ro, m, 3)
				total += len(lists[m])
			}
			ro.Close()
			if total < 10 || len(mandates) < 2 {
				t.Fatalf("the golden store lists %d receipts under %d mandates", total, len(mandates))
			}
			if schema := rawSchema(t, path); schema != 1 {
				t.Fatalf("the golden store's format is %d, want 1", schema)
			}

			s, err := kv.Open(path, kv.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			after := export(t, s)
			// Open creates the buckets added since (budget windows and
			// refunds, after 2026-12-01), empty: a backup lists them.
			var added []kv.BucketInfo
			for _, b := range after.snap.Buckets {
				if !slices.ContainsFunc(before.snap.Buckets, func(o kv.BucketInfo) bool { return o.Name == b.Name }) && b.Rows == 0 && b.Sequence == 0 {
					added = append(added, b)
				}
			}
			after.snap.Buckets = slices.DeleteFunc(after.snap.Buckets, func(b kv.BucketInfo) bool { return slices.Contains(added, b) })
			if !reflect.DeepEqual(after, before) {
				t.Errorf("the backup changed with the upgrade:\n got %+v\nwant %+v", after.snap, before.snap)
			}
			for _, m := range mandates {
				if got := listReceipts(t, s, m, 3); !slices.Equal(got, lists[m]) {
					t.Errorf("receipts of %s after the upgrade: %v, want %v", m, got, lists[m])
				}
			}
			var id string
			mustUpdate(t, s, func(tx *kv.Tx) error {
				var err error
				if id, err = tx.NewReceiptID(); err != nil {
					return err
				}
				return tx.PutReceipt(&holon.Receipt{ID: id, Mandate: mandates[0], Status: "denied", Payer: "alice", Created: tx.Now()})
			})
			if got := listReceipts(t, s, mandates[0], 50); len(got) == 0 || got[0] != id || len(got) != len(lists[mandates[0]])+1 {
				t.Errorf("receipts of %s after a new one: %v", mandates[0], got)
			}
			s.Close()
			if schema := rawSchema(t, path); schema != kv.FileFormat {
				t.Errorf("format %d after the upgrade, want %d", schema, kv.FileFormat)
			}
			s, err = kv.Open(path, kv.Options{NoSync: true})
			if err != nil {
				t.Fatalf("reopen the upgraded store: %v", err)
			}
			if got := indexed(t, s); len(got) != total+1 {
				t.Errorf("%d index keys, want %d", len(got), total+1)
			}
			s.Close()
			if ro, err := kv.OpenReadOnly(path); err != nil {
				t.Errorf("open the upgraded store read-only: %v", err)
			} else {
				ro.Close()
			}

			// Format 3 is a store that was logging (wal.go); 4 is from a
			// later gateway.
			setSchema(t, path, 4)
			if s, err := kv.Open(path, kv.Options{NoSync: true}); err == nil || !strings.Contains(err.Error(), "schema version 4") {
				if s != nil {
					s.Close()
				}
				t.Errorf("a store of format 4 opened: %v", err)
			}
			if ro, err := kv.OpenReadOnly(path); err == nil {
				ro.Close()
				t.Errorf("a store of format 4 opened read-only")
			}
		})
	}
}

// rawSchema reads a store file's meta/schema row.
func rawSchema(tb testing.TB, path string) uint64 {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	var v uint64
	err = db.View(func(btx *bolt.Tx) error {
		b := btx.Bucket([]byte("meta")).Get([]byte("schema"))
		if len(b) != 8 {
			return fmt.Errorf("schema row %x", b)
		}
		v = binary.BigEndian.Uint64(b)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// setSchema overwrites a store file's meta/schema row.
func setSchema(tb testing.TB, path string, v uint64) {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(btx *bolt.Tx) error {
		return btx.Bucket([]byte("meta")).Put([]byte("schema"), binary.BigEndian.AppendUint64(nil, v))
	})
	if err != nil {
		tb.Fatal(err)
	}
}
