package appliance

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/idempotency"
	"holon.dev/holon/appliance/mcpserver"
	"holon.dev/holon/appliance/origin"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

// api serves the HTTP API of gateway.md §5 and, on a hosted gateway, the
// extra endpoints of §7, every one behind its principals and scoping.
type api struct {
	engine *gateway.Engine
	log    *slog.Logger
	router *web.Router
	// auth finds a request's principal; mount registers endpoints behind
	// it.
	auth  *auth.Chain
	mount *auth.Mount
	// mcp is the MCP server on /mcp.
	mcp *mcpserver.Server
	// hosted is nil on a dev gateway: no authentication, no scoping.
	hosted *hosted
	// idem keeps Idempotency-Key records.
	idem *idempotency.Keys
	// backup streams the live backup (Config.Backup); nil leaves
	// GET /v0/admin/backup out.
	backup http.Handler
	// origin is the one rule of the gateway's origin (appliance/origin):
	// the host a dev gateway answers besides loopback, the origin /mcp
	// accepts (origin.go), the base of sign-in's and OAuth's URLs.
	origin *origin.Rule
}

func newAPI(e *gateway.Engine, log *slog.Logger, h *hosted, idem *idempotency.Keys, backup http.Handler) *api {
	a := &api{engine: e, log: log, router: web.NewRouter(), hosted: h, idem: idem, backup: backup}
	a.auth = auth.NewChain(h == nil)
	a.mount = &auth.Mount{Router: a.router, Chain: a.auth, Log: log}
	if h != nil {
		a.auth.Register(auth.VerifierFunc(h.verifyAdmin))
		a.auth.Register(auth.VerifierFunc(h.accounts.VerifyKey))
		a.mount.Accounts = h.limits.account
	}
	a.routes()
	return a
}

func (a *api) routes() {
	r := a.router
	r.GET("/healthz", a.healthz)
	a.handle("GET", "/v0/agents", auth.Anyone, a.listAgents)
	a.handle("GET", "/v0/agents/:ns/:name", auth.Anyone, a.getAgent)
	a.handle("POST", "/v0/calls", auth.Human|auth.Agent, a.postCall)
	a.handle("GET", "/v0/approvals", auth.Human|auth.Agent, a.listApprovals)
	a.handle("GET", "/v0/approvals/:id", auth.Human|auth.Agent, a.getApproval)
	a.handle("POST", "/v0/approvals/:id", auth.Human, a.decideApproval)
	a.handle("GET", "/v0/receipts", auth.Human|auth.Agent, a.listReceipts)
	a.handle("GET", "/v0/receipts/:id", auth.Human|auth.Agent, a.getReceipt)
	a.handle("GET", "/v0/mandates/:ns/:name", auth.Human|auth.Agent, a.getMandate)
	a.handle("GET", "/v0/accounts", auth.Human|auth.Operator, a.listAccounts)
	a.mcp = mcpserver.New(a.engine, a.log, a.keyLive)
	a.mcp.Mount(a.mount)
	// The live backup: every row, so the operator's alone (open on a dev
	// gateway, like everything there).
	if a.backup != nil {
		a.handle("GET", "/v0/admin/backup", auth.Operator, func(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
			a.backup.ServeHTTP(w, r)
		})
	}
	if a.hosted != nil {
		a.hostedRoutes()
	}
	a.routeConsole()
	r.Fallbacks(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		web.Answer(w, holon.Errorf(holon.CodeNotFound, "no route %s %s", r.Method, token.Redact(r.URL.Path)))
	}), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		web.MethodNotAllowed(w, "%s is not allowed on %s", r.Method, token.Redact(r.URL.Path))
	}), func(w http.ResponseWriter, r *http.Request, p any) {
		a.log.Error("handler panicked", "path", token.Redact(r.URL.Path), "panic", token.Redact(fmt.Sprint(p)))
		web.Answer(w, holon.Errorf(holon.CodeGatewayError, "internal error"))
	})
}

// hostedRoutes are the extra endpoints of a hosted gateway (gateway.md §7
// "Extra endpoints"): accounts, keys, mandates and moderation.
func (a *api) hostedRoutes() {
	h := a.hosted
	h.accounts.Mount(a.mount, accounts.Routes{Log: a.log, Signups: h.limits.signup, TrustProxy: h.limits.trustProxy})
	a.publishRoutes()
}

// fail answers with the status of the error's code (web.Status).
// An internal error (no code, a code the table does not know, or
// gateway_error) is logged, once, with the request it failed; it is the
// only kind that is.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) { web.Fail(a.log, w, r, err) }

func (a *api) healthz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	web.JSON(w, http.StatusOK, map[string]string{"status": "ok"})
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

func answer(res *gateway.CallResult) (int, wire.CallAnswer) {
	ans := wire.CallAnswer{Output: res.Output, Receipt: res.Receipt, Approval: res.Approval}
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
func (a *api) callMandate(p *auth.Principal, named string) (string, error) {
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
	st, err := a.engine.Mandate(named)
	if err != nil {
		return "", err
	}
	if st.Mandate.Parent != "" {
		return "", holon.Errorf(holon.CodeInvalidRequest, "%s is a sub-mandate derived for an agent's run: only that run calls under it", named)
	}
	return named, nil
}

func (a *api) postCall(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
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
	idemKey := r.Header.Get("Idempotency-Key")
	if idemKey == "" {
		res, err := a.engine.Call(r.Context(), in)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		status, ans := answer(res)
		web.JSON(w, status, ans)
		return
	}
	claim, err := a.idem.Claim(p.Scope(), idemKey, body)
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
	res, err := a.engine.Call(r.Context(), in)
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
	web.JSON(w, status, ans)
}

// replay answers a call re-sent with a used Idempotency-Key: the original
// status and receipt, output null (outputs are never stored).
func (a *api) replay(w http.ResponseWriter, r *http.Request, rec *idempotency.Record) {
	rc, err := a.engine.Receipt(rec.Receipt)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ans := wire.CallAnswer{Output: json.RawMessage("null"), Receipt: rc, Replayed: true}
	if rc.Error != nil {
		ans.Error = &holon.Error{Code: *rc.Error, Msg: "replayed: the original call ended with " + *rc.Error}
	}
	if rc.Status == holon.StatusPendingApproval && rc.Approval != nil {
		if ap, err := a.engine.Approval(r.Context(), *rc.Approval); err == nil {
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

// listApprovals is GET /v0/approvals?mandate=&status=&before=&limit=: the
// approvals of the mandates the principal sees, newest first, read from
// those mandates' index (a human's are its account's mandates, as for
// receipts), and next, the cursor of the following page.
func (a *api) listApprovals(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
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
		page, err = a.engine.ApprovalsOf([]string{mandate}, status, before, limit)
	case p.Kind == auth.KindDev:
		page, err = a.engine.AllApprovals(status, before, limit)
	case p.Kind == token.KindAgent:
		// Only calls under the key's own mandate are held for approval,
		// never a delegated call under one derived from it.
		page, err = a.engine.ApprovalsOf([]string{p.Mandate}, status, before, limit)
	default:
		var roots []string
		if roots, err = a.hosted.accounts.Mandates(p.Account); err == nil {
			roots = slices.DeleteFunc(roots, func(m string) bool { return !p.SeesMandate(m) })
			page, err = a.engine.ApprovalsOf(roots, status, before, limit)
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, page)
}

// approval reads an approval within the principal's scope.
func (a *api) approval(r *http.Request, id string, p *auth.Principal) (*holon.Approval, error) {
	ap, err := a.engine.Approval(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if !p.SeesMandate(ap.Mandate) {
		return nil, web.NotFound("no approval %s", id)
	}
	return ap, nil
}

func (a *api) getApproval(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
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

func (a *api) decideApproval(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
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
	ap, res, err := a.engine.Decide(r.Context(), ps.ByName("id"), d)
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
	web.JSON(w, status, ans)
}

func (a *api) listReceipts(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
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
			return a.engine.Receipts(mandate, before, limit)
		}
	case p.Kind == token.KindAgent:
		fetch = func(before string, limit int) (holon.ReceiptPage, error) {
			return a.engine.Receipts(p.Mandate, before, limit)
		}
	default:
		roots, err := a.hosted.accounts.Mandates(p.Account)
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
		page, err = a.filteredReceipts(filter, before, limit, fetch)
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

func (a *api) getReceipt(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	id := ps.ByName("id")
	rc, err := a.engine.Receipt(id)
	if err == nil && !p.SeesMandate(rc.Mandate) {
		err = web.NotFound("no receipt %s", id)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	t, err := wire.Tree(a.engine, id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, t)
}

func (a *api) getMandate(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	id := ps.ByName("ns") + "/" + ps.ByName("name")
	if !p.SeesMandate(id) {
		a.fail(w, r, web.NotFound("no mandate %s", id))
		return
	}
	st, err := a.engine.Mandate(id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, st)
}

// mandateStates reads mandates with their budgets, in the order given
// (accounts.MandateStates).
func (a *api) mandateStates(ids []string) ([]*gateway.MandateState, error) {
	return accounts.MandateStates(a.engine, ids)
}

// listAccounts is GET /v0/accounts: a human's own balance (one read), or
// every balance for the operator.
func (a *api) listAccounts(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	if p.Kind == token.KindHuman {
		ac, err := a.engine.Account(p.Account)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, map[string]any{"accounts": []wire.AccountView{{Account: p.Account, Balance: wire.Money(ac.Balance), Held: wire.Money(ac.Held), Available: wire.Money(ac.Available())}}})
		return
	}
	accts, err := a.engine.Accounts()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]wire.AccountView, 0, len(accts))
	for name, ac := range accts {
		if p.SeesAccount(name) {
			out = append(out, wire.AccountView{Account: name, Balance: wire.Money(ac.Balance), Held: wire.Money(ac.Held), Available: wire.Money(ac.Available())})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	web.JSON(w, http.StatusOK, map[string]any{"accounts": out})
}

// listAgents is GET /v0/agents[?q=&capability=&mandate=&limit=&cursor=]:
// Engine.ListAgents, a page at a time; next is the cursor of the page
// after ("" at the end).
func (a *api) listAgents(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	qs := r.URL.Query()
	q := gateway.AgentQuery{Text: qs.Get("q"), Capability: qs.Get("capability"), Mandate: qs.Get("mandate"),
		Limit: limitParam(qs.Get("limit")), Cursor: qs.Get("cursor")}
	if q.Mandate == "" && p.Kind == token.KindAgent {
		q.Mandate = p.Mandate // an agent searches under its one mandate
	}
	if q.Mandate != "" {
		if p.Kind == auth.KindNone {
			a.fail(w, r, holon.Errorf(web.CodeUnauthenticated, "listing under a mandate needs that mandate's key: send Authorization: Bearer <key>"))
			return
		}
		if !p.SeesMandate(q.Mandate) {
			a.fail(w, r, web.NotFound("no mandate %s", q.Mandate))
			return
		}
	}
	page, err := a.engine.ListAgents(r.Context(), q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]wire.Agent, 0, len(page.Agents))
	for _, l := range page.Agents {
		m := l.Version.Manifest
		av := wire.Agent{ID: m.ID, Version: m.Version, Summary: m.Summary, Capabilities: m.Capabilities,
			License: m.License, Pricing: m.Pricing, WorstCase: l.WorstCase, Currency: l.Currency,
			Record: wire.AgentRecord{Runs: l.Record.Runs, Succeeded: l.Record.Succeeded}, Denied: l.Denied, Proprietary: !m.OpenSource()}
		if av.Capabilities == nil {
			av.Capabilities = []string{}
		}
		out = append(out, av)
	}
	web.JSON(w, http.StatusOK, map[string]any{"agents": out, "total": page.Total, "next": page.Next,
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

func (a *api) getAgent(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ *auth.Principal) {
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
	d := wire.AgentDetail{Manifest: v.Manifest, Record: rec, Versions: []string{}}
	for _, x := range a.engine.Registry().Versions(v.Manifest.ID) {
		d.Versions = append(d.Versions, x.Manifest.Version)
	}
	web.JSON(w, http.StatusOK, d)
}
