package backup_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// Ensure that a backup leaves uploaded files out and says so: no row of
// the files table, counted 0 in the header, the reason under left_out; the
// restored store has no files; and a backup that carries file rows anyway
// is refused by every reader.
func TestBackup_LeavesFilesOut(t *testing.T) {
	s := openStore(t, "")
	fixture(t, s)
	update(t, s, func(tx *kv.Tx) error {
		return tx.Put(holon.BucketFiles, "f/0123456789abcdef01234567", map[string]any{"owner": "alice", "size": 3})
	})
	good := writeBackup(t, s)
	sum, err := backup.Check(bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Header.Tables[holon.BucketFiles].Rows != 0 || !strings.Contains(sum.Header.LeftOut[holon.BucketFiles], "24 hours") ||
		bytes.Contains(good, []byte(`{"t":"files"`)) {
		t.Errorf("files in the backup: %+v, left out %q", sum.Header.Tables[holon.BucketFiles], sum.Header.LeftOut)
	}
	path := filepath.Join(t.TempDir(), "restored.db")
	if _, err := backup.Restore(bytes.NewReader(good), path, nil); err != nil {
		t.Fatal(err)
	}
	restored := openStore(t, path)
	mustView(t, restored, func(tx *kv.Tx) error {
		return tx.ForEach(holon.BucketFiles, "", func(key string, _ json.RawMessage) (bool, error) {
			t.Errorf("the restored store holds file row %s", key)
			return true, nil
		})
	})

	ls := lines(good)
	at := slices.IndexFunc(ls[1:len(ls)-1], func(l string) bool { return l > `{"t":"files"` }) + 1
	carried := reseal(t, slices.Insert(slices.Clone(ls), at, `{"t":"files","k":"f/0123456789abcdef01234567","v":{"owner":"alice"}}`))
	if _, err := backup.Check(bytes.NewReader(carried)); !errors.Is(err, backup.ErrCorrupt) || !strings.Contains(err.Error(), "leave out") {
		t.Errorf("Check of a backup with a file row: %v", err)
	}
	if _, err := backup.Restore(bytes.NewReader(carried), filepath.Join(t.TempDir(), "x.db"), nil); !errors.Is(err, backup.ErrCorrupt) {
		t.Errorf("Restore of a backup with a file row: %v", err)
	}
}
