package backup

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// refunds checks the refunds of billed calls, as part of the settlements
// check: each is of a billed receipt, within its cost.own in all,
// numbered 1, 2, … and journaled under refund:<receipt>:<n> as the
// payer's credit of its amount and the parts it lists as debits; every
// refund entry has its record. It takes each refund off the spent the
// budgets check expects (the receipt's mandate's, and each same-payer
// parent's), and keeps what each refund took from each account for the
// earnings check.
func (v *verifier) refunds() error {
	c := v.c[CheckSettlements]
	v.refundedFrom = map[string]map[string]journal.Amount{}
	v.refunded = map[string]journal.Amount{}
	byReceipt := map[string][]*holon.Refund{}
	var order []string
	err := v.tx.ForEach(holon.BucketRefunds, "", func(key string, raw json.RawMessage) (bool, error) {
		if err := v.tick(); err != nil {
			return false, err
		}
		rf := new(holon.Refund)
		if err := json.Unmarshal(raw, rf); err != nil {
			c.fail("refund %s does not decode: %v", key, err)
			return true, nil
		}
		if rf.ID != key {
			c.fail("refund %s is stored under %s", rf.ID, key)
		}
		if byReceipt[rf.Receipt] == nil {
			order = append(order, rf.Receipt)
		}
		byReceipt[rf.Receipt] = append(byReceipt[rf.Receipt], rf)
		return true, nil
	})
	if err != nil {
		return err
	}
	n := 0
	for _, id := range order {
		rs := byReceipt[id]
		r, err := v.tx.Receipt(id)
		if errors.Is(err, holon.ErrNotFound) {
			c.fail("%d refunds of receipt %s, which does not exist", len(rs), id)
			continue
		}
		if err != nil {
			return err
		}
		refunded := holon.Refunded(rs)
		v.refunded[id] = refunded
		if !r.Billed || refunded > r.Cost.Own {
			c.fail("receipt %s (billed %v, cost.own %s) has %s refunded", id, r.Billed, r.Cost.Own, refunded)
		}
		for i, rf := range rs {
			n++
			key := holon.RefundEntryKey(id, i+1)
			if rf.ID != holon.RefundKey(id, i+1) || rf.Entry != key {
				c.fail("refund %s of %s is not its refund number %d (entry %s)", rf.ID, id, i+1, rf.Entry)
			}
			row, err := v.tx.EntryByKey(key)
			if errors.Is(err, holon.ErrNotFound) {
				c.fail("refund %s has no journal entry %s", rf.ID, key)
				continue
			}
			if err != nil {
				return err
			}
			want := map[string]journal.Amount{r.Payer: rf.Amount}
			var parts journal.Amount
			for _, p := range rf.Parts {
				want[p.To] -= p.Amount
				parts += p.Amount
			}
			got := map[string]journal.Amount{}
			for _, l := range row.Lines {
				got[l.Account] += l.Amount
			}
			maps.DeleteFunc(want, func(_ string, a journal.Amount) bool { return a == 0 })
			if parts != rf.Amount || !maps.Equal(got, want) {
				c.fail("refund %s of %s: its entry moves %v, its parts (summing to %s) say %v", rf.ID, rf.Amount, got, parts, want)
			}
			// What the accounts gave back, for the earnings check.
			from := v.refundedFrom[id]
			if from == nil {
				from = map[string]journal.Amount{}
				v.refundedFrom[id] = from
			}
			for acct, a := range got {
				if acct == r.Payer {
					a -= rf.Amount // the payer's credit, netted with its own part
				}
				if a != 0 {
					from[acct] += a
				}
			}
		}
		// Off the budgets that paid for the call.
		for cur := r; cur != nil; {
			v.spent[cur.Mandate] -= refunded
			if cur.Parent == nil {
				break
			}
			p, err := v.tx.Receipt(*cur.Parent)
			if err != nil || p.Payer != cur.Payer {
				break
			}
			cur = p
		}
	}
	if int64(n) != v.refundRows {
		c.fail("%d refunds recorded, %d refund entries in the journal", n, v.refundRows)
	}
	c.Covered += fmt.Sprintf("; %d refunds against their entries", n)
	return nil
}

// isRefundKey reports whether a journal key is a refund's.
func isRefundKey(key string) bool { return strings.HasPrefix(key, "refund:") }
