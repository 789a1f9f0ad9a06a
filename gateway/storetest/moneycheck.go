package storetest

import (
	"encoding/json"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

func init() {
	add(
		behaviour{"Money/CheckPassesSettledCalls", testCheckPasses},
		behaviour{"Money/CheckCatchesEveryLie", testCheckCatches},
		behaviour{"Money/AllowHoldsAllowsOnlyCallsInFlight", testCheckAllowHolds},
	)
}

// settled writes what the engine leaves of a delegated call under
// bob/main: a parent billed 0.10 (0.01 to holon, 0.09 to acme) with a
// child billed 0.05 (to beta) under its sub-mandate, paid by the same
// payer, and a denied call.
func settled(t *testing.T, e *env) (parent, child *holon.Receipt) {
	e.credit("signup:bob", "bob", "5.00")
	e.update(func(tx holon.Tx) error {
		if err := tx.PutMandate("bob/main", holon.Doc{Doc: json.RawMessage(`{}`)}); err != nil {
			return err
		}
		var ids [3]string
		for i := range ids {
			id, err := tx.NewReceiptID()
			if err != nil {
				return err
			}
			ids[i] = id
		}
		parent = &holon.Receipt{ID: ids[0], Mandate: "bob/main", Payer: "bob", Status: holon.StatusSucceeded, Billed: true,
			Cost:   holon.Cost{Own: amt("0.10"), Downstream: amt("0.05"), Total: amt("0.15")},
			Splits: []journal.Share{{To: "holon", Amount: amt("0.01")}, {To: "acme", Amount: amt("0.09")}}, Children: []string{ids[1]}}
		child = &holon.Receipt{ID: ids[1], Parent: &parent.ID, Mandate: "bob/main/sub", Payer: "bob", Status: holon.StatusSucceeded, Billed: true,
			Cost: holon.Cost{Own: amt("0.05"), Total: amt("0.05")}, Splits: []journal.Share{{To: "beta", Amount: amt("0.05")}}}
		denied := &holon.Receipt{ID: ids[2], Mandate: "bob/main", Payer: "bob", Status: holon.StatusDenied}
		for _, r := range []*holon.Receipt{parent, child, denied} {
			if err := tx.PutReceipt(r); err != nil {
				return err
			}
			if !r.Billed {
				continue
			}
			entry, err := journal.Settlement("settle:"+r.ID, r.Payer, r.Splits)
			if err != nil {
				return err
			}
			if _, err := tx.AppendEntry(entry); err != nil {
				return err
			}
		}
		if err := tx.AddBudget("bob/main/sub", amt("0.05"), 0); err != nil {
			return err
		}
		return tx.AddBudget("bob/main", amt("0.15"), 0)
	})
	return parent, child
}

// Ensure that CheckMoney passes a store whose calls all settled as the
// engine settles them.
func testCheckPasses(t *testing.T, e *env) {
	settled(t, e)
	rec := &Recorder{TB: t}
	CheckMoney(rec, e.s)
	if len(rec.Errs) > 0 {
		t.Errorf("CheckMoney of settled calls reported %q", rec.Errs)
	}
}

// Ensure that CheckMoney reports each way a store's money can be wrong: a
// hold, a reservation or an amount held left behind, a receipt billed with
// no settlement or settled though unbilled, a settlement's lines that are
// not the receipt's splits, a parent's downstream that is not its
// children's, a running receipt, and a budget's spent that is not its
// receipts'.
func testCheckCatches(t *testing.T, e *env) {
	parent, _ := settled(t, e)
	e.update(func(tx holon.Tx) error {
		lie := *parent // billed, yet no entry
		lie.ID, lie.Children = "r900", nil
		lie.Cost = holon.Cost{Own: amt("0.50"), Total: amt("0.50")}
		lie.Splits = []journal.Share{{To: "acme", Amount: amt("0.50")}}
		if err := tx.PutReceipt(&lie); err != nil {
			return err
		}
		p := *parent // downstream no longer its child's
		p.Cost.Downstream, p.Cost.Total = amt("0.06"), amt("0.16")
		if err := tx.PutReceipt(&p); err != nil {
			return err
		}
		unbilled := holon.Receipt{ID: "r901", Mandate: "bob/main", Payer: "bob", Status: holon.StatusRunning}
		if err := tx.PutReceipt(&unbilled); err != nil {
			return err
		}
		if _, err := tx.AppendEntry(transfer(t, "settle:r901", "bob", "acme", "0.01")); err != nil {
			return err
		}
		wrong := holon.Receipt{ID: "r902", Mandate: "ann/main", Payer: "bob", Status: holon.StatusSucceeded, Billed: true,
			Cost: holon.Cost{Own: amt("0.02"), Total: amt("0.02")}, Splits: []journal.Share{{To: "acme", Amount: amt("0.02")}}}
		if err := tx.PutReceipt(&wrong); err != nil {
			return err
		}
		if _, err := tx.AppendEntry(transfer(t, "settle:r902", "bob", "holon", "0.02")); err != nil {
			return err
		}
		if err := tx.AddBudget("ann/main", amt("0.02"), amt("0.03")); err != nil {
			return err
		}
		if err := tx.AddHeld("bob", amt("0.04")); err != nil {
			return err
		}
		return tx.PutHold(&holon.Hold{Receipt: "r98", Payer: "bob", Mandate: "bob/main"})
	})
	rec := &Recorder{TB: t}
	CheckMoney(rec, e.s)
	for _, want := range []string{
		"hold left for r98",
		"account bob: 0.04 still held",
		"mandate ann/main: 0.03 still reserved",
		"r900: billed 0.50 but no settle:r900 entry",
		"r901: running, billed false, cost.own 0.00, but journaled as",
		`r901: status "running"`,
		"(settle:r901) pays no billed receipt",
		"r902: settle entry lines",
		"cost.downstream 0.06, its same-payer children's totals sum to 0.05",
		"mandate bob/main: spent 0.15, its receipts' totals sum to 0.66",
	} {
		if !rec.Saw(want) {
			t.Errorf("CheckMoney did not report %q; it reported %q", want, rec.Errs)
		}
	}
	rec = &Recorder{TB: t}
	CheckMoney(rec, e.s, Foreign("settle:r901"))
	if rec.Saw("r901: running, billed false") || rec.Saw("settle:r901") {
		t.Errorf("Foreign(settle:r901): still reported %q", rec.Errs)
	}
	rec = &Recorder{TB: t}
	CheckMoney(rec, e.s, SkipReceipts)
	if rec.Saw("r90") || !rec.Saw("hold left for r98") || !rec.Saw("account bob: 0.04 still held") {
		t.Errorf("SkipReceipts: reported %q, want the hold and the amount held, no receipt", rec.Errs)
	}
}

// Ensure that AllowHolds lets calls be in flight (a hold, a reservation,
// an amount held, a running receipt) and nothing else.
func testCheckAllowHolds(t *testing.T, e *env) {
	settled(t, e)
	e.update(func(tx holon.Tx) error {
		if err := tx.PutReceipt(&holon.Receipt{ID: "r900", Mandate: "bob/main", Payer: "bob", Status: holon.StatusRunning}); err != nil {
			return err
		}
		if err := tx.PutHold(&holon.Hold{Receipt: "r900", Payer: "bob", Mandate: "bob/main", Amount: amt("0.10"), Reserved: amt("0.10")}); err != nil {
			return err
		}
		if err := tx.AddHeld("bob", amt("0.10")); err != nil {
			return err
		}
		return tx.AddBudget("bob/main", amt("0.01"), amt("0.10"))
	})
	rec := &Recorder{TB: t}
	CheckMoney(rec, e.s, AllowHolds)
	if len(rec.Errs) != 1 || !rec.Saw("mandate bob/main: spent 0.16, its receipts' totals sum to 0.15") {
		t.Errorf("CheckMoney with AllowHolds reported %q, want only the spent that is not the receipts'", rec.Errs)
	}
	rec = &Recorder{TB: t}
	CheckMoney(rec, e.s)
	for _, want := range []string{"hold left for r900", "still held", "still reserved", `r900: status "running"`} {
		if !rec.Saw(want) {
			t.Errorf("CheckMoney without AllowHolds did not report %q; it reported %q", want, rec.Errs)
		}
	}
}
