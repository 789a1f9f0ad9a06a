package backup_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// Ensure that a backup has a header with counts per table and sequences,
// one line per row with readable keys and verbatim documents, and a trailer
// whose checksum covers every line before it.
func TestWrite_Format(t *testing.T) {
	s := openStore(t, "")
	fixture(t, s)
	b := writeBackup(t, s)
	ls := lines(b)

	var hd backup.Header
	if err := json.Unmarshal([]byte(ls[0]), &hd); err != nil {
		t.Fatal(err)
	}
	if hd.Format != "holon-backup" || hd.Version != 1 || hd.Gateway != "test" || hd.Schema != kv.SchemaVersion || !hd.Time.Equal(t0) {
		t.Errorf("header %+v", hd)
	}
	if hd.Rows != int64(len(ls)-2) {
		t.Errorf("header says %d rows, the file has %d", hd.Rows, len(ls)-2)
	}
	for _, name := range kv.Buckets() {
		if _, ok := hd.Tables[name]; !ok {
			t.Errorf("header lacks table %s", name)
		}
	}
	if got := hd.Tables["receipts"]; got.Rows != 10 || got.Sequence != 10 {
		t.Errorf("receipts in header: %+v, want 10 rows, sequence 10", got)
	}
	if got := hd.Tables["approvals"]; got.Rows != 2 || got.Sequence != 2 {
		t.Errorf("approvals in header: %+v", got)
	}
	if got := hd.Tables["modlog"]; got.Rows != 1 || got.Sequence != 1 {
		t.Errorf("modlog in header: %+v", got)
	}

	want := []string{
		`{"t":"accounts","k":"alice","v":{"balance":"4.728","held":"0.08"}}`,
		`{"t":"counters","k":"receipts","vn":10}`,
		`{"t":"meta","k":"schema","vn":1}`,
		`{"t":"modlog","kn":1,"v":{"action":"disable","reason":"spam"}}`,
		`{"t":"settings","k":"weird \"key\" \\ é","v":{"on":true}}`,
		`{"t":"journal_keys","k":"signup:alice","vn":1}`,
	}
	for _, w := range want {
		if !slices.Contains(ls, w) {
			t.Errorf("no line %s", w)
		}
	}
	// A document is embedded byte for byte, as stored.
	if !strings.Contains(string(b), `"input":{"text":"ACME \u003cCorp\u003e \u0026 co"}`) {
		t.Error("the approval's input is not verbatim")
	}
	// Receipts are keyed by their sequence number.
	if !strings.Contains(string(b), `{"t":"receipts","kn":1,"v":{"id":"r1",`) {
		t.Error("receipt r1 is not under kn 1")
	}
	// receipts_by_mandate keys are binary (mandate, NUL, sequence): base64.
	if !strings.Contains(string(b), `{"t":"receipts_by_mandate","kb":"`) {
		t.Error("binary index keys are not base64")
	}

	var end struct {
		End backup.Trailer `json:"end"`
	}
	if err := json.Unmarshal([]byte(ls[len(ls)-1]), &end); err != nil {
		t.Fatal(err)
	}
	body := b[:len(b)-len(ls[len(ls)-1])-1]
	sum := sha256.Sum256(body)
	if end.End.SHA256 != hex.EncodeToString(sum[:]) || end.End.Rows != hd.Rows {
		t.Errorf("trailer %+v, want %d rows and sha256 %x", end.End, hd.Rows, sum)
	}
	if _, err := backup.Check(bytes.NewReader(b)); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// Ensure that a restored store holds exactly the same rows and sequences,
// that ids continue where they stopped, and that both verify.
func TestRestore_RoundTrip(t *testing.T) {
	src := openStore(t, "")
	fixture(t, src)
	b := writeBackup(t, src)

	path := filepath.Join(t.TempDir(), "restored.db")
	sum, err := backup.Restore(bytes.NewReader(b), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Trailer.Rows != sum.Header.Rows || sum.Bytes != int64(len(b)) {
		t.Errorf("summary %+v", sum)
	}
	dst := openStore(t, path)
	snapA, rowsA := dump(t, src)
	snapB, rowsB := dump(t, dst)
	if !reflect.DeepEqual(snapA, snapB) {
		t.Errorf("snapshots differ:\n%+v\n%+v", snapA, snapB)
	}
	if !reflect.DeepEqual(rowsA, rowsB) {
		t.Errorf("rows differ: %d vs %d", len(rowsA), len(rowsB))
	}
	for name, s := range map[string]*kv.Store{"source": src, "restored": dst} {
		rep, err := backup.Verify(s)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			var out bytes.Buffer
			rep.WriteTo(&out)
			t.Errorf("verify %s:\n%s", name, out.String())
		}
	}
	// The next ids follow the restored sequences.
	update(t, dst, func(tx *kv.Tx) error {
		id, err := tx.NewReceiptID()
		if err != nil || id != "r11" {
			t.Errorf("next receipt id %q, %v; want r11", id, err)
		}
		a, err := tx.NewApprovalID()
		if err != nil || a != "a3" {
			t.Errorf("next approval id %q, %v; want a3", a, err)
		}
		if n := tx.Counter("receipts"); n != 10 {
			t.Errorf("receipts counter %d, want 10", n)
		}
		return nil
	})
}

// Ensure that a restore refuses a truncated, corrupted, unknown-version or
// foreign file with a clear message, writing nothing: no database file, no
// temporary file.
func TestRestore_RefusesBadFiles(t *testing.T) {
	s := openStore(t, "")
	fixture(t, s)
	good := writeBackup(t, s)
	ls := lines(good)
	join := func(ls []string) []byte { return []byte(strings.Join(ls, "\n") + "\n") }
	flip := bytes.Clone(good)
	i := bytes.Index(flip, []byte(`"balance":"4.728"`))
	flip[i+len(`"balance":"`)] = '9'

	tests := []struct {
		name string
		file []byte
		want error
		msg  string
	}{
		{"empty", nil, backup.ErrNotBackup, "empty"},
		{"not a backup", []byte("{\"hello\":1}\n"), backup.ErrNotBackup, "not a \"holon-backup\" header"},
		{"unknown version", []byte(strings.Replace(string(good), `"version":1`, `"version":2`, 1)), backup.ErrVersion, "format version 2, this gateway reads version 1"},
		{"header only", join(ls[:1]), backup.ErrTruncated, "without its trailer"},
		{"cut before the trailer", join(ls[:len(ls)-1]), backup.ErrTruncated, "without its trailer"},
		{"cut inside a row", good[:len(good)/2], backup.ErrTruncated, "without its trailer"},
		{"cut inside the trailer", good[:len(good)-10], backup.ErrTruncated, "without its trailer"},
		{"a byte changed", flip, backup.ErrCorrupt, "checksum"},
		{"a row removed", join(append(slices.Clone(ls[:5]), ls[6:]...)), backup.ErrCorrupt, ""},
		{"a row repeated", join(append(slices.Clone(ls[:5]), ls[4:]...)), backup.ErrCorrupt, "out of order or repeated"},
		{"trailer altered", join(append(slices.Clone(ls[:len(ls)-1]), strings.Replace(ls[len(ls)-1], `"sha256":"`, `"sha256":"0`, 1))), backup.ErrCorrupt, "checksum"},
		{"data after the trailer", append(bytes.Clone(good), "{}\n"...), backup.ErrCorrupt, "after the trailer"},
		{"garbage line", join(append(append(slices.Clone(ls[:3]), "not json"), ls[3:]...)), backup.ErrCorrupt, "line 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "new.db")
			_, err := backup.Restore(bytes.NewReader(tt.file), path, nil)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
			if got := files(t, dir); len(got) != 0 {
				t.Errorf("restore left %v behind", got)
			}
			if _, err := backup.Check(bytes.NewReader(tt.file)); !errors.Is(err, tt.want) {
				t.Errorf("Check: %v, want %v", err, tt.want)
			}
		})
	}
}

// Ensure that a restore into a store that holds anything is refused and
// changes nothing, while a new store that never served is accepted.
func TestRestore_Target(t *testing.T) {
	s := openStore(t, "")
	fixture(t, s)
	good := writeBackup(t, s)

	t.Run("not empty", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "busy.db")
		busy := openStore(t, path)
		update(t, busy, func(tx *kv.Tx) error { return tx.Put(holon.BucketSettings, "x", 1) })
		busy.Close()
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = backup.Restore(bytes.NewReader(good), path, nil)
		if !errors.Is(err, kv.ErrNotEmpty) || !strings.Contains(err.Error(), "1 settings") {
			t.Fatalf("error %v, want ErrNotEmpty naming what it holds", err)
		}
		after, _ := os.ReadFile(path)
		if !bytes.Equal(before, after) {
			t.Error("the refused target changed")
		}
	})
	t.Run("empty store", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "fresh.db")
		openStore(t, path).Close()
		if _, err := backup.Restore(bytes.NewReader(good), path, nil); err != nil {
			t.Fatal(err)
		}
		_, want := dump(t, s)
		_, got := dump(t, openStore(t, path))
		if !reflect.DeepEqual(got, want) {
			t.Error("rows differ after a restore into an empty store")
		}
	})
	t.Run("a running gateway's file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "live.db")
		openStore(t, path) // held open, as by a gateway
		_, err := backup.Restore(bytes.NewReader(good), path, nil)
		if !errors.Is(err, kv.ErrLocked) {
			t.Fatalf("error %v, want ErrLocked", err)
		}
	})
	t.Run("a truncated file into an empty store", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "fresh.db")
		openStore(t, path).Close()
		before, _ := os.ReadFile(path)
		if _, err := backup.Restore(bytes.NewReader(good[:len(good)-200]), path, nil); !errors.Is(err, backup.ErrTruncated) {
			t.Fatalf("error %v, want ErrTruncated", err)
		}
		after, _ := os.ReadFile(path)
		if !bytes.Equal(before, after) {
			t.Error("a failed restore changed the empty store")
		}
	})
}

// Ensure that a backup is one read transaction: a settlement committed
// while it streams (the writer is not blocked by it) is not in it, and the
// copy still verifies.
func TestWrite_ConsistentWhileWriting(t *testing.T) {
	s := openStore(t, "")
	fixture(t, s)
	update(t, s, func(tx *kv.Tx) error {
		for i := range 5000 {
			if err := tx.Put(holon.BucketSettings, fmt.Sprintf("filler-%05d", i), map[string]int{"i": i}); err != nil {
				return err
			}
		}
		// Grow the file and free the space again, so that the write below
		// finds free pages and needs no remap (which would wait for the
		// backup's transaction).
		return tx.Put(holon.BucketSettings, "blob", strings.Repeat("x", 8<<20))
	})
	update(t, s, func(tx *kv.Tx) error { return tx.Delete(holon.BucketSettings, "blob") })

	var during bool
	var once sync.Once
	opts := backup.Options{Progress: func(done, total int64) {
		if done == total {
			return
		}
		once.Do(func() {
			committed := make(chan error, 1)
			go func() {
				committed <- s.Update(context.Background(), func(tx *kv.Tx) error {
					_, err := settle(tx, call{mandate: "bob/sandbox", payer: "bob", author: "holon-labs", agent: "holon-labs/company-lookup@1.0.0", status: "succeeded", own: amt("0.08")})
					return err
				})
			}()
			select {
			case err := <-committed:
				if err != nil {
					t.Error(err)
				}
				during = true
			case <-time.After(10 * time.Second):
				t.Error("a settlement waited more than 10 s for the backup")
			}
		})
	}}
	var buf bytes.Buffer
	sum, err := backup.Write(&buf, s, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !during {
		t.Fatal("no settlement committed while the backup streamed")
	}
	if got := sum.Header.Tables["receipts"].Rows; got != 10 {
		t.Errorf("the backup holds %d receipts, want the 10 of its snapshot", got)
	}
	var receipts int
	mustView(t, s, func(tx *kv.Tx) error { receipts = int(tx.Counter("receipts")); return nil })
	if receipts != 11 {
		t.Errorf("the store holds %d receipts, want 11", receipts)
	}
	rep, _, err := backup.VerifyFile(bytes.NewReader(buf.Bytes()), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		var out bytes.Buffer
		rep.WriteTo(&out)
		t.Errorf("the copy taken during a write does not verify:\n%s", out.String())
	}
}

// Ensure that a backup fed through a failing writer reports the error.
func TestWrite_WriterFails(t *testing.T) {
	s := openStore(t, "")
	fixture(t, s)
	_, err := backup.Write(failingWriter{}, s, backup.Options{})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("error %v, want the writer's", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
