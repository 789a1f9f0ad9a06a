package v0

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/idempotency"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

// callBody is POST /v0/calls.
type callBody struct {
	Mandate    string          `json:"mandate"`
	Agent      string          `json:"agent,omitempty"`
	Capability string          `json:"capability,omitempty"`
	Input      json.RawMessage `json:"input"`
	MaxCost    *journal.Amount `json:"max_cost,omitempty"`
	Approval   string          `json:"approval,omitempty"`
}

// request is the body as its Idempotency-Key binds it.
func (b *callBody) request() idempotency.CallRequest {
	r := idempotency.CallRequest{Mandate: b.Mandate, Agent: b.Agent, Capability: b.Capability, Input: b.Input, Approval: b.Approval}
	if b.MaxCost != nil {
		r.MaxCost = b.MaxCost.String()
	}
	return r
}

// answerBufs recycles callJSON's buffers (the ResponseWriter copies what
// it is given).
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// callJSON writes a call's answer: by hand for most (wire.CallAnswer's
// AppendJSON), the same bytes as web.JSON writes.
func callJSON(w http.ResponseWriter, status int, ans wire.CallAnswer) {
	buf := answerBufs.Get().(*[]byte)
	defer answerBufs.Put(buf)
	b, ok := ans.AppendJSON((*buf)[:0])
	if !ok {
		web.JSON(w, status, ans)
		return
	}
	if cap(b) <= 64<<10 {
		*buf = b // kept for the next answer, unless an output made it large
	}
	web.JSONBytes(w, status, b)
}

func answer(res *gateway.CallResult) (int, wire.CallAnswer) {
	ans := wire.CallAnswer{Output: res.Output, Receipt: res.Receipt, Approval: res.Approval, Alerts: res.Alerts}
	if ans.Output == nil {
		ans.Output = json.RawMessage("null")
	}
	if ans.Approval != nil {
		ans.Approval = redactApproval(ans.Approval)
	}
	if r := res.Receipt; r.Error != nil {
		ans.Error = &holon.Error{Code: *r.Error, Msg: res.Message}
	}
	return web.ReceiptStatus(res.Receipt), ans
}

// callMandate is the mandate a principal's call runs under. An agent key
// acts under its own mandate only ("with an agent key, the mandate is the
// key's"): naming another one is a 404, like any mandate out of scope. A
// human key calls under the root mandates of its account.
func (a *API) callMandate(p *auth.Principal, named string) (string, error) {
	switch p.Kind {
	case auth.KindDev:
		return named, nil
	case token.KindAgent:
		if named != "" && named != p.Mandate {
			return "", web.NotFound("no mandate %s (this agent key acts under %s only; leave mandate out)", named, p.Mandate)
		}
		return p.Mandate, nil
	}
	if named == "" {
		return "", holon.Errorf(holon.CodeInvalidRequest, "mandate is required: the id of one of your mandates, such as %s/sandbox", p.Account)
	}
	if !p.SeesMandate(named) {
		return "", web.NotFound("no mandate %s", named)
	}
	st, err := a.cfg.Engine.Mandate(named)
	if err != nil {
		return "", err
	}
	if st.Mandate.Parent != "" {
		return "", holon.Errorf(holon.CodeInvalidRequest, "%s is a sub-mandate derived for an agent's run: only that run calls under it", named)
	}
	return named, nil
}

func (a *API) postCall(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	var body callBody
	if err := web.DecodeBody(r, &body); err != nil {
		a.fail(w, r, err)
		return
	}
	if (body.Agent == "") == (body.Capability == "") {
		a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "name exactly one of agent and capability"))
		return
	}
	mandate, err := a.callMandate(p, body.Mandate)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	body.Mandate = mandate
	if body.Approval != "" && p.Kind != auth.KindDev {
		// An approval out of scope is as unknown as one that never was.
		if _, err := a.approval(r, body.Approval, p); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	in := gateway.CallInput{
		Mandate: body.Mandate, Agent: body.Agent, Capability: body.Capability,
		Input: body.Input, MaxCost: body.MaxCost, Approval: body.Approval,
	}
	if p.Kind == token.KindHuman {
		in.Caller = p.Account
	}
	if p.Key != nil {
		in.Key = p.Key.Prefix
	}
	idemKey := r.Header.Get("Idempotency-Key")
	if idemKey == "" {
		res, err := a.cfg.Engine.Call(r.Context(), in)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		status, ans := answer(res)
		callJSON(w, status, ans)
		return
	}
	claim, err := a.cfg.Idem.Claim(p.Scope(), idemKey, body.request())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	in.Claim = claim
	finished := false
	defer func() {
		if !finished { // the gateway failed (or panicked) without a receipt to show
			claim.Abandon(r.Context())
		}
	}()
	res, err := a.cfg.Engine.Call(r.Context(), in)
	var replay *idempotency.ReplayError
	switch {
	case errors.As(err, &replay):
		finished = true
		a.replay(w, r, &replay.Rec)
		return
	case err != nil:
		a.fail(w, r, err)
		return
	}
	finished = true
	status, ans := answer(res)
	callJSON(w, status, ans)
}

// replay answers a call re-sent with a used Idempotency-Key: the original
// status and receipt, output null (outputs are never stored).
func (a *API) replay(w http.ResponseWriter, r *http.Request, rec *idempotency.Record) {
	rc, err := a.cfg.Engine.Receipt(rec.Receipt)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ans := wire.CallAnswer{Output: json.RawMessage("null"), Receipt: rc, Replayed: true}
	if rc.Error != nil {
		ans.Error = &holon.Error{Code: *rc.Error, Msg: "replayed: the original call ended with " + *rc.Error}
	}
	if rc.Status == holon.StatusPendingApproval && rc.Approval != nil {
		if ap, err := a.cfg.Engine.Approval(r.Context(), *rc.Approval); err == nil {
			ans.Approval = redactApproval(ap)
		}
	}
	web.JSON(w, rec.Status, ans)
}

// redactApproval copies an approval for the wire. The input stays: the
// human approving must see what they approve.
func redactApproval(ap *holon.Approval) *holon.Approval {
	c := *ap
	return &c
}
