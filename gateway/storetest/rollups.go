package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

func init() {
	add(
		behaviour{"Rollups/AddAndReadARange", testRollupsRange},
		behaviour{"Rollups/GroupedUpdatesAddUp", testRollupsGrouped},
		behaviour{"Rollups/NeverBelowZero", testRollupsBelowZero},
		behaviour{"Rollups/KeptMarkAndClear", testRollupsKept},
	)
}

func spendKey(owner string, dim byte, day holon.Day, value string) holon.RollupKey {
	return holon.RollupKey{Kind: holon.RollupSpend, Owner: owner, Dim: dim, Day: day, Value: value}
}

// rollupRows reads a range as "day value currency calls/amount/refunded".
func rollupRows(t *testing.T, e *env, kind byte, owner string, dim byte, from, to holon.Day) []string {
	t.Helper()
	var out []string
	e.view(func(tx holon.Tx) error {
		return tx.ForEachRollup(kind, owner, dim, from, to, func(k holon.RollupKey, ts holon.Tallies) error {
			if k.Kind != kind || k.Owner != owner || k.Dim != dim {
				t.Errorf("row %+v read for %c %s %c", k, kind, owner, dim)
			}
			for _, c := range []string{"EUR", "USD"} {
				if x, ok := ts[c]; ok {
					out = append(out, fmt.Sprintf("%d %s %s %d/%s/%s", k.Day, k.Value, c, x.Calls, x.Amount, x.Refunded))
				}
			}
			return nil
		})
	})
	return out
}

// Ensure that rollup rows add up per key and currency, and that a range
// reads exactly the rows of its kind, owner and dimension from its first
// day to its last, both included, in day then value order.
func testRollupsRange(t *testing.T, e *env) {
	e.update(func(tx holon.Tx) error {
		for _, r := range []struct {
			k   holon.RollupKey
			cur string
			d   holon.Tally
		}{
			{spendKey("alice", holon.ByMandate, 9, "alice/a"), "USD", holon.Tally{Calls: 1, Amount: amt("0.10")}},
			{spendKey("alice", holon.ByMandate, 10, "alice/b"), "USD", holon.Tally{Calls: 1, Amount: amt("0.20")}},
			{spendKey("alice", holon.ByMandate, 10, "alice/a"), "USD", holon.Tally{Calls: 2, Amount: amt("0.30")}},
			{spendKey("alice", holon.ByMandate, 10, "alice/a"), "EUR", holon.Tally{Calls: 1, Amount: amt("1")}},
			{spendKey("alice", holon.ByMandate, 12, "alice/a"), "USD", holon.Tally{Refunded: amt("0.05")}},
			{spendKey("alice", holon.ByMandate, 13, "alice/a"), "USD", holon.Tally{Calls: 1, Amount: amt("9")}},
			{spendKey("alice", holon.ByDay, 10, ""), "USD", holon.Tally{Calls: 3, Amount: amt("0.50")}},
			{spendKey("alicea", holon.ByMandate, 10, "x"), "USD", holon.Tally{Calls: 1, Amount: amt("7")}},
			{holon.RollupKey{Kind: holon.RollupEarnings, Owner: "alice", Dim: holon.ByMandate, Day: 10, Value: "alice/a"}, "USD", holon.Tally{Calls: 1, Amount: amt("8")}},
		} {
			if err := tx.AddRollup(r.k, r.cur, r.d); err != nil {
				return err
			}
		}
		return nil
	})
	e.update(func(tx holon.Tx) error {
		return tx.AddRollup(spendKey("alice", holon.ByMandate, 10, "alice/a"), "USD", holon.Tally{Calls: 1, Amount: amt("0.01"), Refunded: amt("0.02")})
	})
	got := fmt.Sprint(rollupRows(t, e, holon.RollupSpend, "alice", holon.ByMandate, 10, 12))
	want := "[10 alice/a EUR 1/1.00/0.00 10 alice/a USD 3/0.31/0.02 10 alice/b USD 1/0.20/0.00 12 alice/a USD 0/0.00/0.05]"
	if got != want {
		t.Errorf("days 10 to 12:\n got %s\nwant %s", got, want)
	}
	if got := rollupRows(t, e, holon.RollupSpend, "alice", holon.ByMandate, 13, 13); fmt.Sprint(got) != "[13 alice/a USD 1/9.00/0.00]" {
		t.Errorf("day 13 alone: %v", got)
	}
	if got := rollupRows(t, e, holon.RollupSpend, "alice", holon.ByMandate, 14, 400); got != nil {
		t.Errorf("days after the last: %v", got)
	}
	if got := rollupRows(t, e, holon.RollupSpend, "alice", holon.ByMandate, 12, 11); got != nil {
		t.Errorf("a range that ends before it starts: %v", got)
	}
	if got := rollupRows(t, e, holon.RollupSpend, "alice", holon.ByDay, 0, 100); fmt.Sprint(got) != "[10  USD 3/0.50/0.00]" {
		t.Errorf("by day: %v", got)
	}
	e.reopen()
	if got := fmt.Sprint(rollupRows(t, e, holon.RollupSpend, "alice", holon.ByMandate, 10, 12)); got != want {
		t.Errorf("after reopening:\n got %s\nwant %s", got, want)
	}
}

// Ensure that concurrent updates to the same rows, grouped into commits,
// add up exactly, and that a failing update among them leaves nothing of
// its additions.
func testRollupsGrouped(t *testing.T, e *env) {
	const n = 60
	g := closeGate(e)
	var started atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Add(1)
			errs[i] = e.s.Update(context.Background(), func(tx holon.Tx) error {
				for _, k := range []holon.RollupKey{spendKey("bob", holon.ByDay, 20, ""), spendKey("bob", holon.ByAgent, 20, fmt.Sprintf("v%d", i%3))} {
					if err := tx.AddRollup(k, "USD", holon.Tally{Calls: 1, Amount: amt("0.01")}); err != nil {
						return err
					}
				}
				if i%7 == 0 {
					return refused(i)
				}
				return nil
			})
		}()
	}
	g.release(t, &started, n)
	wg.Wait()
	ok := 0
	for i, err := range errs {
		if i%7 == 0 {
			if !errors.Is(err, errRefused) {
				t.Errorf("update %d: %v, want refused", i, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("update %d: %v", i, err)
		}
		ok++
	}
	day := rollupRows(t, e, holon.RollupSpend, "bob", holon.ByDay, 20, 20)
	if want := fmt.Sprintf("[20  USD %d/%s/0.00]", ok, amt("0.01")*journal.Amount(ok)); fmt.Sprint(day) != want {
		t.Errorf("day total %v, want %s", day, want)
	}
	var calls int64
	e.view(func(tx holon.Tx) error {
		return tx.ForEachRollup(holon.RollupSpend, "bob", holon.ByAgent, 20, 20, func(_ holon.RollupKey, ts holon.Tallies) error {
			calls += ts["USD"].Calls
			return nil
		})
	})
	if calls != int64(ok) {
		t.Errorf("by agent: %d calls, want %d", calls, ok)
	}
}

// Ensure that an addition that would leave a sum below zero fails its
// update and changes nothing.
func testRollupsBelowZero(t *testing.T, e *env) {
	k := spendKey("carol", holon.ByDay, 5, "")
	e.update(func(tx holon.Tx) error { return tx.AddRollup(k, "USD", holon.Tally{Calls: 1, Amount: amt("0.10")}) })
	for _, d := range []holon.Tally{{Calls: -2}, {Amount: -amt("0.11")}, {Refunded: -1}} {
		err := e.s.Update(context.Background(), func(tx holon.Tx) error {
			if err := tx.AddRollup(spendKey("carol", holon.ByDay, 6, ""), "USD", holon.Tally{Calls: 1}); err != nil {
				return err
			}
			return tx.AddRollup(k, "USD", d)
		})
		if err == nil {
			t.Errorf("adding %+v to %+v: no error", d, k)
		}
	}
	if got := fmt.Sprint(rollupRows(t, e, holon.RollupSpend, "carol", holon.ByDay, 0, 10)); got != "[5  USD 1/0.10/0.00]" {
		t.Errorf("after the refused additions: %s", got)
	}
}

// Ensure that the mark that rollups are kept is kept across a reopen, and
// that clearing deletes every row and the mark.
func testRollupsKept(t *testing.T, e *env) {
	e.update(func(tx holon.Tx) error {
		if err := tx.AddRollup(spendKey("dan", holon.ByDay, 1, ""), "USD", holon.Tally{Calls: 1}); err != nil {
			return err
		}
		return tx.MarkRollupsKept()
	})
	e.reopen()
	e.view(func(tx holon.Tx) error {
		if !tx.RollupsKept() {
			t.Error("not kept after MarkRollupsKept and a reopen")
		}
		return nil
	})
	e.update(func(tx holon.Tx) error { return tx.ClearRollups() })
	e.view(func(tx holon.Tx) error {
		if tx.RollupsKept() {
			t.Error("kept after ClearRollups")
		}
		return nil
	})
	if got := rollupRows(t, e, holon.RollupSpend, "dan", holon.ByDay, 0, 10); got != nil {
		t.Errorf("rows after ClearRollups: %v", got)
	}
}
