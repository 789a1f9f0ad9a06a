package backup_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"holon.dev/holon/backup"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/kv"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden backup files in testdata/")

// goldenPath is the backup of the fixtures as the code of 2026-12-01 wrote
// it, before the domain types left kv: what the store writes and what a
// backup holds must not change with how the code is arranged.
const goldenPath = "testdata/fixture.holon-backup.jsonl"

// goldenStore fills a fresh store with every fixture the backup tests use.
func goldenStore(tb testing.TB) *kv.Store {
	s := openStore(tb, "")
	fixture(tb, s)
	publishingFixture(tb, s)
	alertsFixture(tb, s)
	return s
}

// Ensure that a backup of the fixtures is byte for byte the golden file:
// the store writes every record as it did, and backups hold the same rows.
func TestBackup_Golden(t *testing.T) {
	got := writeBackup(t, goldenStore(t))
	if *updateGolden {
		if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		diffLines(t, got, want)
	}
}

// Ensure that the golden file is still accepted: it restores, the restored
// store verifies, and a backup of it is the golden file again.
func TestRestore_Golden(t *testing.T) {
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	s := restoreVerified(t, want)
	if got := writeBackup(t, s); !bytes.Equal(got, want) {
		t.Fatalf("a backup of the restored golden store differs from %s", goldenPath)
	}
}

// Ensure that the PostgreSQL loader still accepts the golden file.
func TestLoadPostgres_Golden(t *testing.T) {
	srv := pgtest.Start(t)
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	url := srv.CreateDB(t, "golden")
	sum, err := backup.LoadPostgres(context.Background(), bytes.NewReader(want), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Tables["receipts"] != 10 || sum.Tables["journal_entries"] != 7 {
		t.Errorf("loaded %v", sum.Tables)
	}
}

// beforeWindowsPath is the golden file as written before budgets renewed
// by window: no budget_windows table, holds without a window.
const beforeWindowsPath = "testdata/fixture-before-windows.holon-backup.jsonl"

// Ensure that a backup taken before budget windows existed still restores
// and verifies, and still loads into PostgreSQL.
func TestRestore_BeforeBudgetWindows(t *testing.T) {
	old, err := os.ReadFile(beforeWindowsPath)
	if err != nil {
		t.Fatal(err)
	}
	restoreVerified(t, old)
	url := pgtest.Start(t).CreateDB(t, "before_windows")
	if _, err := backup.LoadPostgres(context.Background(), bytes.NewReader(old), url, nil); err != nil {
		t.Fatal(err)
	}
}

// restoreVerified restores a backup into a new store and fails the test
// unless that store verifies.
func restoreVerified(t *testing.T, data []byte) *kv.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "restored.db")
	if _, err := backup.Restore(bytes.NewReader(data), path, nil); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, path)
	rep, err := backup.Verify(s)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		var buf bytes.Buffer
		rep.WriteTo(&buf)
		t.Fatalf("the restored store does not verify:\n%s", buf.String())
	}
	return s
}
