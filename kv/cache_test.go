package kv_test

import (
	"context"
	"errors"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// Ensure that, inside one write transaction, reads and iterations see the
// shared records (accounts, budgets, agent records, latency, earnings,
// counters) as the
// transaction left them, and the commit stores them so.
func TestTx_SharedRecords_SeenInTransaction(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	credit(t, s, "alice", "10.00")
	mustUpdate(t, s, func(tx *kv.Tx) error {
		for range 3 {
			if err := tx.AddHeld("alice", amt("0.50")); err != nil {
				return err
			}
			if err := tx.AddBudget("alice/m", amt("0.10"), amt("0.20")); err != nil {
				return err
			}
			if _, err := tx.AddCounter("calls", 2); err != nil {
				return err
			}
			if err := tx.AppendEvent(&holon.Event{Receipt: "r1", Agent: "acme/a@1.0.0", Status: "succeeded", Billed: amt("0.01"), DurationMS: 5}, true); err != nil {
				return err
			}
			if err := tx.AddLatency("acme/a@1.0.0", 5); err != nil {
				return err
			}
			if err := tx.AddEarnings("acme/a@1.0.0", "EUR", 1, amt("0.01"), 0); err != nil {
				return err
			}
		}
		seen := 0
		if l, _ := tx.Latency("acme/a@1.0.0"); l.Runs() != 3 {
			t.Errorf("Latency in the transaction: %d runs, want 3", l.Runs())
		}
		if e, _ := tx.Earnings("acme/a@1.0.0"); e["EUR"].PaidCalls != 3 || e["EUR"].Own != amt("0.03") {
			t.Errorf("Earnings in the transaction: %+v, want 3 paid calls, 0.03 own", e)
		}
		if err := tx.ForEachLatency(func(ref string, l holon.Latency) error {
			seen++
			if l.Runs() != 3 {
				t.Errorf("ForEachLatency in the transaction: %s %d runs, want 3", ref, l.Runs())
			}
			return nil
		}); err != nil {
			return err
		}
		if err := tx.ForEachEarnings("", func(ref string, e holon.Earnings) error {
			seen++
			if e["EUR"].PaidCalls != 3 {
				t.Errorf("ForEachEarnings in the transaction: %s %+v, want 3 paid calls", ref, e)
			}
			return nil
		}); err != nil {
			return err
		}
		if a, _ := tx.Account("alice"); a.Held != amt("1.50") {
			t.Errorf("Account in the transaction: held %s, want 1.50", a.Held)
		}
		if err := tx.ForEachAccount(func(name string, a holon.Account) error {
			if name == "alice" {
				seen++
				if a.Held != amt("1.50") || a.Balance != amt("10.00") {
					t.Errorf("ForEachAccount in the transaction: alice %+v, want balance 10.00, held 1.50", a)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		if err := tx.ForEachBudget(func(m string, b holon.Budget) error {
			if m == "alice/m" {
				seen++
				if b.Spent != amt("0.30") || b.Reserved != amt("0.60") {
					t.Errorf("ForEachBudget in the transaction: %+v", b)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		if err := tx.ForEachCounter(func(name string, n uint64) error {
			if name == "calls" {
				seen++
				if n != 6 {
					t.Errorf("ForEachCounter in the transaction: calls = %d, want 6", n)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		if err := tx.ForEachRecord(func(agent string, r holon.Record) error {
			seen++
			if r.Runs != 3 || r.Billed != amt("0.03") {
				t.Errorf("ForEachRecord in the transaction: %+v", r)
			}
			return nil
		}); err != nil {
			return err
		}
		if seen != 6 {
			t.Errorf("iterations saw %d of the 6 records", seen)
		}
		// Changes after an iteration are kept too.
		return tx.AddHeld("alice", -amt("1.00"))
	})
	mustView(t, s, func(tx *kv.Tx) error {
		a, err := tx.Account("alice")
		if err != nil {
			return err
		}
		b, err := tx.Budget("alice/m")
		if err != nil {
			return err
		}
		r, err := tx.Record("acme/a@1.0.0")
		if err != nil {
			return err
		}
		if a.Held != amt("0.50") || b.Reserved != amt("0.60") || tx.Counter("calls") != 6 || r.Runs != 3 {
			t.Errorf("after commit: held %s, reserved %s, calls %d, runs %d; want 0.50, 0.60, 6, 3", a.Held, b.Reserved, tx.Counter("calls"), r.Runs)
		}
		l, err := tx.Latency("acme/a@1.0.0")
		if err != nil {
			return err
		}
		e, err := tx.Earnings("acme/a@1.0.0")
		if err != nil {
			return err
		}
		if l.Runs() != 3 || e["EUR"].PaidCalls != 3 || e["EUR"].Own != amt("0.03") {
			t.Errorf("after commit: latency %d runs, earnings %+v; want 3 runs, 3 paid calls, 0.03 own", l.Runs(), e)
		}
		return nil
	})
}

// Ensure that the writer's cache of rows across its transactions holds
// only what committed: a row an undone update changed reads as it was in
// the next transaction, and rollup rows cleared (written around the
// cache) do not come back from it.
func TestTx_HotRows_OnlyCommitted(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	credit(t, s, "alice", "1.00")
	k := holon.RollupKey{Kind: holon.RollupSpend, Owner: "alice", Dim: holon.ByDay, Day: 20000}
	add := func(n int64) func(*kv.Tx) error {
		return func(tx *kv.Tx) error { return tx.AddRollup(k, "EUR", holon.Tally{Calls: n}) }
	}
	mustUpdate(t, s, add(5))
	gift := transfer(t, "gift", "external:demo-credit", "alice", "2.00")
	err := s.Update(context.Background(), func(tx *kv.Tx) error {
		if _, err := tx.AppendEntry(gift); err != nil {
			return err
		}
		if err := add(7)(tx); err != nil {
			return err
		}
		return errors.New("refused after writing")
	})
	if err == nil {
		t.Fatal("the failing update succeeded")
	}
	calls := func(tx *kv.Tx) int64 {
		var n int64
		err := tx.ForEachRollup(k.Kind, k.Owner, k.Dim, k.Day, k.Day, func(_ holon.RollupKey, ts holon.Tallies) error {
			n = ts["EUR"].Calls
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	mustUpdate(t, s, func(tx *kv.Tx) error {
		if a, err := tx.Account("alice"); err != nil || a.Balance != amt("1.00") {
			t.Errorf("after an undone update, the next transaction reads alice's balance %s (%v), want 1.00", a.Balance, err)
		}
		return add(1)(tx)
	})
	mustView(t, s, func(tx *kv.Tx) error {
		if n := calls(tx); n != 6 {
			t.Errorf("the rollup counts %d calls, want 6", n)
		}
		return nil
	})
	mustUpdate(t, s, func(tx *kv.Tx) error { return tx.ClearRollups() })
	mustUpdate(t, s, add(1))
	mustView(t, s, func(tx *kv.Tx) error {
		if n := calls(tx); n != 1 {
			t.Errorf("after the rollups were cleared, the rollup counts %d calls, want 1", n)
		}
		return nil
	})
}
