package v0

import (
	"net/http"
	"slices"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
)

// listApprovals is GET /v0/approvals?mandate=&status=&before=&limit=: the
// approvals of the mandates the principal sees, newest first, read from
// those mandates' index (a human's are its account's mandates, as for
// receipts), and next, the cursor of the following page.
func (a *API) listApprovals(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	q := r.URL.Query()
	mandate, status, before := q.Get("mandate"), q.Get("status"), q.Get("before")
	limit, err := web.Limit(r, wire.ApprovalsPage, wire.ApprovalsPage)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var page holon.ApprovalPage
	switch {
	case mandate != "" && !p.SeesMandate(mandate):
		a.fail(w, r, web.NotFound("no mandate %s", mandate))
		return
	case mandate != "":
		page, err = a.cfg.Engine.ApprovalsOf([]string{mandate}, status, before, limit)
	case p.Kind == auth.KindDev:
		page, err = a.cfg.Engine.AllApprovals(status, before, limit)
	case p.Kind == token.KindAgent:
		// Only calls under the key's own mandate are held for approval,
		// never a delegated call under one derived from it.
		page, err = a.cfg.Engine.ApprovalsOf([]string{p.Mandate}, status, before, limit)
	default:
		var roots []string
		if roots, err = a.cfg.Mandates(p.Account); err == nil {
			roots = slices.DeleteFunc(roots, func(m string) bool { return !p.SeesMandate(m) })
			page, err = a.cfg.Engine.ApprovalsOf(roots, status, before, limit)
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, page)
}

// approval reads an approval within the principal's scope.
func (a *API) approval(r *http.Request, id string, p *auth.Principal) (*holon.Approval, error) {
	ap, err := a.cfg.Engine.Approval(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if !p.SeesMandate(ap.Mandate) {
		return nil, web.NotFound("no approval %s", id)
	}
	return ap, nil
}

func (a *API) getApproval(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	ap, err := a.approval(r, ps.ByName("id"), p)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, redactApproval(ap))
}

// decisionBody is POST /v0/approvals/{id}: {} approves and runs,
// {"run": false} grants, {"decision": "reject"} rejects.
type decisionBody struct {
	Decision string `json:"decision,omitempty"`
	Run      *bool  `json:"run,omitempty"`
}

func (a *API) decideApproval(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	var body decisionBody
	if err := web.DecodeBody(r, &body); err != nil {
		a.fail(w, r, err)
		return
	}
	var d gateway.ApprovalDecision
	switch body.Decision {
	case "", "approve":
		d.NoRun = body.Run != nil && !*body.Run
	case "reject":
		if body.Run != nil {
			a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "run goes with an approval, not with a rejection"))
			return
		}
		d.Reject = true
	default:
		a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "decision %q is not approve or reject", body.Decision))
		return
	}
	if _, err := a.approval(r, ps.ByName("id"), p); err != nil {
		a.fail(w, r, err)
		return
	}
	ap, res, err := a.cfg.Engine.Decide(r.Context(), ps.ByName("id"), d)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if res == nil {
		web.JSON(w, http.StatusOK, map[string]any{"approval": redactApproval(ap)})
		return
	}
	status, ans := answer(res)
	ans.Approval = redactApproval(ap)
	callJSON(w, status, ans)
}
