package main

import (
	"os"
	"path/filepath"
	"testing"

	"holon.dev/holon/backup"
	"holon.dev/holon/bench/drill/lossyfs/lossyfstest"
)

// Ensure that a backup holon backup reported done, and a store holon
// restore reported done, survive a power cut right after: the backup's
// name (linked into place) and the restored store's (renamed into place)
// are durable before the command says so.
func TestBackupRestore_SurvivePowerCut(t *testing.T) {
	f := lossyfstest.Mount(t)
	db := filepath.Join(t.TempDir(), "holon.db")
	g := startGateway(t, db)
	g.stop()
	out := filepath.Join(f.Dir(), "b.jsonl")
	if code, _, stderr := run(t, "backup", "--db", db, "--out", out); code != 0 {
		t.Fatalf("backup: exit %d: %s", code, stderr)
	}
	if err := f.Cut(nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.Open(out)
	if err != nil {
		t.Fatalf("after a power cut the backup reported done is gone: %v", err)
	}
	_, err = backup.Check(b)
	b.Close()
	if err != nil {
		t.Errorf("after a power cut the backup reported done: %v", err)
	}
	restored := filepath.Join(f.Dir(), "holon-restored.db")
	if code, _, stderr := run(t, "restore", "--in", out, "--db", restored); code != 0 {
		t.Fatalf("restore: exit %d: %s", code, stderr)
	}
	if err := f.Cut(nil); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, "verify", "--db", restored); code != 0 {
		t.Errorf("after a power cut the store restored: verify exit %d: %s", code, stderr)
	}
}
