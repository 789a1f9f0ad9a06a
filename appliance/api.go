package appliance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// maxRequestBody bounds a request body (a call's input included).
const maxRequestBody = 4 << 20

// api serves the HTTP API of gateway.md §5 and, on a hosted gateway, the
// extra endpoints of §7, every one behind its principals and scoping.
type api struct {
	engine *gateway.Engine
	log    *slog.Logger
	router *httprouter.Router
	// hosted is nil on a dev gateway: no authentication, no scoping.
	hosted *hosted
	// idem keeps Idempotency-Key records.
	idem *idempotency
	// files keeps uploads (files_api.go); nil until routeFiles.
	files *fileStore
	// backup streams the live backup (Config.Backup); nil leaves
	// GET /v0/admin/backup out.
	backup http.Handler
	// publicURL is HOLON_PUBLIC_URL without a trailing slash ("" when
	// unset): the host a dev gateway answers besides loopback, and the
	// origin /mcp accepts (origin.go).
	publicURL string
}

func newAPI(e *gateway.Engine, log *slog.Logger, h *hosted, idem *idempotency, backup http.Handler) *api {
	a := &api{engine: e, log: log, router: httprouter.New(), hosted: h, idem: idem, backup: backup}
	a.routes()
	return a
}

func (a *api) routes() {
	r := a.router
	r.GET("/healthz", a.healthz)
	a.handle("GET", "/v0/agents", accessAnyone, a.listAgents)
	a.handle("GET", "/v0/agents/:ns/:name", accessAnyone, a.getAgent)
	a.handle("POST", "/v0/calls", accessHuman|accessAgent, a.postCall)
	a.handle("GET", "/v0/approvals", accessHuman|accessAgent, a.listApprovals)
	a.handle("GET", "/v0/approvals/:id", accessHuman|accessAgent, a.getApproval)
	a.handle("POST", "/v0/approvals/:id", accessHuman, a.decideApproval)
	a.handle("GET", "/v0/receipts", accessHuman|accessAgent, a.listReceipts)
	a.handle("GET", "/v0/receipts/:id", accessHuman|accessAgent, a.getReceipt)
	a.handle("GET", "/v0/mandates/:ns/:name", accessHuman|accessAgent, a.getMandate)
	a.handle("GET", "/v0/accounts", accessHuman|accessAdmin, a.listAccounts)
	a.mountMCP()
	// The live backup: every row, so the operator's alone (open on a dev
	// gateway, like everything there).
	if a.backup != nil {
		a.handle("GET", "/v0/admin/backup", accessAdmin, func(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *principal) {
			a.backup.ServeHTTP(w, r)
		})
	}
	if a.hosted != nil {
		a.hostedRoutes()
	}
	a.routeConsole()
	a.routeOAuth()
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, holon.Errorf(holon.CodeNotFound, "no route %s %s", r.Method, redactKeys(r.URL.Path)))
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, holon.Errorf(holon.CodeInvalidRequest, "%s is not allowed on %s", r.Method, redactKeys(r.URL.Path)))
	})
	r.PanicHandler = func(w http.ResponseWriter, r *http.Request, p any) {
		a.log.Error("handler panicked", "path", redactKeys(r.URL.Path), "panic", redactKeys(fmt.Sprint(p)))
		writeError(w, http.StatusInternalServerError, holon.Errorf(holon.CodeGatewayError, "internal error"))
	}
}

// hostedRoutes are the extra endpoints of a hosted gateway (gateway.md §7
// "Extra endpoints"): accounts, keys, mandates and moderation.
func (a *api) hostedRoutes() {
	a.handle("POST", "/v0/signup", accessAnyone, a.signup)
	a.handle("GET", "/v0/me", accessHuman|accessAgent, a.me)
	a.handle("GET", "/v0/mandates", accessHuman, a.listMandates)
	a.handle("POST", "/v0/mandates", accessHuman, a.createMandate)
	a.handle("POST", "/v0/keys", accessHuman, a.createKey)
	a.handle("DELETE", "/v0/keys/:prefix", accessHuman, a.revokeKey)
	a.handle("POST", "/v0/admin/credit", accessAdmin, a.adminCredit)
	a.handle("POST", "/v0/admin/accounts/:handle/disable", accessAdmin, a.adminDisable)
	a.handle("POST", "/v0/admin/agents/:ns/:name/yank", accessAdmin, a.adminYank)
	a.handle("GET", "/v0/admin/accounts", accessAdmin, a.adminAccounts)
	a.handle("GET", "/v0/admin/log", accessAdmin, a.adminLog)
	a.publishRoutes()
}

// receiptStatus maps a call's receipt to the HTTP status of POST /v0/calls:
// 200 succeeded, 202 pending approval, 403 denied, 422 input rejected, 502
// the agent failed (500 when the gateway itself did).
func receiptStatus(r *holon.Receipt) int {
	code := ""
	if r.Error != nil {
		code = *r.Error
	}
	switch r.Status {
	case holon.StatusSucceeded:
		return http.StatusOK
	case holon.StatusPendingApproval:
		return http.StatusAccepted
	case holon.StatusRejected:
		return http.StatusUnprocessableEntity
	case holon.StatusDenied:
		switch code {
		case holon.CodeNotFound:
			return http.StatusNotFound
		case holon.CodeInvalidRequest:
			return http.StatusBadRequest
		}
		return http.StatusForbidden
	}
	switch code {
	case holon.CodeGatewayError, holon.CodeGatewayRestarted:
		return http.StatusInternalServerError
	case holon.CodeFileNotFound:
		return http.StatusNotFound
	}
	return http.StatusBadGateway
}

type errorBody struct {
	Error *holon.Error `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeError answers err with the status given; an error without a code
// the gateway's table knows is answered gateway_error, telling nothing of
// it. Most handlers want fail, which takes the status from the table and
// logs internal errors.
func writeError(w http.ResponseWriter, status int, err error) {
	ge, _, _ := publicError(err)
	if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="holon"`)
	}
	writeJSON(w, status, errorBody{Error: ge})
}

// fail answers with the status of the error's code (holon.HTTPStatus).
// An internal error (no code, a code the table does not know, or
// gateway_error) is logged, once, with the request it failed; it is the
// only kind that is.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) { failTo(a.log, w, r, err) }

// failTo is fail for handlers outside api, logging to log.
func failTo(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	ge, status, internal := publicError(err)
	if internal {
		log.Error("request failed", "method", r.Method, "path", redactKeys(r.URL.Path), "err", err)
	}
	writeError(w, status, ge)
}

// notFound is the answer for a resource that does not exist and for one
// outside the principal's scope alike: nobody learns what others have.
func notFound(format string, args ...any) error {
	return holon.Errorf(holon.CodeNotFound, format, args...)
}

// decodeBody reads a JSON request body strictly (gateway.DecodeJSON: I-JSON,
// field names spelt exactly, no unknown field, nothing after the object);
// NUL characters and oversized bodies are refused too, each with a message
// that says what to fix.
func decodeBody(r *http.Request, v any) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	return gateway.DecodeJSON(b, v, "body")
}

// readBody reads a bounded body with no NUL character in it.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) || len(b) > maxRequestBody {
		return nil, holon.Errorf(CodeBodyTooLarge, "the body is larger than %d bytes", maxRequestBody)
	}
	if err != nil {
		return nil, holon.Errorf(holon.CodeInvalidRequest, "read body: %v", err)
	}
	if bytes.IndexByte(b, 0) >= 0 || bytes.Contains(b, []byte(`\u0000`)) {
		return nil, holon.Errorf(CodeNULCharacter, "NUL characters (raw or as \\u0000) are not accepted in a request body: remove them")
	}
	return b, nil
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
	Receipt  *holon.Receipt  `json:"receipt"`
	Approval *holon.Approval `json:"approval,omitempty"`
	Error    *holon.Error    `json:"error,omitempty"`
	// Replayed is set on the answer to a call re-sent with an
	// Idempotency-Key already used: nothing ran again.
	Replayed bool `json:"replayed,omitempty"`
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
		ans.Error = &holon.Error{Code: *r.Error, Msg: res.Message}
	}
	return receiptStatus(res.Receipt), ans
}

// callMandate is the mandate a principal's call runs under. An agent key
// acts under its own mandate only ("with an agent key, the mandate is the
// key's"): naming another one is a 404, like any mandate out of scope. A
// human key calls under the root mandates of its account.
func (a *api) callMandate(p *principal, named string) (string, error) {
	switch p.kind {
	case kindDev:
		return named, nil
	case KindAgent:
		if named != "" && named != p.mandate {
			return "", notFound("no mandate %s (this agent key acts under %s only; leave mandate out)", named, p.mandate)
		}
		return p.mandate, nil
	}
	if named == "" {
		return "", holon.Errorf(holon.CodeInvalidRequest, "mandate is required: the id of one of your mandates, such as %s/sandbox", p.account)
	}
	if !p.seesMandate(named) {
		return "", notFound("no mandate %s", named)
	}
	st, err := a.engine.Mandate(named)
	if err != nil {
		return "", err
	}
	if st.Mandate.Parent != "" {
		return "", holon.Errorf(holon.CodeInvalidRequest, "%s is a sub-mandate derived for an agent's run: only that run calls under it", named)
	}
	return named, nil
}

func (a *api) postCall(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *principal) {
	var body callBody
	if err := decodeBody(r, &body); err != nil {
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
	if body.Approval != "" && p.kind != kindDev {
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
	if p.kind == KindHuman {
		in.Caller = p.account
	}
	idemKey := r.Header.Get("Idempotency-Key")
	if idemKey == "" {
		res, err := a.engine.Call(r.Context(), in)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		status, ans := answer(res)
		writeJSON(w, status, ans)
		return
	}
	claim, err := a.idem.claim(p.scope(), idemKey, body)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	in.Claim = claim
	finished := false
	defer func() {
		if !finished { // the gateway failed (or panicked) without a receipt to show
			claim.abandon(r.Context())
		}
	}()
	res, err := a.engine.Call(r.Context(), in)
	var replay *replayError
	switch {
	case errors.As(err, &replay):
		finished = true
		a.replay(w, r, &replay.rec)
		return
	case err != nil:
		a.fail(w, r, err)
		return
	}
	finished = true
	status, ans := answer(res)
	writeJSON(w, status, ans)
}

// replay answers a call re-sent with a used Idempotency-Key: the original
// status and receipt, output null (outputs are never stored).
func (a *api) replay(w http.ResponseWriter, r *http.Request, rec *idemRecord) {
	rc, err := a.engine.Receipt(rec.Receipt)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ans := callAnswer{Output: json.RawMessage("null"), Receipt: rc, Replayed: true}
	if rc.Error != nil {
		ans.Error = &holon.Error{Code: *rc.Error, Msg: "replayed: the original call ended with " + *rc.Error}
	}
	if rc.Status == holon.StatusPendingApproval && rc.Approval != nil {
		if ap, err := a.engine.Approval(r.Context(), *rc.Approval); err == nil {
			ans.Approval = redactApproval(ap)
		}
	}
	writeJSON(w, rec.Status, ans)
}

// redactApproval copies an approval for the wire. The input stays: the
// human approving must see what they approve.
func redactApproval(ap *holon.Approval) *holon.Approval {
	c := *ap
	return &c
}

// approvalsPage is the most GET /v0/approvals shows at once, and its
// default.
const approvalsPage = 200

// listApprovals is GET /v0/approvals?mandate=&status=&before=&limit=: the
// approvals of the mandates the principal sees, newest first, read from
// those mandates' index (a human's are its account's mandates, as for
// receipts), and next, the cursor of the following page.
func (a *api) listApprovals(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *principal) {
	q := r.URL.Query()
	mandate, status, before := q.Get("mandate"), q.Get("status"), q.Get("before")
	limit, err := queryLimit(r, approvalsPage, approvalsPage)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var page holon.ApprovalPage
	switch {
	case mandate != "" && !p.seesMandate(mandate):
		a.fail(w, r, notFound("no mandate %s", mandate))
		return
	case mandate != "":
		page, err = a.engine.ApprovalsOf([]string{mandate}, status, before, limit)
	case p.kind == kindDev:
		page, err = a.engine.AllApprovals(status, before, limit)
	case p.kind == KindAgent:
		// Only calls under the key's own mandate are held for approval,
		// never a delegated call under one derived from it.
		page, err = a.engine.ApprovalsOf([]string{p.mandate}, status, before, limit)
	default:
		var roots []string
		if roots, err = a.hosted.accountMandates(p.account); err == nil {
			roots = slices.DeleteFunc(roots, func(m string) bool { return !p.seesMandate(m) })
			page, err = a.engine.ApprovalsOf(roots, status, before, limit)
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// approval reads an approval within the principal's scope.
func (a *api) approval(r *http.Request, id string, p *principal) (*holon.Approval, error) {
	ap, err := a.engine.Approval(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if !p.seesMandate(ap.Mandate) {
		return nil, notFound("no approval %s", id)
	}
	return ap, nil
}

func (a *api) getApproval(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *principal) {
	ap, err := a.approval(r, ps.ByName("id"), p)
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

func (a *api) decideApproval(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *principal) {
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

func (a *api) listReceipts(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *principal) {
	q := r.URL.Query()
	limit := 50
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 500 {
			a.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "limit must be between 1 and 500"))
			return
		}
		limit = n
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
	case mandate != "" && !p.seesMandate(mandate):
		a.fail(w, r, notFound("no mandate %s", mandate))
		return
	case mandate != "" || p.kind == kindDev:
		fetch = func(before string, limit int) (holon.ReceiptPage, error) {
			return a.engine.Receipts(mandate, before, limit)
		}
	case p.kind == KindAgent:
		fetch = func(before string, limit int) (holon.ReceiptPage, error) {
			return a.engine.Receipts(p.mandate, before, limit)
		}
	default:
		roots, err := a.hosted.accountMandates(p.account)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		fetch = func(before string, limit int) (holon.ReceiptPage, error) { return a.receiptsOf(roots, before, limit) }
	}
	var page receiptPageView
	if filter.empty() {
		var kp holon.ReceiptPage
		kp, err = fetch(before, limit)
		page = receiptPageView{Receipts: kp.Receipts, Next: kp.Next}
	} else {
		page, err = a.filteredReceipts(filter, before, limit, fetch)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if page.Receipts == nil {
		page.Receipts = []*holon.Receipt{}
	}
	writeJSON(w, http.StatusOK, page)
}

// receiptsOf pages the receipts of several mandates together, newest first:
// each mandate's own index gives its newest page, and the pages merge.
func (a *api) receiptsOf(mandates []string, before string, limit int) (holon.ReceiptPage, error) {
	var all []*holon.Receipt
	more := false // some mandate has receipts older than its page
	for _, m := range mandates {
		p, err := a.engine.Receipts(m, before, limit)
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

// receiptTree is a receipt with its children's trees.
type receiptTree struct {
	Receipt  *holon.Receipt `json:"receipt"`
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

func (a *api) getReceipt(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *principal) {
	id := ps.ByName("id")
	rc, err := a.engine.Receipt(id)
	if err == nil && !p.seesMandate(rc.Mandate) {
		err = notFound("no receipt %s", id)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	t, err := a.tree(id, 0)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (a *api) getMandate(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *principal) {
	id := ps.ByName("ns") + "/" + ps.ByName("name")
	if !p.seesMandate(id) {
		a.fail(w, r, notFound("no mandate %s", id))
		return
	}
	st, err := a.engine.Mandate(id)
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

// listAccounts is GET /v0/accounts: a human's own balance (one read), or
// every balance for the operator.
func (a *api) listAccounts(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *principal) {
	if p.kind == KindHuman {
		ac, err := a.engine.Account(p.account)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"accounts": []accountView{{Account: p.account, Balance: ac.Balance, Held: ac.Held, Available: ac.Available()}}})
		return
	}
	accts, err := a.engine.Accounts()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]accountView, 0, len(accts))
	for name, ac := range accts {
		if p.seesAccount(name) {
			out = append(out, accountView{Account: name, Balance: ac.Balance, Held: ac.Held, Available: ac.Available()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	writeJSON(w, http.StatusOK, map[string]any{"accounts": out})
}

// agentView is one agent in a listing.
type agentView struct {
	ID           string           `json:"id"`
	Version      string           `json:"version"`
	Summary      string           `json:"summary"`
	Capabilities []string         `json:"capabilities"`
	License      string           `json:"license"`
	Pricing      contract.Pricing `json:"pricing"`
	// WorstCase is in the agent's currency, or the mandate's when listed
	// under one (Currency says which).
	WorstCase journal.Amount `json:"worst_case"`
	Currency  string         `json:"currency"`
	Record    recordView     `json:"record"`
	Denied    *holon.Error   `json:"denied,omitempty"`
	// Proprietary labels an agent with no code to check (manifest.md §8).
	Proprietary bool `json:"proprietary,omitempty"`
}

type recordView struct {
	Runs      int64 `json:"runs"`
	Succeeded int64 `json:"succeeded"`
}

// listAgents is GET /v0/agents[?q=&capability=&mandate=&limit=&cursor=]:
// Engine.ListAgents, a page at a time; next is the cursor of the page
// after ("" at the end).
func (a *api) listAgents(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *principal) {
	qs := r.URL.Query()
	q := gateway.AgentQuery{Text: qs.Get("q"), Capability: qs.Get("capability"), Mandate: qs.Get("mandate"),
		Limit: limitParam(qs.Get("limit")), Cursor: qs.Get("cursor")}
	if q.Mandate == "" && p.kind == KindAgent {
		q.Mandate = p.mandate // an agent searches under its one mandate
	}
	if q.Mandate != "" {
		if p.kind == kindNone {
			a.fail(w, r, holon.Errorf(CodeUnauthenticated, "listing under a mandate needs that mandate's key: send Authorization: Bearer <key>"))
			return
		}
		if !p.seesMandate(q.Mandate) {
			a.fail(w, r, notFound("no mandate %s", q.Mandate))
			return
		}
	}
	page, err := a.engine.ListAgents(r.Context(), q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]agentView, 0, len(page.Agents))
	for _, l := range page.Agents {
		m := l.Version.Manifest
		av := agentView{ID: m.ID, Version: m.Version, Summary: m.Summary, Capabilities: m.Capabilities,
			License: m.License, Pricing: m.Pricing, WorstCase: l.WorstCase, Currency: l.Currency,
			Record: recordView{Runs: l.Record.Runs, Succeeded: l.Record.Succeeded}, Denied: l.Denied, Proprietary: !m.OpenSource()}
		if av.Capabilities == nil {
			av.Capabilities = []string{}
		}
		out = append(out, av)
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": out, "total": page.Total, "next": page.Next,
		"capabilities": page.Capabilities})
}

// limitParam is a limit from a query string: 0 when absent, -1 (refused
// by the engine with its range) when not a whole number from 1.
func limitParam(s string) int {
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return -1
	}
	return n
}

// agentDetail is GET /v0/agents/{ns}/{name}[@range].
type agentDetail struct {
	Manifest *contract.Manifest `json:"manifest"`
	Record   holon.Record       `json:"record"`
	Versions []string           `json:"versions"`
}

func (a *api) getAgent(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ *principal) {
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
