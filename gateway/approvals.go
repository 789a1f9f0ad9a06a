package gateway

import (
	"context"
	"errors"
	"fmt"

	"holon.dev/holon"
	"holon.dev/holon/gateway/canonical"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// newApproval creates the pending approval of a held call, bound to the
// mandate, the exact version, the input's canonical hash and max_cost. It
// keeps the input (validated already) until the approval is used,
// rejected or expires.
func (e *Engine) newApproval(tx holon.Tx, r *holon.Receipt, m *contract.Mandate, a *contract.Manifest, sp callSpec, worst journal.Amount) (*holon.Approval, error) {
	hash, err := canonical.Hash(sp.input)
	if err != nil {
		return nil, err
	}
	id, err := tx.NewApprovalID()
	if err != nil {
		return nil, err
	}
	now := e.now().UTC()
	ap := &holon.Approval{
		ID: id, Mandate: m.ID, Caller: r.Caller, Agent: a.Ref(), Capability: sp.capability, InputHash: hash,
		MaxCost: sp.maxCost, WorstCase: worst, Currency: m.Currency, Receipt: r.ID,
		Status: holon.ApprovalPending, Created: now, Expires: now.Add(ApprovalTTL),
		Input: append([]byte(nil), sp.input...),
	}
	return ap, tx.PutApproval(ap)
}

// bindApproval checks that the approval a call names lets exactly this call
// through. It returns the approval, or the refusal's code and message.
func (e *Engine) bindApproval(tx holon.Tx, sp callSpec, m *contract.Mandate, a *contract.Manifest) (*holon.Approval, string, string) {
	ap, err := tx.Approval(sp.approval)
	if err != nil {
		return nil, holon.CodeInvalidApproval, fmt.Sprintf("no approval %s", sp.approval)
	}
	if e.expired(ap) {
		return nil, holon.CodeInvalidApproval, fmt.Sprintf("approval %s expired at %s", ap.ID, ap.Expires.Format("2006-01-02T15:04:05Z"))
	}
	switch {
	case ap.Status == holon.ApprovalGranted:
	case ap.Status == holon.ApprovalPending && sp.preApproved:
	default:
		return nil, holon.CodeInvalidApproval, fmt.Sprintf("approval %s is %s, not granted", ap.ID, ap.Status)
	}
	hash, err := canonical.Hash(sp.input)
	switch {
	case ap.Mandate != m.ID:
		return nil, holon.CodeInvalidApproval, fmt.Sprintf("approval %s is for mandate %s", ap.ID, ap.Mandate)
	case ap.Agent != a.Ref():
		return nil, holon.CodeInvalidApproval, fmt.Sprintf("approval %s is for %s, this call resolves to %s", ap.ID, ap.Agent, a.Ref())
	case err != nil || hash != ap.InputHash:
		return nil, holon.CodeInvalidApproval, fmt.Sprintf("approval %s is for another input", ap.ID)
	case !sameCap(ap.MaxCost, sp.maxCost):
		return nil, holon.CodeInvalidApproval, fmt.Sprintf("approval %s was requested with max_cost %s", ap.ID, capString(ap.MaxCost))
	}
	return ap, "", ""
}

func sameCap(a, b *journal.Amount) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func capString(a *journal.Amount) string {
	if a == nil {
		return "none"
	}
	return a.String()
}

// expired reports whether an undecided approval is past its expiry.
func (e *Engine) expired(ap *holon.Approval) bool {
	return (ap.Status == holon.ApprovalPending || ap.Status == holon.ApprovalGranted) && !e.now().Before(ap.Expires)
}

// ApprovalDecision is what POST /v0/approvals/{id} asks: approve and run
// (the default), grant without running (Run false), or reject.
type ApprovalDecision struct {
	Reject bool
	// NoRun grants the approval; the caller re-submits the call with it.
	NoRun bool
}

// Approval reads one approval, expiring it first if its time has come.
func (e *Engine) Approval(ctx context.Context, id string) (*holon.Approval, error) {
	var ap *holon.Approval
	err := e.store.View(func(tx holon.Tx) error {
		var err error
		ap, err = tx.Approval(id)
		return err
	})
	if errors.Is(err, holon.ErrNotFound) {
		return nil, holon.Errorf(holon.CodeNotFound, "no approval %s", id)
	}
	if err != nil {
		return nil, err
	}
	if e.expired(ap) {
		if err := e.expire(ctx, id); err != nil {
			return nil, err
		}
		return e.Approval(ctx, id)
	}
	return ap, nil
}

// Approvals lists approvals newest first, those keep accepts, at most
// limit. It reads every approval until it has limit: a listing uses
// ApprovalsOf.
func (e *Engine) Approvals(keep func(*holon.Approval) bool, limit int) ([]*holon.Approval, error) {
	var out []*holon.Approval
	err := e.store.View(func(tx holon.Tx) error {
		var err error
		out, err = tx.Approvals(func(a *holon.Approval) bool { return !e.expired(a) && keep(a) }, limit)
		return err
	})
	return out, err
}

// approvalScan is how many approvals one page of a listing reads at most
// (the status filter may drop most of them): past that the page ends, with
// a next cursor.
const approvalScan = 2000

// ApprovalsOf lists the approvals of mandates newest first, before the
// approval id `before` ("" for the newest), at most limit: the open ones
// (pending or granted) when status is "", every one with "all", else
// those with that status. Approvals past their expiry are left out until
// the sweep marks them expired. It reads only those mandates' approvals,
// at most approvalScan of them: Next continues the listing.
func (e *Engine) ApprovalsOf(mandates []string, status, before string, limit int) (holon.ApprovalPage, error) {
	return e.approvalPage(status, before, func(tx holon.Tx, keep func(*holon.Approval) bool) (holon.ApprovalPage, error) {
		return tx.ApprovalsOf(mandates, before, keep, limit, approvalScan)
	})
}

// AllApprovals is ApprovalsOf for every mandate (a dev gateway's listing).
func (e *Engine) AllApprovals(status, before string, limit int) (holon.ApprovalPage, error) {
	return e.approvalPage(status, before, func(tx holon.Tx, keep func(*holon.Approval) bool) (holon.ApprovalPage, error) {
		return tx.ApprovalsBefore(before, keep, limit, approvalScan)
	})
}

// approvalPage checks the status and the cursor, and runs read with the
// status filter.
func (e *Engine) approvalPage(status, before string, read func(holon.Tx, func(*holon.Approval) bool) (holon.ApprovalPage, error)) (holon.ApprovalPage, error) {
	if _, ok := holon.ApprovalSeq(before); before != "" && !ok {
		return holon.ApprovalPage{}, holon.Errorf(holon.CodeInvalidRequest, "before must be an approval id such as a42")
	}
	switch status {
	case "", "all", holon.ApprovalPending, holon.ApprovalGranted, holon.ApprovalUsed, holon.ApprovalRejected, holon.ApprovalExpired:
	default:
		// A status no approval has would read the whole store, a page of
		// nothing at a time.
		return holon.ApprovalPage{}, holon.Errorf(holon.CodeInvalidRequest, "status must be pending, granted, used, rejected, expired or all")
	}
	keep := func(a *holon.Approval) bool {
		if e.expired(a) {
			return false
		}
		switch status {
		case "":
			return a.Status == holon.ApprovalPending || a.Status == holon.ApprovalGranted
		case "all":
			return true
		}
		return a.Status == status
	}
	var page holon.ApprovalPage
	err := e.store.View(func(tx holon.Tx) (err error) {
		page, err = read(tx, keep)
		return err
	})
	if page.Approvals == nil {
		page.Approvals = []*holon.Approval{}
	}
	return page, err
}

// Decide answers a pending approval: reject it, grant it, or approve and
// run exactly the call that was held.
func (e *Engine) Decide(ctx context.Context, id string, d ApprovalDecision) (*holon.Approval, *CallResult, error) {
	ap, err := e.Approval(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if ap.Status != holon.ApprovalPending {
		return ap, nil, holon.Errorf(holon.CodeInvalidApproval, "approval %s is %s: it can be decided once", id, ap.Status)
	}
	if d.Reject || d.NoRun {
		status := holon.ApprovalGranted
		if d.Reject {
			status = holon.ApprovalRejected
		}
		err := e.store.Update(ctx, func(tx holon.Tx) error {
			ap, err = tx.Approval(id)
			if err != nil {
				return err
			}
			if ap.Status != holon.ApprovalPending {
				return holon.Errorf(holon.CodeInvalidApproval, "approval %s is %s: it can be decided once", id, ap.Status)
			}
			now := e.now().UTC()
			ap.Status, ap.Decided = status, &now
			if d.Reject {
				ap.Input = nil
			}
			return tx.PutApproval(ap)
		})
		return ap, nil, err
	}
	res, err := e.call(context.WithoutCancel(ctx), callSpec{
		mandateID:   ap.Mandate,
		caller:      ap.Caller,
		agent:       ap.Agent,
		capability:  ap.Capability,
		input:       ap.Input,
		maxCost:     ap.MaxCost,
		approval:    ap.ID,
		preApproved: true,
	})
	if err != nil {
		return ap, nil, err
	}
	ap, err = e.Approval(ctx, id)
	return ap, res, err
}

// expire marks an approval expired and forgets its input.
func (e *Engine) expire(ctx context.Context, id string) error {
	return e.store.Update(ctx, func(tx holon.Tx) error {
		ap, err := tx.Approval(id)
		if err != nil {
			return err
		}
		if !e.expired(ap) {
			return nil
		}
		ap.Status, ap.Input = holon.ApprovalExpired, nil
		return tx.PutApproval(ap)
	})
}

// ExpireApprovals expires every undecided approval past its time and
// forgets its input; a gateway runs it periodically. It returns how many
// it expired.
func (e *Engine) ExpireApprovals(ctx context.Context) (int, error) {
	var ids []string
	err := e.store.View(func(tx holon.Tx) error {
		stale, err := tx.Approvals(e.expired, 1<<30)
		for _, a := range stale {
			ids = append(ids, a.ID)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		if err := e.expire(ctx, id); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}
