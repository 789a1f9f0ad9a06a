package backup_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// benchReceipts is the size of the benchmark's store: HOLON_BENCH_RECEIPTS,
// 1,000,000 by default.
func benchReceipts(b *testing.B) int {
	if s := os.Getenv("HOLON_BENCH_RECEIPTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	return 1_000_000
}

// buildStore writes n settled calls directly, 20,000 per transaction: each
// a receipt (and its mandate index and counters), a settlement entry of
// three lines with its balances, and a call event with its record, as the
// gateway writes them.
func buildStore(b *testing.B, path string, n int) {
	s, err := kv.Open(path, kv.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	price := journal.MustParseAmount("0.035")
	shares, err := journal.Split(price, "lena", []journal.Upstream{{Account: "acme", Rate: journal.MustParseRate("0.15")}})
	if err != nil {
		b.Fatal(err)
	}
	const payers = 64
	err = s.Update(ctx, func(tx *kv.Tx) error {
		for p := range payers {
			e, err := journal.Transfer(fmt.Sprintf("signup:payer%02d", p), "external:demo-credit", fmt.Sprintf("payer%02d", p), journal.MustParseAmount("1000000"))
			if err != nil {
				return err
			}
			if _, err := tx.AppendEntry(e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for done := 0; done < n; {
		err := s.Update(ctx, func(tx *kv.Tx) error {
			for i := done; i < min(done+20_000, n); i++ {
				id, err := tx.NewReceiptID()
				if err != nil {
					return err
				}
				payer := fmt.Sprintf("payer%02d", i%payers)
				agent := "lena/extract@1.2.0"
				r := &holon.Receipt{ID: id, Mandate: payer + "/sandbox", Caller: payer + "/assistant", Agent: &agent, Status: "succeeded",
					WorstCase: &price, Currency: "EUR", Payer: payer, Billed: true, Cost: holon.Cost{Own: price, Total: price},
					Splits: shares, Children: []string{}, DurationMS: 40, Created: tx.Now()}
				e, err := journal.Settlement("settle:"+id, payer, shares)
				if err != nil {
					return err
				}
				if _, err := tx.AppendEntry(e); err != nil {
					return err
				}
				if err := tx.PutReceipt(r); err != nil {
					return err
				}
				if err := tx.AppendEvent(&holon.Event{Receipt: id, Agent: agent, Status: "succeeded", DurationMS: 40, Billed: price, Currency: "EUR", Time: tx.Now()}, true); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		done = min(done+20_000, n)
	}
	b.Logf("built %d settled calls in %s", n, time.Since(start).Round(time.Millisecond))
}

// peakHeap samples the live heap until stopped and returns its peak, so a
// benchmark can show what a backup or restore keeps in memory.
func peakHeap() (stop func() uint64) {
	var mu sync.Mutex
	var peak uint64
	done := make(chan struct{})
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		mu.Lock()
		peak = max(peak, m.HeapAlloc)
		mu.Unlock()
	}
	runtime.GC()
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() uint64 {
		close(done)
		sample()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// BenchmarkBackup measures backup, restore and verify rates on a store of
// a million settled calls (HOLON_BENCH_RECEIPTS to change): about 5.5 rows
// per call (receipt, index, journal row and key, event; balances and
// counters). Building the store takes a while; run it alone:
//
//	go test ./backup -run '^$' -bench BenchmarkBackup -benchtime 1x -timeout 30m
func BenchmarkBackup(b *testing.B) {
	n := benchReceipts(b)
	dir := b.TempDir()
	db := filepath.Join(dir, "holon.db")
	buildStore(b, db, n)
	// The copy the restore reads, made once; the backup benchmark writes its own.
	dump := filepath.Join(dir, "holon.jsonl")
	func() {
		s, err := kv.OpenReadOnly(db)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		f, err := os.Create(dump)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if _, err := backup.Write(f, s, backup.Options{}); err != nil {
			b.Fatal(err)
		}
	}()
	var rows int64
	var size int64

	b.Run("backup", func(b *testing.B) {
		s, err := kv.OpenReadOnly(db)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		var peak uint64
		for b.Loop() {
			f, err := os.Create(filepath.Join(dir, "backup.jsonl"))
			if err != nil {
				b.Fatal(err)
			}
			stop := peakHeap()
			sum, err := backup.Write(f, s, backup.Options{})
			peak = max(peak, stop())
			if err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
			rows, size = sum.Trailer.Rows, sum.Bytes
		}
		secs := b.Elapsed().Seconds() / float64(b.N)
		b.ReportMetric(float64(rows)/secs, "rows/s")
		b.ReportMetric(float64(size)/secs/(1<<20), "MB/s")
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		b.Logf("%d receipts, %d rows, backup %.1f MB", n, rows, float64(size)/(1<<20))
	})

	b.Run("restore", func(b *testing.B) {
		var peak uint64
		for i := 0; b.Loop(); i++ {
			f, err := os.Open(dump)
			if err != nil {
				b.Fatal(err)
			}
			target := filepath.Join(dir, fmt.Sprintf("restored-%d.db", i))
			stop := peakHeap()
			sum, err := backup.Restore(f, target, nil)
			peak = max(peak, stop())
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.Remove(target)
			b.StartTimer()
			rows = sum.Trailer.Rows
		}
		secs := b.Elapsed().Seconds() / float64(b.N)
		b.ReportMetric(float64(rows)/secs, "rows/s")
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	})

	b.Run("verify", func(b *testing.B) {
		s, err := kv.OpenReadOnly(db)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		for b.Loop() {
			rep, err := backup.Verify(s)
			if err != nil {
				b.Fatal(err)
			}
			if !rep.OK() {
				b.Fatal("verify failed on the benchmark's store")
			}
		}
		b.ReportMetric(float64(n)/(b.Elapsed().Seconds()/float64(b.N)), "receipts/s")
	})
}
