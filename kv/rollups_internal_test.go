package kv

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"holon.dev/holon"
)

// Ensure that the rollup rows a write transaction flushes from its cache
// are stored as appendTallies lays them out (per currency, in currency
// order: length, name, then calls, amount and refunded as varints), for a
// row of one currency and one of two, and read back the same.
func TestRollups_FlushedBytes(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "holon.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	one := holon.RollupKey{Kind: holon.RollupSpend, Owner: "ann", Dim: holon.ByDay, Day: 20000}
	two := holon.RollupKey{Kind: holon.RollupSpend, Owner: "ann", Dim: holon.ByAgent, Day: 20000, Value: "lena/x@1.0.0"}
	err = s.Update(context.Background(), func(tx *Tx) error {
		for _, a := range []struct {
			k holon.RollupKey
			c string
			t holon.Tally
		}{
			{one, "EUR", holon.Tally{Calls: 1, Amount: 10000}},
			{one, "EUR", holon.Tally{Calls: 1, Amount: 5000, Refunded: 200}},
			{two, "USD", holon.Tally{Calls: 2, Amount: 3}},
			{two, "EUR", holon.Tally{Calls: 1, Amount: 64}},
		} {
			if err := tx.AddRollup(a.k, a.c, a.t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[holon.RollupKey][]byte{
		one: {3, 'E', 'U', 'R', 4, 0xb0, 0xea, 0x01, 0x90, 0x03},
		two: {3, 'E', 'U', 'R', 2, 0x80, 0x01, 0, 3, 'U', 'S', 'D', 4, 6, 0},
	}
	err = s.View(func(tx *Tx) error {
		for k, w := range want {
			// As stored: pending in the log, or put into bbolt.
			got := tx.get(bucketRollups, appendRollupKey(nil, k))
			if !bytes.Equal(got, w) {
				t.Errorf("row %+v = %v, want %v", k, got, w)
			}
		}
		n := 0
		err := tx.ForEachRollupRow(func(k holon.RollupKey, tl holon.Tallies) error {
			n++
			if _, ok := want[k]; !ok {
				t.Errorf("row %+v read back, not written", k)
			}
			return nil
		})
		if n != len(want) {
			t.Errorf("%d rows read back, want %d", n, len(want))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
