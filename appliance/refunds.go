package appliance

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

// refundBody is POST /v0/receipts/{id}/refunds: an amount (none: the rest
// of the charge) and a reason.
type refundBody struct {
	Amount *journal.Amount `json:"amount,omitempty"`
	Reason string          `json:"reason,omitempty"`
}

// postRefund is POST /v0/receipts/{id}/refunds: the author of the call's
// agent (human key) or the operator gives back part or all of a billed
// call's charge. Another author's receipt is not found, as anyone else's.
func (a *api) postRefund(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
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
	rf, err := a.engine.Refund(r.Context(), in)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	all, err := a.engine.Refunds(rf.Receipt)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusCreated, map[string]any{"refund": rf, "refunds": all, "refunded": holon.Refunded(all)})
}
