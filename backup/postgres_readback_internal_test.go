package backup

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/kv"
)

// Ensure that the loader's column check catches a column loaded from the
// wrong field, such as the two mappings that once passed every test: an
// approval's input_hash loaded with its receipt id, a receipt's caller and
// agent swapped. Each is put into the loader here and must be refused,
// naming the table and the row, with nothing committed.
func TestLoadPostgres_ReadBackCatchesWrongColumns(t *testing.T) {
	srv := pgtest.Start(t)
	golden, err := os.ReadFile("testdata/fixture.holon-backup.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, bucket string
		wrong        func(v []any)
		msg          string
	}{
		{"approvals.input_hash loaded with the receipt id", "approvals", func(v []any) {
			v[indexOf(t, approvalColumns, "input_hash")] = v[indexOf(t, approvalColumns, "receipt")]
		}, "approvals 1 reads back as"},
		{"a receipt's caller and agent swapped", "receipts", func(v []any) {
			c, a := indexOf(t, receiptColumns, "caller"), indexOf(t, receiptColumns, "agent")
			if agent, ok := v[a].(*string); ok && agent != nil {
				v[c], v[a] = *agent, v[c]
			}
		}, "receipts 1 reads back as"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			right := pgTables[tt.bucket]
			wrong := right
			wrong.convert = func(r kv.Row) ([]any, error) {
				v, err := right.convert(r)
				if err == nil {
					tt.wrong(v)
				}
				return v, err
			}
			pgTables[tt.bucket] = wrong
			defer func() { pgTables[tt.bucket] = right }()

			url := srv.CreateDB(t, "wrong_"+tt.bucket)
			_, err := LoadPostgres(context.Background(), bytes.NewReader(golden), url, nil)
			if !errors.Is(err, errReadBack) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %v, want the column check to refuse it saying %q", err, tt.msg)
			}
			var n int64
			if err := srv.Connect(t, url).QueryRow(context.Background(),
				`SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'`).Scan(&n); err != nil || n != 0 {
				t.Errorf("a refused load left %d relations (%v)", n, err)
			}
		})
	}
}

func indexOf(t *testing.T, columns []string, name string) int {
	for i, c := range columns {
		if c == name {
			return i
		}
	}
	t.Fatalf("no column %s in %v", name, columns)
	return -1
}
