package lossyfs_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"holon.dev/holon/bench/drill/lossyfs/lossyfstest"
)

func write(t *testing.T, path string, data []byte, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

func content(t *testing.T, path string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// Ensure that a cut keeps what was synced, file and name, and loses the
// writes after the file's last fsync.
func TestCut_LosesUnsyncedWrites(t *testing.T) {
	f := lossyfstest.Mount(t)
	p := filepath.Join(f.Dir(), "a")
	write(t, p, []byte("durable"), true)
	syncDir(t, f.Dir())
	ff, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	ff.WriteAt([]byte(" and lost"), 7)
	ff.WriteAt([]byte("X"), 0)
	ff.Close()
	if got, _ := content(t, p); got != "Xurable and lost" {
		t.Fatalf("before the cut the file reads %q", got)
	}
	if err := f.Cut(nil); err != nil {
		t.Fatal(err)
	}
	if got, ok := content(t, p); !ok || got != "durable" {
		t.Fatalf("after the cut: %q (exists %v), want %q", got, ok, "durable")
	}
	if st := f.Stats(); st.LostWrites != 2 || st.Cuts != 1 {
		t.Fatalf("stats %+v, want 2 writes lost in 1 cut", st)
	}
}

// Ensure that a file synced in a directory that was not loses its name.
func TestCut_LosesNamesOfUnsyncedDirectory(t *testing.T) {
	f := lossyfstest.Mount(t)
	p := filepath.Join(f.Dir(), "new")
	write(t, p, []byte("synced bytes, unsynced name"), true)
	if err := os.MkdirAll(filepath.Join(f.Dir(), "a", "b"), 0o700); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(f.Dir(), "a", "b", "c")
	write(t, deep, []byte("deep"), true)
	syncDir(t, filepath.Join(f.Dir(), "a", "b"))
	syncDir(t, filepath.Join(f.Dir(), "a"))
	if err := f.Cut(nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := content(t, p); ok {
		t.Fatal("a file whose directory was never synced survived the cut")
	}
	if _, err := os.Stat(filepath.Join(f.Dir(), "a")); !os.IsNotExist(err) {
		t.Fatalf("a directory whose parent was never synced survived the cut: %v", err)
	}
}

// Ensure that a directory sync keeps the names, and that a file created
// but never synced comes back empty.
func TestCut_KeepsNamesOfSyncedDirectory(t *testing.T) {
	f := lossyfstest.Mount(t)
	p := filepath.Join(f.Dir(), "named")
	write(t, p, []byte("unsynced bytes"), false)
	syncDir(t, f.Dir())
	if err := f.Cut(nil); err != nil {
		t.Fatal(err)
	}
	if got, ok := content(t, p); !ok || got != "" {
		t.Fatalf("after the cut: %q (exists %v), want an empty file", got, ok)
	}
}

// Ensure that a rename over a file and an unlink are undone by a cut when
// the directory was not synced after them, and kept when it was.
func TestCut_UndoesRenameAndUnlink(t *testing.T) {
	f := lossyfstest.Mount(t)
	dir := f.Dir()
	old, tmp, gone := filepath.Join(dir, "db"), filepath.Join(dir, "db.tmp"), filepath.Join(dir, "gone")
	write(t, old, []byte("old"), true)
	write(t, tmp, []byte("new"), true)
	write(t, gone, []byte("still here"), true)
	syncDir(t, dir)
	if err := os.Rename(tmp, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	if got, _ := content(t, old); got != "new" {
		t.Fatalf("renamed file reads %q", got)
	}
	if err := f.Cut(nil); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{old: "old", tmp: "new", gone: "still here"} {
		if got, ok := content(t, path); !ok || got != want {
			t.Errorf("after the cut %s reads %q (exists %v), want %q", filepath.Base(path), got, ok, want)
		}
	}

	if err := os.Rename(tmp, old); err != nil {
		t.Fatal(err)
	}
	os.Remove(gone)
	syncDir(t, dir)
	if err := f.Cut(nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := content(t, old); got != "new" {
		t.Errorf("a synced rename reads %q after the cut", got)
	}
	for _, p := range []string{tmp, gone} {
		if _, ok := content(t, p); ok {
			t.Errorf("%s came back after a synced rename or unlink", filepath.Base(p))
		}
	}
}

// Ensure that a torn cut keeps a prefix of a file's unsynced writes: the
// file reads as it did after some number of them, never a later write
// without an earlier one.
func TestCut_TornKeepsPrefix(t *testing.T) {
	f := lossyfstest.Mount(t)
	p := filepath.Join(f.Dir(), "log")
	write(t, p, nil, true)
	syncDir(t, f.Dir())
	rng := rand.New(rand.NewPCG(1, 2))
	kept := map[int]bool{}
	for round := range 20 {
		ff, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		var states [][]byte
		cur, _ := os.ReadFile(p)
		states = append(states, append([]byte(nil), cur...))
		for i := range 8 {
			off := rng.IntN(64)
			b := bytes.Repeat([]byte{byte('a' + (round+i)%26)}, 1+rng.IntN(32))
			if _, err := ff.WriteAt(b, int64(off)); err != nil {
				t.Fatal(err)
			}
			if end := off + len(b); end > len(cur) {
				cur = append(cur, make([]byte, end-len(cur))...)
			}
			copy(cur[off:], b)
			states = append(states, append([]byte(nil), cur...))
		}
		ff.Close()
		if err := f.Cut(rng); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(p)
		k := -1
		for i, s := range states {
			if bytes.Equal(s, got) {
				k = i
			}
		}
		if k < 0 {
			t.Fatalf("round %d: after a torn cut the file is no prefix of its writes: %q", round, got)
		}
		kept[k] = true
		// Make what the cut kept the new durable state.
		g, _ := os.OpenFile(p, os.O_WRONLY, 0)
		g.Sync()
		g.Close()
	}
	if len(kept) < 3 {
		t.Fatalf("torn cuts kept only prefixes of lengths %v of 8 writes: not random", kept)
	}
}

// Ensure that a truncation not synced is undone, bytes and all.
func TestCut_UndoesTruncate(t *testing.T) {
	f := lossyfstest.Mount(t)
	p := filepath.Join(f.Dir(), "t")
	write(t, p, []byte("0123456789"), true)
	syncDir(t, f.Dir())
	if err := os.Truncate(p, 3); err != nil {
		t.Fatal(err)
	}
	write(t, p, []byte("ab"), false)
	if err := os.WriteFile(p, []byte("z"), 0o600); err != nil { // O_TRUNC
		t.Fatal(err)
	}
	if err := f.Cut(nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := content(t, p); got != "0123456789" {
		t.Fatalf("after the cut %q, want the synced 0123456789", got)
	}
}
