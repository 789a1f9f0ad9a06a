package appliance_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/backup"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// BenchmarkIdempotency_Call measures what an Idempotency-Key costs the
// store: the pages written and the commits per call, with a fresh key on
// every call (UUID-like, so they land all over the key index) against the
// same calls without a key; 64 clients over HTTP, a dev gateway.
func BenchmarkIdempotency_Call(b *testing.B) {
	b.Run("key", func(b *testing.B) { benchmarkIdempotentCall(b, true) })
	b.Run("nokey", func(b *testing.B) { benchmarkIdempotentCall(b, false) })
}

func benchmarkIdempotentCall(b *testing.B, withKey bool) {
	dir := b.TempDir()
	mandates := filepath.Join(dir, "mandates")
	if err := os.MkdirAll(mandates, 0o755); err != nil {
		b.Fatal(err)
	}
	mandate := "id: bench/m\nissuer: bench\ngrantee: bench/client\ncurrency: EUR\nbudget: { total: \"1000000.00\", per_call: \"1.00\" }\nallow:\n  agents: [\"holon-labs/*\"]\n"
	if err := os.WriteFile(filepath.Join(mandates, "bench.yaml"), []byte(mandate), 0o644); err != nil {
		b.Fatal(err)
	}
	app, err := appliance.Open(context.Background(), appliance.Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler,
		DB: filepath.Join(dir, "holon.db"), Registry: []string{"agents", "examples"}, MandatesDir: mandates,
		SignupCredit: journal.MustParseAmount("1000000.00"), // fsync on, as a gateway runs
	})
	if err != nil {
		b.Fatal(err)
	}
	defer app.Close()
	srv := httptest.NewServer(app.Handler())
	defer srv.Close()
	body := `{"mandate":"bench/m","agent":"holon-labs/company-lookup","input":{"name":"Globex GmbH"}}`
	var n atomic.Int64
	store := kv.Unwrap(app.Engine().Store())
	b.SetParallelism(32)
	before := store.Stats()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v0/calls", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if withKey {
				sum := sha256.Sum256(fmt.Appendf(nil, "key-%d", n.Add(1)))
				req.Header.Set("Idempotency-Key", hex.EncodeToString(sum[:16]))
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.StopTimer()
	after := store.Stats()
	b.ReportMetric(float64(after.Commits-before.Commits)/float64(b.N), "commits/call")
	b.ReportMetric(float64(after.PageBytes-before.PageBytes)/1024/float64(b.N), "page-KB/call")
}

// BenchmarkIdempotency_Sweep measures the sweep of Idempotency-Keys over
// an index of 10,000 finished keys (fsync on, as a gateway runs):
// "expired", all past their lifetime and deleted (500 per write
// transaction); "fresh", none expired, so the sweep only reads.
func BenchmarkIdempotency_Sweep(b *testing.B) {
	b.Run("expired", func(b *testing.B) { benchmarkIdempotencySweep(b, true) })
	b.Run("fresh", func(b *testing.B) { benchmarkIdempotencySweep(b, false) })
}

func benchmarkIdempotencySweep(b *testing.B, expired bool) {
	const keys = 10_000
	finished := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	now := finished.Add(time.Hour)
	if expired {
		now = finished.Add(appliance.DefaultIdempotencyTTL + time.Hour)
	}
	app, err := appliance.Open(context.Background(), appliance.Config{OpenStore: kv.OpenStore,
		DB: filepath.Join(b.TempDir(), "holon.db"), Registry: []string{"agents"},
		Now: func() time.Time { return now },
	})
	if err != nil {
		b.Fatal(err)
	}
	defer app.Close()
	store := app.Engine().Store()
	fill := func() {
		err := store.Update(context.Background(), func(tx holon.Tx) error {
			for i := range keys {
				sum := sha256.Sum256(fmt.Appendf(nil, "key-%d", i))
				rec := map[string]any{"state": "done", "request": hex.EncodeToString(sum[:]), "receipt": fmt.Sprintf("r_%024d", i),
					"status": 200, "started": finished, "finished": finished}
				if err := tx.Put(holon.BucketIdempotency, "key/"+hex.EncodeToString(sum[:])+"/"+hex.EncodeToString(sum[:16]), rec); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	fill()
	want := 0
	if expired {
		want = keys
	}
	b.ResetTimer()
	for b.Loop() {
		if expired {
			b.StopTimer()
			fill()
			b.StartTimer()
		}
		n, err := app.SweepIdempotencyKeys(context.Background())
		if err != nil || n != want {
			b.Fatalf("sweep: %d, %v, want %d", n, err, want)
		}
	}
	b.ReportMetric(float64(keys)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
