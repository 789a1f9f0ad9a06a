package bench

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// Ensure that the store the start-up and backup rows build passes holon
// verify, as a gateway's would: the bench leaves no store that does not.
func TestBuildReceipts_Verifies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "holon.db")
	if _, err := buildReceipts(t.Context(), path, 1000); err != nil {
		t.Fatal(err)
	}
	verifyStore(t, path)
}

// Ensure that the store the reports row builds passes holon verify too,
// its rollups recomputed from its receipts: they are what the
// settlements would have left.
func TestBuildReportStore_Verifies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "holon.db")
	if _, err := buildReportStore(t.Context(), path, 3000, time.Now()); err != nil {
		t.Fatal(err)
	}
	rep := verifyStore(t, path)
	if c := rep.Check(backup.CheckRollups); !strings.Contains(c.Covered, "against 3000 settled calls") {
		t.Errorf("the rollups check covered %q", c.Covered)
	}
}

// verifyStore runs holon verify on the store at path, each failed check
// an error of t, and returns its report.
func verifyStore(t *testing.T, path string) *backup.Report {
	t.Helper()
	s, err := kv.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := backup.Verify(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Checks {
		if !c.OK() {
			t.Errorf("check %s failed: %v", c.Name, c.Problems)
		}
	}
	return rep
}
