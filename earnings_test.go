package holon_test

import (
	"errors"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// Ensure that Earnings.Add sums per currency and refuses, changing nothing,
// a change that would leave a count or an amount below zero.
func TestEarnings_Add(t *testing.T) {
	e := holon.Earnings{}
	if err := e.Add("EUR", 2, 90_000, 10_000); err != nil {
		t.Fatal(err)
	}
	if err := e.Add("EUR", 1, 45_000, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.Add("USD", 1, 5, 0); err != nil {
		t.Fatal(err)
	}
	want := holon.Earned{PaidCalls: 3, Own: 135_000, Royalties: 10_000}
	if e["EUR"] != want || e["USD"] != (holon.Earned{PaidCalls: 1, Own: 5}) {
		t.Fatalf("earnings %+v", e)
	}
	for _, c := range []struct {
		calls          int64
		own, royalties int64
	}{{-4, 0, 0}, {0, -135_001, 0}, {0, 0, -10_001}} {
		err := e.Add("EUR", c.calls, journal.Amount(c.own), journal.Amount(c.royalties))
		if !errors.Is(err, holon.ErrEarningsBelowZero) {
			t.Errorf("Add(%+v): %v, want ErrEarningsBelowZero", c, err)
		}
	}
	if e["EUR"] != want {
		t.Fatalf("a refused change changed the earnings: %+v", e["EUR"])
	}
}
