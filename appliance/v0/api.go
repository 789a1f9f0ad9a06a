package v0

import (
	"log/slog"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/idempotency"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
)

// Config is what the /v0 routes are served with.
type Config struct {
	Engine *gateway.Engine
	Log    *slog.Logger
	// Idem keeps Idempotency-Key records.
	Idem *idempotency.Keys
	// Mandates lists the root mandates of a human's account (the accounts
	// room); nil on a dev gateway, where every principal is the dev one.
	Mandates func(handle string) ([]string, error)
	// Backup streams the live backup; nil leaves GET /v0/admin/backup out.
	Backup http.Handler
}

// API serves the /v0 routes of the engine.
type API struct {
	cfg Config
}

// New returns the /v0 routes.
func New(cfg Config) *API { return &API{cfg: cfg} }

// Mount registers the routes, each behind its principals:
//
//	GET  /healthz                     anyone
//	POST /v0/calls                    human or agent key (or a delegation token, ServeDelegated)
//	GET  /v0/approvals, /v0/approvals/{id}        human or agent key
//	POST /v0/approvals/{id}           human key
//	GET  /v0/receipts, /v0/receipts/{id}          human or agent key
//	POST /v0/receipts/{id}/refunds    the agent's author (human key) or operator
//	GET  /v0/mandates/{ns}/{name}     human or agent key
//	GET  /v0/accounts                 human key or operator
//	GET  /v0/admin/backup             operator (when Config.Backup is set)
func (a *API) Mount(m *auth.Mount) {
	m.Router.GET("/healthz", a.healthz)
	m.Handle("POST", "/v0/calls", auth.Human|auth.Agent, a.postCall)
	m.Handle("GET", "/v0/approvals", auth.Human|auth.Agent, a.listApprovals)
	m.Handle("GET", "/v0/approvals/:id", auth.Human|auth.Agent, a.getApproval)
	m.Handle("POST", "/v0/approvals/:id", auth.Human, a.decideApproval)
	m.Handle("GET", "/v0/receipts", auth.Human|auth.Agent, a.listReceipts)
	m.Handle("GET", "/v0/receipts/:id", auth.Human|auth.Agent, a.getReceipt)
	m.Handle("POST", "/v0/receipts/:id/refunds", auth.Human|auth.Operator, a.postRefund)
	m.Handle("GET", "/v0/mandates/:ns/:name", auth.Human|auth.Agent, a.getMandate)
	m.Handle("GET", "/v0/accounts", auth.Human|auth.Operator, a.listAccounts)
	// The live backup: every row, so the operator's alone (open on a dev
	// gateway, like everything there).
	if a.cfg.Backup != nil {
		m.Handle("GET", "/v0/admin/backup", auth.Operator, func(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
			a.cfg.Backup.ServeHTTP(w, r)
		})
	}
}

// fail answers with the status of the error's code (web.Fail): an
// internal error is logged, once, with the request it failed.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) { web.Fail(a.cfg.Log, w, r, err) }

// ServeDelegated is the front door's hook for delegated calls: it is
// called after the request checks (NUL characters, body size, the
// per-address rate limit) and before the router, so that a delegation
// token never meets API-key authentication. It reports whether it served
// the request.
func (a *API) ServeDelegated(w http.ResponseWriter, r *http.Request) bool {
	return serveDelegated(a.cfg.Engine, a.cfg.Log, w, r)
}

func (a *API) healthz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	web.JSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
