package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// The rollups the spend and earnings reports answer from
// (holon.RollupsTx), kept in the transactions of the settlements and
// refunds they count.

// VersionShare is what one version earned of a settlement's split (or gave
// back of a refund): its creator share (Own), or a royalty.
type VersionShare struct {
	Ref    string
	Amount journal.Amount
	Own    bool
}

// CallRollup names the rows a call counts in: its payer's mandate at the
// root of the calls that payer paid (Root), and the prefix of the API key
// that made it (Key, "" when none is known).
type CallRollup struct {
	Root, Key string
}

// AddSettlementRollups counts a settled call that moved money in the
// rollups, on the UTC day the call was made: its own charge (cost.own) in
// its payer's spend by day, mandate (c.Root), agent and key, and each
// version's share in its author's earnings. The settlement calls it in
// its own transaction; the bench builds big stores through it.
func AddSettlementRollups(tx holon.RollupsTx, r *holon.Receipt, c CallRollup, shares []VersionShare) error {
	day := holon.DayOf(r.Created)
	if err := addSpend(tx, r, c, day, holon.Tally{Calls: 1, Amount: r.Cost.Own}); err != nil {
		return err
	}
	for _, s := range shares {
		t := holon.Tally{Amount: s.Amount}
		if s.Own {
			t.Calls = 1
		}
		if err := addEarned(tx, s.Ref, r.Currency, day, t); err != nil {
			return err
		}
	}
	return nil
}

// addRefundRollups counts a refund on the UTC day it is made: refunded in
// the payer's spend by day, mandate and agent (a receipt does not keep
// the key that made its call: by key, a report shows what was charged),
// and in each version's earnings what it gave back.
func addRefundRollups(tx holon.RollupsTx, r *holon.Receipt, root string, day holon.Day, amount journal.Amount, shares []VersionShare) error {
	if err := addSpend(tx, r, CallRollup{Root: root}, day, holon.Tally{Refunded: amount}); err != nil {
		return err
	}
	for _, s := range shares {
		if s.Amount > 0 {
			if err := addEarned(tx, s.Ref, r.Currency, day, holon.Tally{Refunded: s.Amount}); err != nil {
				return err
			}
		}
	}
	return nil
}

func addSpend(tx holon.RollupsTx, r *holon.Receipt, c CallRollup, day holon.Day, t holon.Tally) error {
	agent := ""
	if r.Agent != nil {
		agent = *r.Agent
	}
	dims := []struct {
		dim   byte
		value string
	}{{holon.ByDay, ""}, {holon.ByMandate, c.Root}, {holon.ByAgent, agent}, {holon.ByKey, c.Key}}
	for _, d := range dims {
		if d.dim == holon.ByKey && t.Calls == 0 {
			continue // refunds are not broken down by key
		}
		k := holon.RollupKey{Kind: holon.RollupSpend, Owner: r.Payer, Dim: d.dim, Day: day, Value: d.value}
		if err := tx.AddRollup(k, r.Currency, t); err != nil {
			return err
		}
	}
	return nil
}

func addEarned(tx holon.RollupsTx, ref, currency string, day holon.Day, t holon.Tally) error {
	author, _, _ := strings.Cut(ref, "/")
	return tx.AddRollup(holon.RollupKey{Kind: holon.RollupEarnings, Owner: author, Dim: holon.ByVersion, Day: day, Value: ref}, currency, t)
}

// versionShares pairs a split's levels (the fee, the creator, each
// upstream: journal.SplitLevels) with the versions that earn them.
func versionShares(v *AgentVersion, levels []journal.Share) ([]VersionShare, error) {
	if len(levels) != len(v.ChainRefs)+2 {
		return nil, fmt.Errorf("earnings of %s: %d split levels for a lineage of %d", v.Manifest.Ref(), len(levels), len(v.ChainRefs))
	}
	out := []VersionShare{{Ref: v.Manifest.Ref(), Amount: levels[1].Amount, Own: true}}
	for i, up := range v.ChainRefs {
		if a := levels[i+2].Amount; a > 0 {
			out = append(out, VersionShare{Ref: up, Amount: a})
		}
	}
	return out, nil
}

// rootMandate is the mandate a receipt's spend counts under: its own, or
// up the tree, while the same payer paid, its parent's.
func rootMandate(tx holon.Tx, r *holon.Receipt) (string, error) {
	for cur := r; ; {
		if cur.Parent == nil {
			return cur.Mandate, nil
		}
		p, err := tx.Receipt(*cur.Parent)
		if err != nil {
			return "", fmt.Errorf("parent %s of %s: %w", *cur.Parent, cur.ID, err)
		}
		if p.Payer != cur.Payer {
			return cur.Mandate, nil
		}
		cur = p
	}
}

// RebuildRollups makes the rollups count every receipt and refund of a
// store written before they were kept (or restored from a backup, which
// leaves them out): in one transaction, unless they are kept already. A
// receipt does not keep the key that made its call: rebuilt, its spend
// counts under no key. The gateway runs it as it starts, before it
// serves.
func (e *Engine) RebuildRollups(ctx context.Context) (rebuilt bool, err error) {
	var kept bool
	if err := e.store.View(func(tx holon.Tx) error { kept = tx.RollupsKept(); return nil }); err != nil || kept {
		return false, err
	}
	err = e.store.Update(ctx, func(tx holon.Tx) error {
		rebuilt = false
		if tx.RollupsKept() {
			return nil
		}
		if err := tx.ClearRollups(); err != nil {
			return err
		}
		if err := e.rebuildRollups(tx); err != nil {
			return err
		}
		rebuilt = true
		return tx.MarkRollupsKept()
	})
	return rebuilt, err
}

func (e *Engine) rebuildRollups(tx holon.Tx) error {
	for before := ""; ; {
		page, err := tx.Receipts("", before, 1000)
		if err != nil {
			return err
		}
		for _, r := range page.Receipts {
			if err := e.rebuildReceipt(tx, r); err != nil {
				return fmt.Errorf("rollups of %s: %w", r.ID, err)
			}
		}
		if page.Next == "" {
			return nil
		}
		before = page.Next
	}
}

func (e *Engine) rebuildReceipt(tx holon.Tx, r *holon.Receipt) error {
	if !r.Billed || r.Cost.Own <= 0 || r.Agent == nil || !tx.HasEntry("settle:"+r.ID) {
		return nil
	}
	root, err := rootMandate(tx, r)
	if err != nil {
		return err
	}
	v, known := e.registry.Get(*r.Agent)
	if !known {
		// A version no longer in the registry: its payer's spend is
		// known, not its lineage's shares.
		e.log.Warn("rollups: the agent of a billed receipt is not in the registry; its earnings are left out", "receipt", r.ID, "agent", *r.Agent)
	}
	var levels []journal.Share
	var shares []VersionShare
	if known {
		if levels, err = journal.SplitLevels(r.Cost.Own, v.Manifest.NS(), v.Chain); err != nil {
			return err
		}
		if shares, err = versionShares(v, levels); err != nil {
			return err
		}
	}
	if err := AddSettlementRollups(tx, r, CallRollup{Root: root}, shares); err != nil {
		return err
	}
	refunds, err := holon.Refunds(tx, r.ID)
	if err != nil {
		return err
	}
	before := journal.Amount(0)
	for _, f := range refunds {
		var back []VersionShare
		if known {
			_, parts, err := journal.Refund(f.Entry, r.Payer, levels, before, f.Amount)
			if err != nil {
				return err
			}
			if back, err = partShares(v, levels, parts); err != nil {
				return err
			}
		}
		if err := addRefundRollups(tx, r, root, holon.DayOf(f.Created), f.Amount, back); err != nil {
			return err
		}
		before += f.Amount
	}
	return nil
}

// refundRollups counts a refund in the rollups (refundTx): parts are what
// each level of the split gave back.
func (e *Engine) refundRollups(tx holon.Tx, r *holon.Receipt, v *AgentVersion, levels []journal.Share, parts []journal.Amount, amount journal.Amount, now time.Time) error {
	root, err := rootMandate(tx, r)
	if err != nil {
		return err
	}
	shares, err := partShares(v, levels, parts)
	if err != nil {
		return err
	}
	return addRefundRollups(tx, r, root, holon.DayOf(now), amount, shares)
}

// partShares is versionShares of what each level gave back of a refund.
func partShares(v *AgentVersion, levels []journal.Share, parts []journal.Amount) ([]VersionShare, error) {
	back := slices.Clone(levels)
	for i := range back {
		back[i].Amount = parts[i]
	}
	return versionShares(v, back)
}
