package appliance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// maxRequestBody bounds a request body (a call's input included).
const maxRequestBody = 4 << 20

// api serves the HTTP API of gateway.md §5.
type api struct {
	engine *gateway.Engine
	log    *slog.Logger
}

func newAPI(e *gateway.Engine, log *slog.Logger) *api { return &api{engine: e, log: log} }

func (a *api) routes() http.Handler {
	r := httprouter.New()
	r.GET("/healthz", a.healthz)
	r.GET("/v0/agents", a.listAgents)
	r.GET("/v0/agents/:ns/:name", a.getAgent)
	r.POST("/v0/calls", a.postCall)
	r.GET("/v0/approvals", a.listApprovals)
	r.GET("/v0/approvals/:id", a.getApproval)
	r.POST("/v0/approvals/:id", a.decideApproval)
	r.GET("/v0/receipts", a.listReceipts)
	r.GET("/v0/receipts/:id", a.getReceipt)
	r.GET("/v0/mandates/:ns/:name", a.getMandate)
	r.GET("/v0/accounts", a.listAccounts)
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, gateway.Errorf(gateway.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, gateway.Errorf(gateway.CodeInvalidRequest, "%s is not allowed on %s", r.Method, r.URL.Path))
	})
	r.PanicHandler = func(w http.ResponseWriter, r *http.Request, p any) {
		a.log.Error("handler panicked", "path", r.URL.Path, "panic", fmt.Sprint(p))
		writeError(w, http.StatusInternalServerError, gateway.Errorf(gateway.CodeGatewayError, "internal error"))
	}
	return r
}

// errorStatus maps a gateway error code to its HTTP status.
func errorStatus(code string) int {
	switch code {
	case gateway.CodeInvalidRequest, gateway.CodeInvalidManifest, gateway.CodeInvalidMandate:
		return http.StatusBadRequest
	case gateway.CodeNotFound:
		return http.StatusNotFound
	case gateway.CodeRejectedInput:
		return http.StatusUnprocessableEntity
	case gateway.CodeInvalidApproval:
		return http.StatusConflict
	case gateway.CodeGatewayError, gateway.CodeGatewayRestarted:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

// receiptStatus maps a call's receipt to the HTTP status of POST /v0/calls:
// 200 succeeded, 202 pending approval, 403 denied, 422 input rejected, 502
// the agent failed (500 when the gateway itself did).
func receiptStatus(r *kv.Receipt) int {
	code := ""
	if r.Error != nil {
		code = *r.Error
	}
	switch r.Status {
	case gateway.StatusSucceeded:
		return http.StatusOK
	case gateway.StatusPendingApproval:
		return http.StatusAccepted
	case gateway.StatusRejected:
		return http.StatusUnprocessableEntity
	case gateway.StatusDenied:
		switch code {
		case gateway.CodeNotFound:
			return http.StatusNotFound
		case gateway.CodeInvalidRequest:
			return http.StatusBadRequest
		}
		return http.StatusForbidden
	}
	switch code {
	case gateway.CodeGatewayError, gateway.CodeGatewayRestarted:
		return http.StatusInternalServerError
	}
	return http.StatusBadGateway
}

type errorBody struct {
	Error *gateway.Error `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	var ge *gateway.Error
	if !errors.As(err, &ge) {
		ge = gateway.Errorf(gateway.CodeGatewayError, "internal error")
	}
	writeJSON(w, status, errorBody{Error: ge})
}

// fail answers with the error's own status, logging internal ones.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ge *gateway.Error
	if !errors.As(err, &ge) {
		a.log.Error("request failed", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeError(w, errorStatus(ge.Code), ge)
}

// decodeBody reads a JSON request body strictly: unknown fields, trailing
// data, NUL characters and oversized bodies are refused with a message that
// says what to fix.
func decodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		return gateway.Errorf(gateway.CodeInvalidRequest, "read body: %v", err)
	}
	if len(b) > maxRequestBody {
		return gateway.Errorf(gateway.CodeInvalidRequest, "body is larger than %d bytes", maxRequestBody)
	}
	if bytes.IndexByte(b, 0) >= 0 || bytes.Contains(b, []byte(`\u0000`)) {
		return gateway.Errorf(gateway.CodeInvalidRequest, "NUL characters are not accepted")
	}
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return gateway.Errorf(gateway.CodeInvalidRequest, "body: %v", err)
	}
	if dec.More() {
		return gateway.Errorf(gateway.CodeInvalidRequest, "body: trailing data after the JSON object")
	}
	return nil
}

func (a *api) healthz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// callBody is POST /v0/calls.
type callBody struct {
	Mandate    string          `json:"mandate"`
	Agent      string          `json:"agent,omitempty"`
	Capability string          `json:"capability,omitempty"`
	Input      json.RawMessage `json:"input"`
	MaxCost    *journal.Amount `json:"max_cost,omitempty"`
	Approval   string          `json:"approval,omitempty"`
}

// callAnswer is the answer of POST /v0/calls and of approve-and-run.
type callAnswer struct {
	Output   json.RawMessage `json:"output"`
	Receipt  *kv.Receipt     `json:"receipt"`
	Approval *kv.Approval    `json:"approval,omitempty"`
	Error    *gateway.Error  `json:"error,omitempty"`
}

func answer(res *gateway.CallResult) (int, callAnswer) {
	ans := callAnswer{Output: res.Output, Receipt: res.Receipt, Approval: res.Approval}
	if ans.Output == nil {
		ans.Output = json.RawMessage("null")
	}
	if ans.Approval != nil {
		ans.Approval = redactApproval(ans.Approval)
	}
	if r := res.Receipt; r.Error != nil {
		ans.Error = &gateway.Error{Code: *r.Error, Msg: res.Message}
	}
	return receiptStatus(res.Receipt), ans
}

func (a *api) postCall(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var body callBody
	if err := decodeBody(r, &body); err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.engine.Call(r.Context(), gateway.CallInput{
		Mandate: body.Mandate, Agent: body.Agent, Capability: body.Capability,
		Input: body.Input, MaxCost: body.MaxCost, Approval: body.Approval,
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	status, ans := answer(res)
	writeJSON(w, status, ans)
}

// redactApproval copies an approval for the wire. The input stays: the
// human approving must see what they approve.
func redactApproval(ap *kv.Approval) *kv.Approval {
	c := *ap
	return &c
}

func (a *api) listApprovals(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	mandate := r.URL.Query().Get("mandate")
	status := r.URL.Query().Get("status")
	list, err := a.engine.Approvals(func(ap *kv.Approval) bool {
		if mandate != "" && ap.Mandate != mandate {
			return false
		}
		if status == "" {
			return ap.Status == kv.ApprovalPending || ap.Status == kv.ApprovalGranted
		}
		return status == "all" || ap.Status == status
	}, 200)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if list == nil {
		list = []*kv.Approval{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": list})
}

func (a *api) getApproval(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	ap, err := a.engine.Approval(r.Context(), ps.ByName("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, redactApproval(ap))
}

// decisionBody is POST /v0/approvals/{id}: {} approves and runs,
// {"run": false} grants, {"decision": "reject"} rejects.
type decisionBody struct {
	Decision string `json:"decision,omitempty"`
	Run      *bool  `json:"run,omitempty"`
}

func (a *api) decideApproval(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var body decisionBody
	if err := decodeBody(r, &body); err != nil {
		a.fail(w, r, err)
		return
	}
	var d gateway.ApprovalDecision
	switch body.Decision {
	case "", "approve":
		d.NoRun = body.Run != nil && !*body.Run
	case "reject":
		if body.Run != nil {
			a.fail(w, r, gateway.Errorf(gateway.CodeInvalidRequest, "run goes with an approval, not with a rejection"))
			return
		}
		d.Reject = true
	default:
		a.fail(w, r, gateway.Errorf(gateway.CodeInvalidRequest, "decision %q is not approve or reject", body.Decision))
		return
	}
	ap, res, err := a.engine.Decide(r.Context(), ps.ByName("id"), d)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if res == nil {
		writeJSON(w, http.StatusOK, map[string]any{"approval": redactApproval(ap)})
		return
	}
	status, ans := answer(res)
	ans.Approval = redactApproval(ap)
	writeJSON(w, status, ans)
}

func (a *api) listReceipts(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	limit := 50
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 500 {
			a.fail(w, r, gateway.Errorf(gateway.CodeInvalidRequest, "limit must be between 1 and 500"))
			return
		}
		limit = n
	}
	page, err := a.engine.Receipts(q.Get("mandate"), q.Get("before"), limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if page.Receipts == nil {
		page.Receipts = []*kv.Receipt{}
	}
	writeJSON(w, http.StatusOK, page)
}

// receiptTree is a receipt with its children's trees.
type receiptTree struct {
	Receipt  *kv.Receipt    `json:"receipt"`
	Children []*receiptTree `json:"children"`
}

func (a *api) tree(id string, depth int) (*receiptTree, error) {
	rc, err := a.engine.Receipt(id)
	if err != nil {
		return nil, err
	}
	t := &receiptTree{Receipt: rc, Children: []*receiptTree{}}
	if depth > 16 {
		return t, nil
	}
	for _, c := range rc.Children {
		ct, err := a.tree(c, depth+1)
		if err != nil {
			return nil, err
		}
		t.Children = append(t.Children, ct)
	}
	return t, nil
}

func (a *api) getReceipt(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	t, err := a.tree(ps.ByName("id"), 0)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (a *api) getMandate(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	st, err := a.engine.Mandate(ps.ByName("ns") + "/" + ps.ByName("name"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

type accountView struct {
	Account   string         `json:"account"`
	Balance   journal.Amount `json:"balance"`
	Held      journal.Amount `json:"held"`
	Available journal.Amount `json:"available"`
}

func (a *api) listAccounts(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	accts, err := a.engine.Accounts()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]accountView, 0, len(accts))
	for name, ac := range accts {
		out = append(out, accountView{Account: name, Balance: ac.Balance, Held: ac.Held, Available: ac.Available()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	writeJSON(w, http.StatusOK, map[string]any{"accounts": out})
}

// agentView is one agent in a listing.
type agentView struct {
	ID           string          `json:"id"`
	Version      string          `json:"version"`
	Summary      string          `json:"summary"`
	Capabilities []string        `json:"capabilities"`
	License      string          `json:"license"`
	Pricing      gateway.Pricing `json:"pricing"`
	// WorstCase is in the agent's currency, or the mandate's when listed
	// under one (Currency says which).
	WorstCase journal.Amount `json:"worst_case"`
	Currency  string         `json:"currency"`
	Record    recordView     `json:"record"`
	Denied    *gateway.Error `json:"denied,omitempty"`
}

type recordView struct {
	Runs      int64 `json:"runs"`
	Succeeded int64 `json:"succeeded"`
}

func (a *api) listAgents(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	text := strings.ToLower(q.Get("q"))
	capability := q.Get("capability")
	var mandate *gateway.Mandate
	if id := q.Get("mandate"); id != "" {
		st, err := a.engine.Mandate(id)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		mandate = st.Mandate
	}
	out := []agentView{}
	for _, v := range a.engine.Registry().Latest() {
		m := v.Manifest
		if capability != "" && !contains(m.Capabilities, capability) {
			continue
		}
		if text != "" && !strings.Contains(strings.ToLower(m.ID+" "+m.Summary+" "+m.Description+" "+strings.Join(m.Capabilities, " ")), text) {
			continue
		}
		rec, err := a.engine.Record(m.Ref())
		if err != nil {
			a.fail(w, r, err)
			return
		}
		av := agentView{ID: m.ID, Version: m.Version, Summary: m.Summary, Capabilities: m.Capabilities,
			License: m.License, Pricing: m.Pricing, WorstCase: m.WorstCase(), Currency: m.Currency(),
			Record: recordView{Runs: rec.Runs, Succeeded: rec.Succeeded}}
		if av.Capabilities == nil {
			av.Capabilities = []string{}
		}
		if mandate != nil {
			d := gateway.CheckListing(mandate, m, v.Facts, gateway.CallRequest{Capability: capability, Now: a.engine.Now()})
			av.Currency = mandate.Currency
			if d.Verdict == gateway.VerdictDeny {
				av.Denied = &gateway.Error{Code: d.Reason, Msg: d.Msg}
			} else {
				av.WorstCase = d.WorstCase
			}
		}
		out = append(out, av)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Denied == nil) != (out[j].Denied == nil) {
			return out[i].Denied == nil
		}
		if out[i].WorstCase != out[j].WorstCase {
			return out[i].WorstCase < out[j].WorstCase
		}
		return out[i].ID < out[j].ID
	})
	writeJSON(w, http.StatusOK, map[string]any{"agents": out})
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// agentDetail is GET /v0/agents/{ns}/{name}[@range].
type agentDetail struct {
	Manifest *gateway.Manifest `json:"manifest"`
	Record   kv.Record         `json:"record"`
	Versions []string          `json:"versions"`
}

func (a *api) getAgent(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	ref := ps.ByName("ns") + "/" + ps.ByName("name")
	v, err := a.engine.Registry().Resolve(ref)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	rec, err := a.engine.Record(v.Manifest.Ref())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	d := agentDetail{Manifest: v.Manifest, Record: rec, Versions: []string{}}
	for _, x := range a.engine.Registry().Versions(v.Manifest.ID) {
		d.Versions = append(d.Versions, x.Manifest.Version)
	}
	writeJSON(w, http.StatusOK, d)
}
