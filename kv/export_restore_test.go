package kv_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// exported is everything Export streamed.
type exported struct {
	snap kv.Snapshot
	rows []kv.Row
}

func export(tb testing.TB, s *kv.Store) exported {
	tb.Helper()
	var e exported
	err := s.Export(func(sn kv.Snapshot) error { e.snap = sn; return nil }, func(b string, k, v []byte) error {
		e.rows = append(e.rows, kv.Row{Bucket: b, Key: bytes.Clone(k), Value: bytes.Clone(v)})
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// count is the number of rows exported from bucket.
func (e exported) count(bucket string) int {
	n := 0
	for _, r := range e.rows {
		if r.Bucket == bucket {
			n++
		}
	}
	return n
}

// feed returns a next function over rows, then io.EOF.
func feed(rows []kv.Row) func() (kv.Row, error) {
	i := 0
	return func() (kv.Row, error) {
		if i == len(rows) {
			return kv.Row{}, io.EOF
		}
		i++
		return rows[i-1], nil
	}
}

// populate writes journal entries, receipts, an approval and app documents.
func populate(tb testing.TB, s *kv.Store) {
	tb.Helper()
	credit(tb, s, "alice", "5.00")
	credit(tb, s, "bob", "2.00")
	mustUpdate(tb, s, func(tx *kv.Tx) error {
		for range 3 {
			id, err := tx.NewReceiptID()
			if err != nil {
				return err
			}
			if err := tx.PutReceipt(&holon.Receipt{ID: id, Mandate: "alice/sandbox", Status: "denied", Payer: "alice", Created: tx.Now()}); err != nil {
				return err
			}
		}
		if _, err := tx.NewApprovalID(); err != nil {
			return err
		}
		if err := tx.Put(holon.BucketUsers, "alice", map[string]string{"handle": "alice"}); err != nil {
			return err
		}
		_, err := tx.Append(holon.BucketModLog, map[string]string{"action": "yank"})
		return err
	})
}

// Ensure that Export streams every bucket with its row count and sequence,
// and that Restore rebuilds an identical store whose ids continue.
func TestStore_Export_Restore(t *testing.T) {
	src := mustOpen(t, kv.Options{NoSync: true})
	populate(t, src)
	want := export(t, src)
	if want.snap.Schema != kv.SchemaVersion {
		t.Errorf("schema %d", want.snap.Schema)
	}
	var names []string
	var total int64
	seqs := map[string]uint64{}
	for _, b := range want.snap.Buckets {
		names = append(names, b.Name)
		total += b.Rows
		seqs[b.Name] = b.Sequence
	}
	if total != int64(len(want.rows)) {
		t.Errorf("snapshot counts %d rows, %d were streamed", total, len(want.rows))
	}
	for _, b := range kv.Buckets() {
		if !strings.Contains(","+strings.Join(names, ",")+",", ","+b+",") {
			t.Errorf("bucket %s not exported", b)
		}
	}
	if seqs["receipts"] != 3 || seqs["approvals"] != 1 || seqs["journal"] != 2 || seqs["modlog"] != 1 {
		t.Errorf("sequences %v", seqs)
	}

	path := filepath.Join(t.TempDir(), "copy.db")
	if err := kv.Restore(path, want.snap, feed(want.rows)); err != nil {
		t.Fatal(err)
	}
	dst, err := kv.Open(path, kv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if got := export(t, dst); !reflect.DeepEqual(got, want) {
		t.Errorf("restored store differs:\n got %+v\nwant %+v", got.snap, want.snap)
	}
	mustView(t, dst, func(tx *kv.Tx) error { return tx.VerifyJournal() })
	mustUpdate(t, dst, func(tx *kv.Tx) error {
		if id, _ := tx.NewReceiptID(); id != "r4" {
			t.Errorf("next receipt %s, want r4", id)
		}
		if id, _ := tx.NewApprovalID(); id != "a2" {
			t.Errorf("next approval %s, want a2", id)
		}
		row, err := tx.AppendEntry(transfer(t, "signup:carol", "external:demo-credit", "carol", "1.00"))
		if err != nil || row.Seq != 3 {
			t.Errorf("next journal row %d, %v; want 3", row.Seq, err)
		}
		return nil
	})
	mustView(t, dst, func(tx *kv.Tx) error { return tx.VerifyJournal() })
}

// Ensure that Restore writes nothing when the rows do not match the
// snapshot or the feed fails: no database, no temporary file.
func TestRestore_Refuses(t *testing.T) {
	src := mustOpen(t, kv.Options{NoSync: true})
	populate(t, src)
	e := export(t, src)
	swapped := append([]kv.Row(nil), e.rows...)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	fewer := e.rows[:len(e.rows)-1]
	stranger := append(append([]kv.Row(nil), e.rows...), kv.Row{Bucket: "nope", Key: []byte("k"), Value: []byte("v")})
	failing := func() (kv.Row, error) { return kv.Row{}, errors.New("read: connection reset") }
	newer := e.snap
	newer.Schema = kv.SchemaVersion + 1

	tests := []struct {
		name string
		snap kv.Snapshot
		next func() (kv.Row, error)
		msg  string
	}{
		{"rows out of order", e.snap, feed(swapped), "out of order"},
		{"fewer rows than announced", e.snap, feed(fewer), "announces"},
		{"a bucket not announced", e.snap, feed(stranger), `bucket "nope"`},
		{"the feed fails", e.snap, failing, "connection reset"},
		{"a newer schema", newer, feed(e.rows), "schema 2, this gateway reads 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			err := kv.Restore(filepath.Join(dir, "new.db"), tt.snap, tt.next)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %v, want %q", err, tt.msg)
			}
			if es, _ := os.ReadDir(dir); len(es) != 0 {
				t.Errorf("left %s behind", es[0].Name())
			}
		})
	}
}

// Ensure that an export of a serving store is the store as of its start,
// while a write commits in the middle of it, and that it leaves no file
// beside the store (it streams from a copy of the file).
func TestStore_Export_WhileWriting(t *testing.T) {
	dir := t.TempDir()
	s, err := kv.Open(filepath.Join(dir, "holon.db"), kv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	populate(t, s)
	want := export(t, s)
	var got exported
	first := true
	err = s.Export(func(sn kv.Snapshot) error { got.snap = sn; return nil }, func(b string, k, v []byte) error {
		if first {
			first = false
			credit(t, s, "carol", "1.00") // commits while the export runs
			if n := besideStore(t, dir); n != 0 {
				t.Errorf("%d files beside the store during the export, want none", n)
			}
		}
		got.rows = append(got.rows, kv.Row{Bucket: b, Key: bytes.Clone(k), Value: bytes.Clone(v)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("the export saw a write committed after it began")
	}
	if balance(t, s, "carol") != amt("1.00") {
		t.Error("the write during the export was lost")
	}
	if n := besideStore(t, dir); n != 0 {
		t.Errorf("%d files beside the store after the export, want none", n)
	}
}

// besideStore counts the files in dir other than the store holon.db and
// its write-ahead log's directory.
func besideStore(t *testing.T, dir string) int {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if e.Name() != "holon.db" && e.Name() != "holon.db.wal" {
			n++
		}
	}
	return n
}

// Ensure that a restore cut short after several of its batches were
// committed leaves the target untouched: no file at a new target, an empty
// store unchanged, no temporary file; and that the same feed in small
// batches, not cut short, restores the whole store.
func TestRestore_CutShort(t *testing.T) {
	src := mustOpen(t, kv.Options{NoSync: true})
	populate(t, src)
	e := export(t, src)
	cut := func(after int) func() (kv.Row, error) {
		next, n := feed(e.rows), 0
		return func() (kv.Row, error) {
			if n++; n > after {
				return kv.Row{}, errors.New("read: connection reset")
			}
			return next()
		}
	}
	const batch = 64 // bytes: a handful of rows per transaction
	dir := t.TempDir()
	target := filepath.Join(dir, "new.db")
	err := kv.RestoreInBatchesForTest(target, e.snap, cut(len(e.rows)-1), batch)
	if err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("error %v, want the feed's", err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Fatalf("a restore cut short left %s behind", es[0].Name())
	}

	empty := filepath.Join(dir, "empty.db")
	s, err := kv.Open(empty, kv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	before, _ := os.ReadFile(empty)
	if err := kv.RestoreInBatchesForTest(empty, e.snap, cut(len(e.rows)/2), batch); err == nil {
		t.Fatal("a restore cut short succeeded")
	}
	if after, _ := os.ReadFile(empty); !bytes.Equal(before, after) {
		t.Error("a restore cut short changed the empty store")
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("%d files in the directory, want the empty store alone", len(es))
	}

	if err := kv.RestoreInBatchesForTest(target, e.snap, feed(e.rows), batch); err != nil {
		t.Fatal(err)
	}
	ro, err := kv.OpenReadOnly(target)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := export(t, ro); !reflect.DeepEqual(got, e) {
		t.Error("the store restored in small batches differs")
	}
}

// Ensure that Restore refuses a store that holds anything, leaving it as it
// was, and accepts one that only has its schema.
func TestRestore_Target(t *testing.T) {
	src := mustOpen(t, kv.Options{NoSync: true})
	populate(t, src)
	e := export(t, src)

	dir := t.TempDir()
	busy := filepath.Join(dir, "busy.db")
	s, err := kv.Open(busy, kv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	credit(t, s, "mallory", "1.00")
	s.Close()
	before, _ := os.ReadFile(busy)
	err = kv.Restore(busy, e.snap, feed(e.rows))
	if !errors.Is(err, kv.ErrNotEmpty) {
		t.Fatalf("error %v, want ErrNotEmpty", err)
	}
	for _, want := range []string{"2 accounts", "1 journal,", "restore only into a new or empty database"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if after, _ := os.ReadFile(busy); !bytes.Equal(before, after) {
		t.Error("the refused target changed")
	}

	fresh := filepath.Join(dir, "fresh.db")
	s, err = kv.Open(fresh, kv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := kv.Restore(fresh, e.snap, feed(e.rows)); err != nil {
		t.Fatalf("restore into an empty store: %v", err)
	}
	ro, err := kv.OpenReadOnly(fresh)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := export(t, ro); !reflect.DeepEqual(got, e) {
		t.Error("the store restored in place differs")
	}

	empty := filepath.Join(dir, "zero.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := kv.Restore(empty, e.snap, feed(e.rows)); err != nil {
		t.Fatalf("restore into a zero-length file: %v", err)
	}
}

// Ensure that OpenReadOnly reads a stopped gateway's store without writing,
// refuses one a running gateway holds with a message saying what to do,
// refuses a missing file without creating it, and refuses updates.
func TestOpenReadOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "holon.db")
	live, err := kv.Open(path, kv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	credit(t, live, "alice", "1.00")
	_, err = kv.OpenReadOnly(path)
	if !errors.Is(err, kv.ErrLocked) || !strings.Contains(err.Error(), "holon backup --url") {
		t.Fatalf("error %v, want ErrLocked pointing at --url", err)
	}
	live.Close()

	before, _ := os.ReadFile(path)
	ro, err := kv.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	// Readers share the file.
	ro2, err := kv.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	ro2.Close()
	mustView(t, ro, func(tx *kv.Tx) error { return tx.VerifyJournal() })
	if err := ro.Update(t.Context(), func(*kv.Tx) error { return nil }); !errors.Is(err, holon.ErrClosed) {
		t.Errorf("update on a read-only store: %v, want ErrClosed", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a read-only open changed the file")
	}

	missing := filepath.Join(dir, "missing.db")
	if _, err := kv.OpenReadOnly(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Error("OpenReadOnly created the missing file")
	}

	foreign := filepath.Join(dir, "foreign.db")
	db, err := bolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := kv.OpenReadOnly(foreign); err == nil || !strings.Contains(err.Error(), "not a Holon store") {
		t.Errorf("a bbolt file without Holon's buckets: %v", err)
	}
}
