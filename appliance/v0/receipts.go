package v0

import (
	"net/http"
	"sort"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

func (a *API) listReceipts(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	q := r.URL.Query()
	limit, err := web.Limit(r, 50, 500)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	mandate, before := q.Get("mandate"), q.Get("before")
	if before != "" {
		if _, ok := holon.ReceiptSeq(before); !ok {
			a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "before must be a receipt id such as r42"))
			return
		}
	}
	filter, err := parseReceiptFilter(q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var fetch func(before string, limit int) (holon.ReceiptPage, error)
	switch {
	case mandate != "" && !p.SeesMandate(mandate):
		a.fail(w, r, web.NotFound("no mandate %s", mandate))
		return
	case mandate != "" || p.Kind == auth.KindDev:
		fetch = func(before string, limit int) (holon.ReceiptPage, error) {
			return a.cfg.Engine.Receipts(mandate, before, limit)
		}
	case p.Kind == token.KindAgent:
		fetch = func(before string, limit int) (holon.ReceiptPage, error) {
			return a.cfg.Engine.Receipts(p.Mandate, before, limit)
		}
	default:
		roots, err := a.cfg.Mandates(p.Account)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		fetch = func(before string, limit int) (holon.ReceiptPage, error) { return a.receiptsOf(roots, before, limit) }
	}
	var page wire.ReceiptPage
	if filter.empty() {
		var kp holon.ReceiptPage
		kp, err = fetch(before, limit)
		page = wire.ReceiptPage{Receipts: kp.Receipts, Next: kp.Next}
	} else {
		page, err = filteredReceipts(a.cfg.Engine, filter, before, limit, fetch)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if page.Receipts == nil {
		page.Receipts = []*holon.Receipt{}
	}
	web.JSON(w, http.StatusOK, page)
}

// receiptsOf pages the receipts of several mandates together, newest first:
// each mandate's own index gives its newest page, and the pages merge.
func (a *API) receiptsOf(mandates []string, before string, limit int) (holon.ReceiptPage, error) {
	var all []*holon.Receipt
	more := false // some mandate has receipts older than its page
	for _, m := range mandates {
		p, err := a.cfg.Engine.Receipts(m, before, limit)
		if err != nil {
			return holon.ReceiptPage{}, err
		}
		all = append(all, p.Receipts...)
		more = more || p.Next != ""
	}
	sort.Slice(all, func(i, j int) bool {
		si, _ := holon.ReceiptSeq(all[i].ID)
		sj, _ := holon.ReceiptSeq(all[j].ID)
		return si > sj
	})
	var page holon.ReceiptPage
	// A mandate with receipts older than its page means a next page, even
	// when the merged page does not overflow.
	if more || len(all) > limit {
		all = all[:min(limit, len(all))]
		page.Next = all[len(all)-1].ID
	}
	page.Receipts = all
	return page, nil
}

func (a *API) getReceipt(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	id := ps.ByName("id")
	rc, err := a.cfg.Engine.Receipt(id)
	if err == nil && !p.SeesMandate(rc.Mandate) {
		err = web.NotFound("no receipt %s", id)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	t, err := wire.Tree(a.cfg.Engine, id)
	if err == nil {
		t.Refunds, err = a.cfg.Engine.Refunds(id)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, t)
}

// refundBody is POST /v0/receipts/{id}/refunds: an amount (none: the rest
// of the charge) and a reason.
type refundBody struct {
	Amount *journal.Amount `json:"amount,omitempty"`
	Reason string          `json:"reason,omitempty"`
}

// postRefund is POST /v0/receipts/{id}/refunds: the author of the call's
// agent (human key) or the operator gives back part or all of a billed
// call's charge. Another author's receipt is not found, as anyone else's.
func (a *API) postRefund(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	b, err := web.ReadBody(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var body refundBody
	if len(b) > 0 {
		if err := gateway.DecodeJSON(b, &body, "body"); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	in := gateway.RefundInput{Receipt: ps.ByName("id"), Amount: body.Amount, Reason: body.Reason}
	if p.Kind == auth.KindHuman {
		in.Author = p.Account
	}
	rf, err := a.cfg.Engine.Refund(r.Context(), in)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	all, err := a.cfg.Engine.Refunds(rf.Receipt)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusCreated, map[string]any{"refund": rf, "refunds": all, "refunded": holon.Refunded(all)})
}
