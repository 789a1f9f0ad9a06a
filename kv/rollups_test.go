package kv_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// Ensure that an update that fails leaves the rollup rows as if it never
// ran, in a batch where updates before and after it move the same rows: a
// row the cache already holds, a row new to the transaction (read into the
// cache by the failing update itself), one flushed in the middle of the
// update and moved again after; the rows match those of the same batch
// without the failing update.
func TestRollups_UndoInBatch(t *testing.T) {
	day := holon.DayOf(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	row := func(dim byte, value string) holon.RollupKey {
		return holon.RollupKey{Kind: holon.RollupSpend, Owner: "ann", Dim: dim, Day: day, Value: value}
	}
	a, b, c, d := row(holon.ByDay, ""), row(holon.ByAgent, "lena/x@1.0.0"), row(holon.ByMandate, "ann/m"), row(holon.ByKey, "hk_1")
	add := func(k holon.RollupKey, currency string, calls int64, amount string) func(*kv.Tx) error {
		return func(tx *kv.Tx) error {
			return tx.AddRollup(k, currency, holon.Tally{Calls: calls, Amount: amt(amount)})
		}
	}
	seed := steps(add(a, "EUR", 1, "1"), add(d, "EUR", 1, "1"))
	good1 := steps(add(a, "EUR", 1, "0.5"), add(b, "EUR", 1, "0.25"))
	bad := steps(
		add(a, "EUR", 1, "2"), add(a, "USD", 1, "2"), // cached by good1
		add(c, "EUR", 1, "3"), // new to the transaction
		add(d, "EUR", 1, "3"), // in the store, not yet in the cache
		// A raw iteration flushes the cache in the middle of the update.
		func(tx *kv.Tx) error {
			return tx.ForEachRollup(holon.RollupSpend, "ann", holon.ByDay, day, day, func(holon.RollupKey, holon.Tallies) error { return nil })
		},
		add(c, "EUR", 1, "1"), add(d, "USD", 1, "1"), add(b, "EUR", 1, "1"),
		func(*kv.Tx) error { return errRefused },
	)
	good2 := steps(add(c, "EUR", 1, "0.1"), add(a, "EUR", 1, "0.1"), add(d, "EUR", 1, "0.1"))

	opts := kv.Options{NoSync: true}
	with, without := mustOpen(t, opts), mustOpen(t, opts)
	for _, s := range []*kv.Store{with, without} {
		mustUpdate(t, s, seed)
	}
	errs := batchInOrder(t, with, []func(*kv.Tx) error{good1, bad, good2})
	if errs[0] != nil || !errors.Is(errs[1], errRefused) || errs[2] != nil {
		t.Fatalf("batch: %v", errs)
	}
	for i, err := range batchInOrder(t, without, []func(*kv.Tx) error{good1, good2}) {
		if err != nil {
			t.Fatalf("batch without the failing update: update %d: %v", i, err)
		}
	}
	rows := func(s *kv.Store) string {
		var out []string
		mustView(t, s, func(tx *kv.Tx) error {
			return tx.ForEachRollupRow(func(k holon.RollupKey, tl holon.Tallies) error {
				out = append(out, fmt.Sprintf("%c %s %c %s %s %v", k.Kind, k.Owner, k.Dim, k.Day, k.Value, tl))
				return nil
			})
		})
		return strings.Join(out, "\n")
	}
	got, want := rows(with), rows(without)
	if got != want {
		t.Errorf("rows after the batch:\n%s\nwant (without the failing update):\n%s", got, want)
	}
	const wantRows = `s ann a 2026-12-01 lena/x@1.0.0 map[EUR:{1 0.25 0.00}]
s ann d 2026-12-01  map[EUR:{3 1.60 0.00}]
s ann k 2026-12-01 hk_1 map[EUR:{2 1.10 0.00}]
s ann m 2026-12-01 ann/m map[EUR:{1 0.10 0.00}]`
	if want != wantRows {
		t.Errorf("rows without the failing update:\n%s\nwant:\n%s", want, wantRows)
	}
}
