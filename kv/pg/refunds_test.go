package pg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// Ensure that the schema's constraints keep refunds within their
// receipts: refunds of a billed receipt up to its cost.own commit, one
// more micro-unit is refused at commit with nothing of the update
// written, and so is a refund of a receipt that was not billed.
func TestStore_RefundsWithinTheirReceipt(t *testing.T) {
	s := newDatabases(t).open(t, "refunds")
	defer s.Close()
	ctx := context.Background()
	own := journal.MustParseAmount("0.08")
	err := s.Update(ctx, func(tx holon.Tx) error {
		for _, r := range []*holon.Receipt{
			{ID: "r1", Mandate: "ann/m", Caller: "ann/a", Status: holon.StatusSucceeded, Currency: "EUR", Payer: "ann", Billed: true,
				Cost: holon.Cost{Own: own, Total: own}, Splits: []journal.Share{{To: "holon", Amount: own}}, Children: []string{}, Created: time.Now()},
			{ID: "r2", Mandate: "ann/m", Caller: "ann/a", Status: holon.StatusFailed, Currency: "EUR", Payer: "ann",
				Splits: []journal.Share{}, Children: []string{}, Created: time.Now()},
		} {
			if err := tx.PutReceipt(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	put := func(receipt string, n int, amount string) error {
		return s.Update(ctx, func(tx holon.Tx) error {
			return tx.Put(holon.BucketRefunds, holon.RefundKey(receipt, n), &holon.Refund{ID: holon.RefundKey(receipt, n), Receipt: receipt,
				Amount: journal.MustParseAmount(amount), Entry: holon.RefundEntryKey(receipt, n), Parts: []journal.Share{}})
		})
	}
	if err := put("r1", 1, "0.05"); err != nil {
		t.Fatal(err)
	}
	if err := put("r1", 2, "0.03"); err != nil {
		t.Fatalf("refunds up to cost.own: %v", err)
	}
	if err := put("r1", 3, "0.000001"); err == nil || !strings.Contains(err.Error(), "above its cost.own") {
		t.Errorf("a refund past cost.own: %v", err)
	}
	if err := put("r2", 1, "0.01"); err == nil || !strings.Contains(err.Error(), "not a billed receipt") {
		t.Errorf("a refund of an unbilled receipt: %v", err)
	}
	_ = s.View(func(tx holon.Tx) error {
		if rs, err := holon.Refunds(tx, "r1"); err != nil || len(rs) != 2 {
			t.Errorf("r1 has %d refunds (%v), want the 2 that fit", len(rs), err)
		}
		return nil
	})
}
