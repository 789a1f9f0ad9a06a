package idempotency

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// BenchmarkKeys_Fold measures a fold's transaction, which holds the
// store's one writer while it runs: foldBatch live keys of random names
// (UUID-like, as clients send) moved from the log into a key/ layout
// already holding 200,000 keys, on a store that fsyncs. It reports the
// writer's time per transaction (what a settlement queued behind it may
// wait) and the pages it wrote.
func BenchmarkKeys_Fold(b *testing.B) {
	path := filepath.Join(b.TempDir(), "holon.db")
	s, err := kv.Open(path, kv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	store := s.Holon()
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	rec := Record{State: stateDone, Request: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Receipt: "r1234567", Status: 200, Started: at, Finished: &at}
	name := func() string {
		var r [16]byte
		_, _ = rand.Read(r[:])
		return "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef/" + hex.EncodeToString(r[:])
	}
	for range 20 {
		err := store.Update(context.Background(), func(tx holon.Tx) error {
			for range 10_000 {
				if err := tx.Put(holon.BucketIdempotency, "key/"+name(), rec); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	d := New(store, func() time.Time { return at }, DefaultTTL)
	if err := d.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	var writer, pages float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		err := store.Update(context.Background(), func(tx holon.Tx) error {
			for range foldBatch {
				k := name()
				seq, _ := d.appendLog(k)
				if err := tx.Put(holon.BucketIdempotency, logKey(seq), logEntry{Key: k, Record: rec}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		st0 := s.Stats()
		b.StartTimer()
		if _, _, err := d.foldChunk(context.Background(), at); err != nil {
			b.Fatal(err)
		}
		st1 := s.Stats()
		writer += float64((st1.UpdateTime + st1.CommitTime - st0.UpdateTime - st0.CommitTime).Microseconds()) / 1e3
		pages += float64(st1.PageBytes-st0.PageBytes) / 1024
	}
	b.ReportMetric(writer/float64(b.N), "writer-ms/fold")
	b.ReportMetric(pages/float64(b.N), "page-KB/fold")
}
