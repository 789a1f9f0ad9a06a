package webui

import (
	"net/http"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// refundedPage is a refund just made, with the receipt's refunds.
type refundedPage struct {
	Receipt  string
	Refund   holon.Refund
	Refunds  []*holon.Refund
	Refunded journal.Amount
	// Back is where the page leads next: the receipt, when the viewer may
	// read it (the payer, or an author refunding its own call), else the
	// page the form was on (the authors' or the operator's).
	Back, BackText string
}

// routeRefunds registers the refund form's action.
func (c *Console) routeRefunds() {
	c.mux.Handle("POST "+Prefix+"/refunds", c.page(c.refundCreate))
}

// refundCreate gives back part or all of a billed call (POST
// /v0/receipts/{id}/refunds): its author's (from the receipt page or the
// authors' page) or any, for the operator. The API decides who may.
func (c *Console) refundCreate(w http.ResponseWriter, r *http.Request, v Viewer) {
	id := strings.TrimSpace(r.PostFormValue("receipt"))
	if id == "" {
		c.render(w, r, v, http.StatusBadRequest, "error", errorPage{Title: "Bad Request", Message: "Name the receipt to refund, such as r42."})
		return
	}
	body := map[string]any{"reason": strings.TrimSpace(r.PostFormValue("reason"))}
	if a := strings.TrimSpace(r.PostFormValue("amount")); a != "" {
		body["amount"] = a
	}
	var p refundedPage
	if err := c.b.Do(r, "POST", apiPath("/v0/receipts", id, "refunds"), body, &p); err != nil {
		c.fail(w, r, v, err)
		return
	}
	p.Receipt = id
	switch {
	case v.Operator():
		p.Back, p.BackText = Prefix+"/operator", "Back to the operator's page"
	case c.b.Do(r, "GET", apiPath("/v0/receipts", id), nil, nil) == nil:
		p.Back, p.BackText = Prefix+"/receipts/"+id, "Back to the receipt"
	default:
		// An author refunding another account's call: its receipt is the
		// payer's to read.
		p.Back, p.BackText = Prefix+"/authors", "Back to your agents"
	}
	c.render(w, r, v, http.StatusCreated, "refunded", p)
}

// canRefund reports whether the receipt page offers v its refund form: a
// billed receipt with something left to refund, to its agent's author
// (or anyone on a dev gateway, where the console acts as the operator).
func canRefund(v Viewer, rc *holon.Receipt, refunds []*holon.Refund) bool {
	if rc == nil || !rc.Billed || rc.Agent == nil || holon.Refunded(refunds) >= rc.Cost.Own {
		return false
	}
	return v.Kind == ViewerDev || v.Kind == ViewerHuman && strings.HasPrefix(*rc.Agent, v.Account+"/")
}
