package kv_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// benchPayers is the number of paying accounts (and mandates) settlements
// are spread over.
const benchPayers = 64

// seedCalls funds the payers and reserves n calls r1..rn, each with its
// running receipt, its hold, what it holds and its budget reservation: what
// the gateway has written by the time a call comes back to be settled.
func seedCalls(b *testing.B, s *kv.Store, n int, worst journal.Amount) {
	b.Helper()
	for p := range benchPayers {
		credit(b, s, fmt.Sprintf("payer%02d", p), "1000000")
	}
	for start := 0; start < n; start += 1000 {
		mustUpdate(b, s, func(tx *kv.Tx) error {
			for i := start; i < min(start+1000, n); i++ {
				id, err := tx.NewReceiptID()
				if err != nil {
					return err
				}
				payer := fmt.Sprintf("payer%02d", i%benchPayers)
				mandate := payer + "/sandbox"
				agent := "lena/extract@1.0.0"
				r := &holon.Receipt{ID: id, Mandate: mandate, Caller: payer, Agent: &agent, Status: "running",
					WorstCase: &worst, Currency: "EUR", Payer: payer, Created: tx.Now()}
				if err := tx.PutReceipt(r); err != nil {
					return err
				}
				h := &holon.Hold{Receipt: id, Payer: payer, Amount: worst, Mandate: mandate, Reserved: worst, Started: tx.Now()}
				if err := tx.PutHold(h); err != nil {
					return err
				}
				if err := tx.AddHeld(payer, worst); err != nil {
					return err
				}
				if err := tx.AddBudget(mandate, 0, worst); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// settle is one settlement as one update: the receipt's final state, the
// settlement entry (4 lines: payer, platform, creator, upstream), the hold
// released, the budget's spent and reserved amounts, the hold deleted and
// the call event appended.
func settle(s *kv.Store, i int, price journal.Amount) error {
	id := fmt.Sprintf("r%d", i+1)
	shares, err := journal.Split(price, "lena", []journal.Upstream{{Account: "acme", Rate: journal.MustParseRate("0.15")}})
	if err != nil {
		return err
	}
	entry, err := journal.Settlement("settle:"+id, fmt.Sprintf("payer%02d", i%benchPayers), shares)
	if err != nil {
		return err
	}
	return s.Update(context.Background(), func(tx *kv.Tx) error {
		h, err := tx.Hold(id)
		if err != nil {
			return err
		}
		r, err := tx.Receipt(id)
		if err != nil {
			return err
		}
		r.Status, r.Billed, r.DurationMS = "succeeded", true, 120
		r.Cost = holon.Cost{Own: price, Total: price}
		r.Splits = shares
		if err := tx.PutReceipt(r); err != nil {
			return err
		}
		if _, err := tx.AppendEntry(entry); err != nil {
			return err
		}
		if err := tx.AddHeld(h.Payer, -h.Amount); err != nil {
			return err
		}
		if err := tx.AddBudget(h.Mandate, price, -h.Reserved); err != nil {
			return err
		}
		if err := tx.DeleteHold(id); err != nil {
			return err
		}
		return tx.AppendEvent(&holon.Event{Receipt: id, Agent: *r.Agent, Status: r.Status, DurationMS: r.DurationMS,
			Billed: price, Currency: r.Currency, Time: tx.Now()}, true)
	})
}

// BenchmarkStore_Settle measures settlements per second with fsync on, as a
// gateway runs: 64 concurrent callers sharing group commits, and one caller
// alone for comparison; and, apart, the same 64 callers without fsync.
func BenchmarkStore_Settle(b *testing.B) {
	price, worst := amt("0.035"), amt("0.05")
	run := func(b *testing.B, callers int, opts kv.Options) {
		s := mustOpen(b, opts)
		seedCalls(b, s, b.N, worst)
		lat := make([]time.Duration, b.N)
		var next atomic.Int64
		one := func() {
			i := int(next.Add(1) - 1)
			start := time.Now()
			if err := settle(s, i, price); err != nil {
				b.Errorf("settle r%d: %v", i+1, err)
			}
			lat[i] = time.Since(start)
		}
		before := s.Stats()
		b.ResetTimer()
		if callers == 1 {
			for range b.N {
				one()
			}
		} else {
			b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					one()
				}
			})
		}
		b.StopTimer()
		after := s.Stats()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "settlements/s")
		if commits := after.Commits - before.Commits; commits > 0 {
			b.ReportMetric(float64(after.Updates-before.Updates)/float64(commits), "updates/commit")
			b.ReportMetric(float64(after.PageBytes-before.PageBytes)/1024/float64(commits), "page-KB/commit")
			b.ReportMetric(float64((after.UpdateTime-before.UpdateTime).Microseconds())/float64(commits), "update-µs/commit")
			b.ReportMetric(float64((after.CommitTime-before.CommitTime).Microseconds())/float64(commits), "commit-µs/commit")
		}
		b.ReportMetric(float64(after.PageBytes-before.PageBytes)/1024/float64(b.N), "page-KB/settlement")
		if syncs := after.LogSyncs - before.LogSyncs; syncs > 0 {
			b.ReportMetric(float64((after.LogSyncTime-before.LogSyncTime).Microseconds())/float64(syncs), "logsync-µs")
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
	b.Run("callers=64", func(b *testing.B) { run(b, 64, kv.Options{}) })
	b.Run("callers=1", func(b *testing.B) { run(b, 1, kv.Options{}) })
	// Without fsync: the CPU ceiling of the same path, for comparison only.
	b.Run("callers=64,nosync", func(b *testing.B) { run(b, 64, kv.Options{NoSync: true}) })
}

// BenchmarkStore_Update_FailingHalf measures one batch of 255 updates in
// which every other one fails after writing, with fsync on and off: what a
// burst of refused requests costs the writer. runs/op counts the update
// functions run for the batch (255 at best, 510 at most since each runs at
// most twice); the gate that groups the batch adds one empty commit.
func BenchmarkStore_Update_FailingHalf(b *testing.B) {
	const n = 255
	run := func(b *testing.B, opts kv.Options) {
		s := mustOpen(b, opts)
		runs := make([]atomic.Int32, n)
		before := s.Stats()
		b.ResetTimer()
		for round := range b.N {
			b.StopTimer()
			release := queueInOrder(b, s, failingHalf(b, round, n, runs, false))
			b.StartTimer()
			for i, err := range release() {
				if (err == nil) != (i%2 == 0) {
					b.Fatalf("update %d: %v", i, err)
				}
			}
		}
		b.StopTimer()
		total := 0
		for i := range runs {
			total += int(runs[i].Load())
		}
		after := s.Stats()
		b.ReportMetric(float64(total)/float64(b.N), "runs/op")
		b.ReportMetric(float64(after.Commits-before.Commits)/float64(b.N), "commits/op")
	}
	b.Run("fsync", func(b *testing.B) { run(b, kv.Options{}) })
	b.Run("nosync", func(b *testing.B) { run(b, kv.Options{NoSync: true}) })
}

// BenchmarkStore_SettleBatch measures the writer's own work for a commit
// of 64 settlements of in-process calls (one update here, as the writer's
// cache sees a batch), as the engine writes them (the
// receipt written once, final; the settlement entry; the budget; the call
// event with the agent's record; the version's latency and the earnings of
// its two lineage levels), without fsync: per settlement, the time and
// allocations of the update functions and the commit's encoding and page
// writes, which the disk does not move.
func BenchmarkStore_SettleBatch(b *testing.B) {
	s := mustOpen(b, kv.Options{NoSync: true})
	for p := range benchPayers {
		credit(b, s, fmt.Sprintf("payer%02d", p), "1000000")
	}
	price := amt("0.035")
	shares, err := journal.Split(price, "lena", []journal.Upstream{{Account: "acme", Rate: journal.MustParseRate("0.15")}})
	if err != nil {
		b.Fatal(err)
	}
	agent, up := "lena/extract@1.0.0", "acme/extract@1.0.0"
	one := func(tx *kv.Tx, i int) error {
		id, err := tx.NewReceiptID()
		if err != nil {
			return err
		}
		payer := fmt.Sprintf("payer%02d", i%benchPayers)
		mandate := payer + "/sandbox"
		r := &holon.Receipt{ID: id, Mandate: mandate, Caller: payer, Agent: &agent, Status: "succeeded", Billed: true,
			WorstCase: &price, Currency: "EUR", Payer: payer, Created: tx.Now(), DurationMS: 3,
			Cost: holon.Cost{Own: price, Total: price}, Splits: shares}
		entry, err := journal.Settlement("settle:"+id, payer, shares)
		if err != nil {
			return err
		}
		if _, err := tx.AppendEntry(entry); err != nil {
			return err
		}
		if err := tx.AddBudget(mandate, price, 0); err != nil {
			return err
		}
		if err := tx.PutReceipt(r); err != nil {
			return err
		}
		if err := tx.AppendEvent(&holon.Event{Receipt: id, Agent: agent, Status: r.Status, DurationMS: 3,
			Billed: price, Currency: "EUR", Time: tx.Now()}, true); err != nil {
			return err
		}
		if err := tx.AddLatency(agent, 3); err != nil {
			return err
		}
		if err := tx.AddEarnings(agent, "EUR", 1, shares[1].Amount, 0); err != nil {
			return err
		}
		return tx.AddEarnings(up, "EUR", 0, 0, shares[2].Amount)
	}
	const batch = 64
	before := s.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += batch {
		mustUpdate(b, s, func(tx *kv.Tx) error {
			for i := n; i < min(n+batch, b.N); i++ {
				if err := one(tx, i); err != nil {
					return err
				}
			}
			return nil
		})
	}
	b.StopTimer()
	after := s.Stats()
	b.ReportMetric(float64(after.PageBytes-before.PageBytes)/1024/float64(b.N), "page-KB/settlement")
	b.ReportMetric(float64(after.UpdateTime+after.CommitTime-before.UpdateTime-before.CommitTime)/float64(b.N), "writer-ns/settlement")
}

// BenchmarkStore_View measures a small read (an account's standing) from
// concurrent readers while the writer commits beside them, as a gateway's
// admissions read: each View shares the last durable commit's snapshot
// when the store logs (store.go), or begins a bbolt read transaction of
// its own.
func BenchmarkStore_View(b *testing.B) {
	s := mustOpen(b, kv.Options{})
	credit(b, s, "alice", "5.00")
	stop := make(chan struct{})
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			credit(b, s, fmt.Sprintf("w%d", i), "0.01")
		}
	}()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.View(func(tx *kv.Tx) error { _, err := tx.Account("alice"); return err }); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	close(stop)
	<-wrote
}
