package webui

import (
	"net/http"

	"holon.dev/holon"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
)

type overviewPage struct {
	Accounts  []wire.AccountView
	Mandates  []*gateway.MandateState
	Receipts  []*holon.Receipt
	Approvals []*holon.Approval
	// Claimed tells the person their GitHub sign-in took the account over
	// from an unproved email signup, and what that revoked.
	Claimed *wire.Claim
}

// overview is the first page: balance, mandates with their budgets as
// bars, recent receipts, pending approvals.
func (c *Console) overview(w http.ResponseWriter, r *http.Request, v Viewer) {
	if v.Operator() {
		http.Redirect(w, r, Prefix+"/operator", http.StatusSeeOther)
		return
	}
	var p overviewPage
	if v.Kind == ViewerHuman {
		var m wire.Me
		if err := c.b.Do(r, "GET", "/v0/me", nil, &m); err != nil {
			c.fail(w, r, v, err)
			return
		}
		if m.Balance != nil {
			p.Accounts = []wire.AccountView{*m.Balance}
		}
		p.Mandates, p.Claimed = m.Mandates, m.Claimed
	} else {
		var accts struct {
			Accounts []wire.AccountView `json:"accounts"`
		}
		var ms struct {
			Mandates []*gateway.MandateState `json:"mandates"`
		}
		if err := c.b.Do(r, "GET", "/v0/accounts", nil, &accts); err != nil {
			c.fail(w, r, v, err)
			return
		}
		if err := c.b.Do(r, "GET", "/v0/mandates", nil, &ms); err != nil {
			c.fail(w, r, v, err)
			return
		}
		p.Accounts, p.Mandates = accts.Accounts, ms.Mandates
	}
	var rp wire.ReceiptPage
	if err := c.b.Do(r, "GET", "/v0/receipts?limit=10", nil, &rp); err != nil {
		c.fail(w, r, v, err)
		return
	}
	var aps struct {
		Approvals []*holon.Approval `json:"approvals"`
	}
	if err := c.b.Do(r, "GET", "/v0/approvals?status=pending", nil, &aps); err != nil {
		c.fail(w, r, v, err)
		return
	}
	p.Receipts, p.Approvals = rp.Receipts, aps.Approvals
	c.render(w, r, v, http.StatusOK, "overview", p)
}
