package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// RefundInput asks to give back part or all of a billed call's charge.
type RefundInput struct {
	// Receipt is the billed call's receipt id.
	Receipt string
	// Amount is what to give back; nil for the rest of the charge.
	Amount *journal.Amount
	// Reason says why, in the refunder's words (kept with the refund).
	Reason string
	// Author, when set, is the account refunding as the agent's author: it
	// may refund only calls to its own agents (any other receipt is
	// not_found). Empty: the operator.
	Author string
}

// maxReasonBytes bounds a refund's reason.
const maxReasonBytes = 500

// Refund gives back part or all of a billed call's own charge (cost.own)
// to its payer, in one transaction: a new journal entry,
// refund:<receipt>:<n>, in which each account of the call's split gives
// back its part in proportion (journal.RefundTaken), exact to the
// micro-unit, never touching the settle entry; the mandate's spent (and
// that of every mandate whose budget paid for the call, with the window
// that paid) goes down by the amount; the versions' earnings follow, the
// version's record bills the amount less, and a call refunded in full is
// no longer one of its author's paid calls. The
// refusals: not_found (no such receipt, or not one of the author's
// agents), receipt_not_billed, refund_exceeds_receipt (more than is left,
// or nothing left), insufficient_funds (an account of the split cannot
// give back its part from what it has available).
func (e *Engine) Refund(ctx context.Context, in RefundInput) (*holon.Refund, error) {
	if len(in.Reason) > maxReasonBytes {
		return nil, holon.Errorf(holon.CodeInvalidRequest, "reason: at most %d bytes", maxReasonBytes)
	}
	if in.Amount != nil && *in.Amount <= 0 {
		return nil, holon.Errorf(holon.CodeInvalidRequest, "amount: want more than 0, or leave it out to refund the rest")
	}
	var out *holon.Refund
	err := e.store.Update(ctx, func(tx holon.Tx) error {
		var err error
		out, err = e.refundTx(tx, in)
		return err
	})
	if err != nil {
		if errors.Is(err, holon.ErrBroken) {
			e.fail(err)
		}
		return nil, err
	}
	return out, nil
}

func (e *Engine) refundTx(tx holon.Tx, in RefundInput) (*holon.Refund, error) {
	notFound := holon.Errorf(holon.CodeNotFound, "no receipt %s", in.Receipt)
	r, err := tx.Receipt(in.Receipt)
	if errors.Is(err, holon.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	if in.Author != "" && (r.Agent == nil || !strings.HasPrefix(*r.Agent, in.Author+"/")) {
		return nil, notFound
	}
	if !r.Billed || r.Cost.Own <= 0 || !tx.HasEntry("settle:"+r.ID) {
		return nil, holon.Errorf(holon.CodeReceiptNotBilled, "%s was not billed (status %s, cost.own %s): there is nothing to give back", r.ID, r.Status, r.Cost.Own)
	}
	prior, err := holon.Refunds(tx, r.ID)
	if err != nil {
		return nil, err
	}
	before := holon.Refunded(prior)
	left := r.Cost.Own - before
	amount := left
	if in.Amount != nil {
		amount = *in.Amount
	}
	switch {
	case left <= 0:
		return nil, holon.Errorf(holon.CodeRefundTooLarge, "%s is refunded in full already (%s %s)", r.ID, before, r.Currency)
	case amount > left:
		return nil, holon.Errorf(holon.CodeRefundTooLarge, "%s has %s %s left to refund of its %s, less than %s", r.ID, left, r.Currency, r.Cost.Own, amount)
	}
	v, ok := e.registry.Get(*r.Agent)
	if !ok {
		return nil, holon.Errorf(holon.CodeGatewayError, "%s: its agent %s is not in the registry", r.ID, *r.Agent)
	}
	// The levels of the split (fee, creator, each upstream) as the
	// settlement computed them: the receipt's splits are these, merged.
	levels, err := journal.SplitLevels(r.Cost.Own, v.Manifest.NS(), v.Chain)
	if err != nil {
		return nil, err
	}
	n := len(prior) + 1
	entry, parts, err := journal.Refund(holon.RefundEntryKey(r.ID, n), r.Payer, levels, before, amount)
	if errors.Is(err, journal.ErrRefundMovesNothing) {
		return nil, holon.Errorf(holon.CodeInvalidRequest, "amount: %s of %s would come all from %s's own royalties on its call, and move no money: refund more", amount, r.ID, r.Payer)
	}
	if err != nil {
		return nil, holon.Errorf(holon.CodeReceiptNotBilled, "%s: %v", r.ID, err)
	}
	for _, l := range entry.Lines {
		if l.Amount >= 0 {
			continue
		}
		a, err := tx.Account(l.Account)
		if err != nil {
			return nil, err
		}
		if a.Available() < -l.Amount {
			return nil, holon.Errorf(holon.CodeInsufficientFunds, "%s has %s %s available and would give back %s", l.Account, a.Available(), r.Currency, -l.Amount)
		}
	}
	if err := tx.PostEntry(entry); err != nil {
		return nil, err
	}
	if err := e.unspend(tx, r, amount); err != nil {
		return nil, err
	}
	// The versions' earnings follow the levels (countSettled's, reversed),
	// and a call refunded in full is no longer a paid call.
	if len(levels) != len(v.ChainRefs)+2 {
		return nil, fmt.Errorf("refund %s: %d split levels for a lineage of %d", r.ID, len(levels), len(v.ChainRefs))
	}
	var unpaid int64
	if before+amount == r.Cost.Own {
		unpaid = -1
	}
	if parts[1] > 0 || unpaid != 0 {
		if err := tx.AddEarnings(v.Manifest.Ref(), r.Currency, unpaid, -parts[1], 0); err != nil {
			return nil, err
		}
	}
	for i, up := range v.ChainRefs {
		if parts[i+2] > 0 {
			if err := tx.AddEarnings(up, r.Currency, 0, 0, -parts[i+2]); err != nil {
				return nil, err
			}
		}
	}
	// The version's record bills what its runs billed, less their refunds.
	if err := tx.RefundRecord(v.Manifest.Ref(), amount); err != nil {
		return nil, err
	}
	now := e.now().UTC()
	if err := e.refundRollups(tx, r, v, levels, parts, amount, now); err != nil {
		return nil, err
	}
	by := in.Author
	if by == "" {
		by = "operator"
	}
	ref := &holon.Refund{ID: holon.RefundKey(r.ID, n), Receipt: r.ID, Amount: amount, Reason: in.Reason, By: by,
		Entry: entry.Key, Parts: []journal.Share{}, Created: now}
	for i, l := range levels {
		if parts[i] == 0 {
			continue
		}
		if j := shareOf(ref.Parts, l.To); j >= 0 {
			ref.Parts[j].Amount += parts[i]
		} else {
			ref.Parts = append(ref.Parts, journal.Share{To: l.To, Amount: parts[i]})
		}
	}
	if err := tx.Put(holon.BucketRefunds, ref.ID, ref); err != nil {
		return nil, err
	}
	return ref, nil
}

func shareOf(shares []journal.Share, account string) int {
	for i, s := range shares {
		if s.To == account {
			return i
		}
	}
	return -1
}

// unspend takes a refund off the budgets that paid for the call: its
// mandate's and, up the tree while the same payer paid (passthrough),
// each parent's mandate, whose spent counted the call as downstream; in
// each mandate that renews by window, off the window its call was
// reserved in (at most what that window spent: a mandate whose windows
// were changed since keeps its history).
func (e *Engine) unspend(tx holon.Tx, r *holon.Receipt, amount journal.Amount) error {
	for cur := r; cur != nil; {
		if err := tx.AddBudget(cur.Mandate, -amount, 0); err != nil {
			return fmt.Errorf("refund %s: %w", r.ID, err)
		}
		if m, err := e.loadMandate(tx, cur.Mandate); err == nil {
			if w, ok := m.WindowAt(cur.Created); ok {
				b, err := tx.WindowBudget(cur.Mandate, w.Key)
				if err != nil {
					return err
				}
				if back := journal.Min(amount, b.Spent); back > 0 {
					if err := tx.AddWindowBudget(cur.Mandate, w.Key, -back, 0); err != nil {
						return err
					}
				}
			}
		} else if !errors.Is(err, holon.ErrNotFound) {
			var he *holon.Error
			if !errors.As(err, &he) || he.Code != holon.CodeInvalidMandate {
				return err
			}
		}
		if cur.Parent == nil {
			return nil
		}
		p, err := tx.Receipt(*cur.Parent)
		if err != nil {
			return fmt.Errorf("refund %s: parent %s: %w", r.ID, *cur.Parent, err)
		}
		// A parent's budget paid for the children its payer paid
		// (passthrough): they are in its cost.downstream.
		if p.Payer != cur.Payer {
			return nil
		}
		cur = p
	}
	return nil
}

// Refunds lists a receipt's refunds, oldest first.
func (e *Engine) Refunds(receipt string) ([]*holon.Refund, error) {
	var out []*holon.Refund
	err := e.store.View(func(tx holon.Tx) error {
		var err error
		out, err = holon.Refunds(tx, receipt)
		return err
	})
	return out, err
}
