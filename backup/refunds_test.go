package backup_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/backup"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/kv"
)

// refundedStore is the fixtures with r1 (0.08) refunded 0.03.
func refundedStore(t *testing.T) *kv.Store {
	t.Helper()
	s := openStore(t, "")
	fixture(t, s)
	update(t, s, func(tx *kv.Tx) error {
		r, err := tx.Receipt("r1")
		if err != nil {
			return err
		}
		return refund(tx, r, amt("0.03"))
	})
	return s
}

// Ensure that refunds are carried by backups (into a new store, and into
// PostgreSQL, where every row reads back as written), that verify accepts a
// store with a refund, and that it catches a refund that no longer
// matches its entry, one above its receipt, and budgets and agent records
// that did not follow.
func TestBackup_Refunds(t *testing.T) {
	s := refundedStore(t)
	want := writeBackup(t, s)
	if !bytes.Contains(want, []byte(`{"t":"refunds","k":"r1/000001"`)) || !bytes.Contains(want, []byte(`"key":"refund:r1:1"`)) {
		t.Fatalf("the backup lacks the refund or its entry")
	}
	restored := restoreVerified(t, want)
	if got := writeBackup(t, restored); !bytes.Equal(got, want) {
		diffLines(t, got, want)
	}
	srv := pgtest.Start(t)
	url := srv.CreateDB(t, "refunds")
	if _, err := backup.LoadPostgres(context.Background(), bytes.NewReader(want), url, nil); err != nil {
		t.Fatal(err)
	}
	ls := lines(want)
	// The loader refuses a refund above its receipt, as the schema's
	// constraints refuse one from a gateway.
	above := reseal(t, editRow(t, ls, holon.BucketRefunds, `"k":"r1/000001"`, func(v map[string]any) { v["amount"] = "0.09" }))
	if _, err := backup.LoadPostgres(context.Background(), bytes.NewReader(above), srv.CreateDB(t, "refunds_above"), nil); err == nil ||
		!strings.Contains(err.Error(), "receipt r1 (cost.own 0.080000, billed true) is refunded 0.09") {
		t.Errorf("loading a refund above its receipt: %v", err)
	}
	for _, tt := range []struct {
		name, check, msg string
		edit             func([]string) []string
	}{
		{"a refund above its receipt", backup.CheckSettlements, "receipt r1 (billed true, cost.own 0.08) has 0.09 refunded", func(ls []string) []string {
			return editRow(t, ls, holon.BucketRefunds, `"k":"r1/000001"`, func(v map[string]any) { v["amount"] = "0.09" })
		}},
		{"a refund whose parts are not its entry", backup.CheckSettlements, "its entry moves", func(ls []string) []string {
			return editRow(t, ls, holon.BucketRefunds, `"k":"r1/000001"`, func(v map[string]any) {
				v["parts"] = []any{map[string]any{"to": "holon-labs", "amount": "0.03"}}
			})
		}},
		{"a record that kept the refunded billing", backup.CheckRecords, "holon-labs/company-lookup@1.0.0: record says 4 runs, 3 succeeded, 0.24 billed", func(ls []string) []string {
			return editRow(t, ls, "records", `"k":"holon-labs/company-lookup@1.0.0"`, func(v map[string]any) { v["billed"] = "0.24" })
		}},
		{"a budget that kept the refunded spend", backup.CheckBudgets, "mandate alice/sandbox has spent", func(ls []string) []string {
			return editRow(t, ls, "budgets", `"k":"alice/sandbox"`, func(v map[string]any) { v["spent"] = "0.302" })
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep, _, err := backup.VerifyFile(bytes.NewReader(reseal(t, tt.edit(ls))), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			rep.WriteTo(&out)
			if c := rep.Check(tt.check); c.OK() || !strings.Contains(strings.Join(c.Problems, "\n"), tt.msg) {
				t.Errorf("check %s does not say %q:\n%s", tt.check, tt.msg, out.String())
			}
		})
	}
}
