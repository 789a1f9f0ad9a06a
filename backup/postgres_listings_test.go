package backup_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/kv"
)

// Ensure that the per-version counters and evaluations load into
// PostgreSQL and read as tables through the schema's views.
func TestLoadPostgres_ListingViews(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	s := openStore(t, "")
	fixture(t, s)
	update(t, s, func(tx *kv.Tx) error {
		if err := tx.AddEarnings("lena/echo@1.0.0", "EUR", 3, amt("0.108"), 0); err != nil {
			return err
		}
		if err := tx.AddEarnings("ann/echo@1.0.0", "EUR", 0, 0, amt("0.00945")); err != nil {
			return err
		}
		if err := tx.AddLatency("lena/echo@1.0.0", 7); err != nil {
			return err
		}
		if err := tx.Put(holon.BucketEvals, "lena/echo@1.0.0", map[string]any{"ref": "lena/echo@1.0.0", "passed": true,
			"finished": time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), "suites": []any{}}); err != nil {
			return err
		}
		return tx.Put(holon.BucketEvalQueue, "ann/echo@1.0.0", map[string]any{"ref": "ann/echo@1.0.0", "enqueued": time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), "attempts": 1})
	})
	url := srv.CreateDB(t, "holon")
	if _, err := backup.LoadPostgres(ctx, bytes.NewReader(writeBackup(t, s)), url, nil); err != nil {
		t.Fatal(err)
	}
	conn := srv.Connect(t, url)
	for _, tt := range []struct{ sql, want string }{
		{`SELECT string_agg(agent || ' ' || currency || ' ' || paid_calls || ' ' || own || ' ' || royalties, '; ' ORDER BY agent) FROM agent_earnings`,
			"ann/echo@1.0.0 EUR 0 0.000000 0.009450; lena/echo@1.0.0 EUR 3 0.108000 0.000000"},
		{`SELECT agent || ' ' || counts[4] || ' ' || array_length(counts, 1) FROM agent_latency`, "lena/echo@1.0.0 1 18"},
		{`SELECT agent || ' ' || passed FROM agent_evaluations`, "lena/echo@1.0.0 true"},
		{`SELECT agent || ' ' || attempts FROM eval_queue`, "ann/echo@1.0.0 1"},
	} {
		var got string
		queryRow(t, conn, tt.sql, &got)
		if got != tt.want {
			t.Errorf("%s\n got %q\nwant %q", tt.sql, got, tt.want)
		}
	}
}
