package limit_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"holon.dev/holon/journal"
	"holon.dev/holon/kv/limit"
)

// Ensure that concurrent settlements are all written, grouped, with the
// money adding up; that a reused key, a spent budget and missing funds
// are refused and write nothing.
func TestStore_Settle(t *testing.T) {
	s, err := limit.Open(filepath.Join(t.TempDir(), "limit.db"), 64)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	price := journal.MustParseAmount("0.01")
	shares, err := journal.Split(price, "author", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Fund("payer", "external", journal.MustParseAmount("1.00"), "m", journal.MustParseAmount("0.50")); err != nil {
		t.Fatal(err)
	}
	if err := s.Fund("poor", "external", journal.MustParseAmount("0.005"), "p", journal.MustParseAmount("1.00")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	settle := func(key, mandate, payer string) error {
		_, err := s.Settle(ctx, &limit.Settlement{Key: key, Mandate: mandate, Payer: payer, Agent: "a@1.0.0", Price: price, Shares: shares})
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, 60)
	for i := range errs {
		wg.Go(func() { errs[i] = settle("k"+string(rune('A'+i)), "m", "payer") })
	}
	wg.Wait()
	var ok, over int
	settled := "" // a key that settled (which ones did is the scheduler's choice)
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
			settled = "k" + string(rune('A'+i))
		case errors.Is(err, limit.ErrOverBudget):
			over++
		default:
			t.Fatal(err)
		}
	}
	if ok != 50 || over != 10 {
		t.Errorf("%d settled, %d over budget; want 50 and 10 (a budget of 0.50 at 0.01)", ok, over)
	}
	if err := settle(settled, "p", "poor"); !errors.Is(err, limit.ErrDuplicate) {
		t.Errorf("a reused key: %v, want ErrDuplicate", err)
	}
	if err := settle("poor-1", "p", "poor"); !errors.Is(err, limit.ErrNoFunds) {
		t.Errorf("0.01 from 0.005: %v, want ErrNoFunds", err)
	}
	tot, err := s.Check()
	if err != nil {
		t.Fatal(err)
	}
	if tot.Sum != 0 || tot.Receipts != 50 || tot.Entries != 50 || tot.Keys != 50 || tot.Spent != 50*price {
		t.Errorf("totals %+v, want 50 rows each, balances summing to zero, 0.50 spent", tot)
	}
}
