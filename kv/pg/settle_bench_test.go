package pg_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// BenchmarkStore_Settle settles calls through one handle from 64
// goroutines, each call the two updates a settled call writes (its
// receipt, hold and reservation; then its settlement, budget, event, the
// receipt's final state and the hold's release), and reports beside the
// time per call the CPU this process spent per call (the store's side:
// building, sending and reading the statements), which the machine's
// load moves less than the time.
func BenchmarkStore_Settle(b *testing.B) {
	url := pgtest.Start(b).CreateDB(b, "bench_settle")
	s, err := pg.Open(context.Background(), url, holon.StoreOptions{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	price := journal.Amount(10000)
	shares, err := journal.Split(price, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	settle := func(ctx context.Context) error {
		c := n.Add(1)
		payer, mandate := fmt.Sprintf("p%02d", c%16), fmt.Sprintf("m%02d", c%16)
		var r *holon.Receipt
		err := s.Update(ctx, func(tx holon.Tx) error {
			id, err := tx.NewReceiptID()
			if err != nil {
				return err
			}
			r = &holon.Receipt{ID: id, Mandate: mandate, Caller: payer, Status: holon.StatusRunning, Payer: payer, Currency: "EUR",
				Children: []string{}, Splits: []journal.Share{}, Created: tx.Now()}
			if err := tx.PutReceipt(r); err != nil {
				return err
			}
			if err := tx.AddBudget(mandate, 0, price); err != nil {
				return err
			}
			if err := tx.AddHeld(payer, price); err != nil {
				return err
			}
			return tx.PutHold(&holon.Hold{Receipt: id, Payer: payer, Amount: price, Mandate: mandate, Reserved: price, Started: tx.Now()})
		})
		if err != nil {
			return err
		}
		return s.Update(ctx, func(tx holon.Tx) error {
			e, err := journal.Settlement("settle:"+r.ID, payer, shares)
			if err != nil {
				return err
			}
			if _, err := tx.AppendEntry(e); err != nil {
				return err
			}
			if err := tx.AddBudget(mandate, price, -price); err != nil {
				return err
			}
			if err := tx.AddHeld(payer, -price); err != nil {
				return err
			}
			if err := tx.AppendEvent(&holon.Event{Receipt: r.ID, Agent: "acme/echo@1.0.0", Status: holon.StatusSucceeded, Billed: price, Currency: "EUR", Time: tx.Now()}, true); err != nil {
				return err
			}
			f := *r
			f.Status, f.Billed, f.Splits, f.DurationMS = holon.StatusSucceeded, true, shares, 3
			f.Cost = holon.Cost{Own: price, Total: price}
			if err := tx.PutReceipt(&f); err != nil {
				return err
			}
			return tx.DeleteHold(r.ID)
		})
	}
	// Credit the payers first: their balances pay the settlements.
	err = s.Update(context.Background(), func(tx holon.Tx) error {
		for i := range 16 {
			e := journal.Entry{Key: fmt.Sprintf("credit:%d", i), Lines: []journal.Line{{Account: "external:bench", Amount: -1 << 40}, {Account: fmt.Sprintf("p%02d", i), Amount: 1 << 40}}}
			if _, err := tx.AppendEntry(e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := processCPU()
	start := time.Now()
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := settle(context.Background()); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	calls := float64(b.N)
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/calls, "cpu-µs/call")
	b.ReportMetric(calls/time.Since(start).Seconds(), "calls/s")
	if err := s.View(func(tx holon.Tx) error { return tx.(*pg.Tx).VerifyJournal() }); err != nil {
		b.Fatal(err)
	}
}

// processCPU is the CPU time this process spent so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
