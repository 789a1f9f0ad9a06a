package backup_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// Ensure that verify passes a consistent store and says what it checked.
func TestVerify_Passes(t *testing.T) {
	s := openStore(t, "")
	fixture(t, s)
	rep, err := backup.Verify(s)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.WriteTo(&out)
	if !rep.OK() {
		t.Fatalf("verify failed on a consistent store:\n%s", out.String())
	}
	for _, want := range []string{
		"ok    journal        7 entries: each sums to zero",
		"ok    balances       5 accounts",
		"ok    settlements    5 billed receipts against 5 settle entries",
		"ok    receipt trees  10 receipts, 1 with children",
		"ok    holds          1 holds for 1 running calls",
		"verify: all 13 checks passed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// Ensure that verify catches hand edits of a backup whose checksum was
// recomputed to hide them, each in the check it belongs to; and that an
// edit without a new checksum is refused as corrupted before any check.
func TestVerify_CatchesEdits(t *testing.T) {
	s := openStore(t, "")
	fixture(t, s)
	ls := lines(writeBackup(t, s))

	tests := []struct {
		name  string
		edit  func([]string) []string
		check string
		msg   string
	}{
		{"a balance edited by hand", func(ls []string) []string {
			return editRow(t, ls, "accounts", `"k":"bob"`, func(v map[string]any) { v["balance"] = "50.00" })
		}, backup.CheckBalances, "account bob: balance 50.00, its journal lines sum to 4.92"},
		{"a journal row altered (still balanced)", func(ls []string) []string {
			return editRow(t, ls, "journal", `"key":"settle:r1"`, func(v map[string]any) {
				lines := v["lines"].([]any)
				lines[0].(map[string]any)["amount"] = "-0.09"
				lines[2].(map[string]any)["amount"] = "0.082"
			})
		}, backup.CheckJournal, "its content does not match its hash: the row was altered"},
		{"a journal row made unbalanced", func(ls []string) []string {
			return editRow(t, ls, "journal", `"key":"signup:bob"`, func(v map[string]any) {
				v["lines"].([]any)[1].(map[string]any)["amount"] = "50.00"
			})
		}, backup.CheckJournal, "lines sum to 45.00, want 0"},
		{"a journal row removed", func(ls []string) []string {
			for i, l := range ls {
				if strings.HasPrefix(l, `{"t":"journal","kn":3,`) {
					return append(append([]string(nil), ls[:i]...), ls[i+1:]...)
				}
			}
			t.Fatal("no journal row 3")
			return nil
		}, backup.CheckJournal, "journal row 4: hash chain broken"},
		{"a receipt's cost edited", func(ls []string) []string {
			return editRow(t, ls, "receipts", `"id":"r1"`, func(v map[string]any) {
				v["cost"] = map[string]any{"own": "0.05", "downstream": "0.00", "total": "0.05"}
			})
		}, backup.CheckSettlements, "receipt r1: splits sum to 0.08, cost.own is 0.05"},
		{"a receipt's splits edited", func(ls []string) []string {
			return editRow(t, ls, "receipts", `"id":"r1"`, func(v map[string]any) {
				v["splits"] = []any{map[string]any{"to": "holon", "amount": "0.008"}, map[string]any{"to": "lena", "amount": "0.072"}}
			})
		}, backup.CheckSettlements, "entry settle:r1 (row 3) moves alice -0.08, holon 0.008, holon-labs 0.072; receipt r1 says alice -0.08, holon 0.008, lena 0.072"},
		{"a settlement without its receipt being billed", func(ls []string) []string {
			return editRow(t, ls, "receipts", `"id":"r1"`, func(v map[string]any) { v["billed"] = false })
		}, backup.CheckSettlements, "exists, but receipt r1 is not billed"},
		{"a child that points elsewhere", func(ls []string) []string {
			return editRow(t, ls, "receipts", `"id":"r4"`, func(v map[string]any) { v["parent"] = "r1" })
		}, backup.CheckTrees, "its child r4 does not point back to it"},
		{"a downstream cost that does not add up", func(ls []string) []string {
			return editRow(t, ls, "receipts", `"id":"r3"`, func(v map[string]any) {
				v["cost"] = map[string]any{"own": "0.10", "downstream": "0.08", "total": "0.18"}
			})
		}, backup.CheckTrees, "receipt r3: cost.downstream is 0.08, its children paid by alice were billed 0.092 in all"},
		{"a hold that outlives its call", func(ls []string) []string {
			return editRow(t, ls, "receipts", `"id":"r10"`, func(v map[string]any) { v["status"] = "failed" })
		}, backup.CheckHolds, "hold r10 outlives its call: the receipt is failed"},
		{"held money without a hold", func(ls []string) []string {
			return editRow(t, ls, "accounts", `"k":"bob"`, func(v map[string]any) { v["held"] = "1.00" })
		}, backup.CheckHolds, "account bob holds 1.00, its calls in flight hold 0.00"},
		{"a budget's spent edited by hand", func(ls []string) []string {
			return editRow(t, ls, "budgets", `"k":"bob/sandbox"`, func(v map[string]any) { v["spent"] = "0.00" })
		}, backup.CheckBudgets, "mandate bob/sandbox has spent 0.00, its receipts cost 0.08"},
		{"a budget removed", func(ls []string) []string {
			for i, l := range ls {
				if strings.HasPrefix(l, `{"t":"budgets","k":"bob/sandbox",`) {
					return append(append([]string(nil), ls[:i]...), ls[i+1:]...)
				}
			}
			t.Fatal("no budget of bob/sandbox")
			return nil
		}, backup.CheckBudgets, "receipts under bob/sandbox cost 0.08, but it has no budget"},
		{"an approval that kept its input", func(ls []string) []string {
			return editRow(t, ls, "approvals", `"id":"a2"`, func(v map[string]any) { v["input"] = map[string]any{"name": "x"} })
		}, backup.CheckApprovals, "approval a2 is used but still keeps its input"},
		{"a record that does not add up", func(ls []string) []string {
			return editRow(t, ls, "records", `"k":"holon-labs/company-lookup@1.0.0"`, func(v map[string]any) { v["runs"] = 7 })
		}, backup.CheckRecords, "agent holon-labs/company-lookup@1.0.0: record says 7 runs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edited := tt.edit(ls)
			rep, _, err := backup.VerifyFile(bytes.NewReader(reseal(t, edited)), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			rep.WriteTo(&out)
			c := rep.Check(tt.check)
			if rep.OK() || c.OK() {
				t.Fatalf("verify did not fail %s:\n%s", tt.check, out.String())
			}
			if !strings.Contains(strings.Join(c.Problems, "\n"), tt.msg) {
				t.Errorf("check %s does not say %q:\n%s", tt.check, tt.msg, out.String())
			}
			if !strings.Contains(out.String(), "FAIL  "+tt.check) {
				t.Errorf("the report does not show the failure:\n%s", out.String())
			}
			// The same edit without a new checksum is caught as corruption.
			raw := []byte(strings.Join(edited, "\n") + "\n")
			if _, _, err := backup.VerifyFile(bytes.NewReader(raw), t.TempDir()); !errors.Is(err, backup.ErrCorrupt) {
				t.Errorf("unsealed edit: error %v, want ErrCorrupt", err)
			}
		})
	}
}

// Ensure that verify checks a store edited by hand (restored from an edited
// copy) the same way: the damage is in the store, not only in a file.
func TestVerify_EditedStore(t *testing.T) {
	s := openStore(t, "")
	fixture(t, s)
	ls := editRow(t, lines(writeBackup(t, s)), "accounts", `"k":"alice"`, func(v map[string]any) { v["balance"] = "100.00" })
	path := filepath.Join(t.TempDir(), "edited.db")
	if _, err := backup.Restore(bytes.NewReader(reseal(t, ls)), path, nil); err != nil {
		t.Fatal(err)
	}
	rep := verifyPath(t, path)
	if c := rep.Check(backup.CheckBalances); c.OK() || !strings.Contains(c.Problems[0], "account alice: balance 100.00") {
		t.Errorf("balances: %+v", c)
	}
}

// Ensure that verify checks the approvals index against the approvals:
// an approval missing from it, or a key of no approval, is a problem; a
// store written before the index (opened read-only, so not rebuilt) passes.
func TestVerify_ApprovalIndex(t *testing.T) {
	for _, tt := range []struct {
		name   string
		tamper func(idx *bolt.Bucket) error
		want   string
	}{
		{"an approval left out", func(idx *bolt.Bucket) error {
			return idx.Delete(append([]byte("bob/sandbox\x00"), 0, 0, 0, 0, 0, 0, 0, 2))
		}, "approval a2 is not in the index of mandate bob/sandbox"},
		{"a key of no approval", func(idx *bolt.Bucket) error {
			return idx.Put(append([]byte("bob/sandbox\x00"), 0, 0, 0, 0, 0, 0, 0, 9), nil)
		}, "the approvals index holds 3 keys for 2 approvals"},
		{"no index", nil, ""},
	} {
		rep := verifyTampered(t, func(btx *bolt.Tx) error {
			if tt.tamper == nil {
				return btx.DeleteBucket([]byte("approvals_by_mandate"))
			}
			return tt.tamper(btx.Bucket([]byte("approvals_by_mandate")))
		})
		c := rep.Check(backup.CheckApprovals)
		switch {
		case tt.want == "" && (!c.OK() || !strings.Contains(c.Covered, "no index by mandate yet")):
			t.Errorf("%s: %+v, want ok without an index", tt.name, c)
		case tt.want != "" && (c.OK() || !slices.Contains(c.Problems, tt.want)):
			t.Errorf("%s: %+v, want %q", tt.name, c, tt.want)
		}
	}
}

// Ensure that verify checks the receipt index (and its log, where a new
// receipt's key goes first) against the receipts: a receipt left out, a
// key of no receipt, and two receipts swapped between mandates (the counts
// still right) are each a problem.
func TestVerify_ReceiptIndex(t *testing.T) {
	key := func(m string, seq byte) []byte { return append([]byte(m+"\x00"), 0, 0, 0, 0, 0, 0, 0, seq) }
	seq := func(n byte) []byte { return []byte{0, 0, 0, 0, 0, 0, 0, n} }
	for _, tt := range []struct {
		name   string
		tamper func(log, idx *bolt.Bucket) error
		want   string
	}{
		{"a receipt left out", func(log, idx *bolt.Bucket) error {
			if err := log.Delete(seq(4)); err != nil {
				return err
			}
			return log.Delete(seq(5))
		}, "the receipt index lists none of mandate alice/sandbox~r3's 2 receipts"},
		{"a key of no receipt", func(log, idx *bolt.Bucket) error {
			return idx.Put(key("bob/sandbox", 99), nil)
		}, "the receipt index lists 5 receipts under mandate bob/sandbox, which has 4"},
		{"two receipts swapped", func(log, idx *bolt.Bucket) error {
			if err := log.Put(seq(1), []byte("bob/sandbox")); err != nil {
				return err
			}
			return log.Put(seq(2), []byte("alice/sandbox"))
		}, "the receipt index lists under mandate alice/sandbox receipts that are not its own"},
	} {
		rep := verifyTampered(t, func(btx *bolt.Tx) error {
			return tt.tamper(btx.Bucket([]byte("receipts_by_mandate_log")), btx.Bucket([]byte("receipts_by_mandate")))
		})
		if c := rep.Check(backup.CheckCounters); c.OK() || !slices.Contains(c.Problems, tt.want) {
			t.Errorf("%s: %+v, want %q", tt.name, c, tt.want)
		}
	}
}

// verifyTampered writes the fixture into a new store, changes its file
// with tamper in a raw bbolt transaction, and verifies it read-only.
func verifyTampered(t *testing.T, tamper func(*bolt.Tx) error) *backup.Report {
	t.Helper()
	path := filepath.Join(t.TempDir(), "holon.db")
	s := openStore(t, path)
	fixture(t, s)
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(tamper)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	return verifyPath(t, path)
}

// verifyPath verifies the store at path, opened read-only.
func verifyPath(t *testing.T, path string) *backup.Report {
	t.Helper()
	ro, err := kv.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rep, err := backup.Verify(ro)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
