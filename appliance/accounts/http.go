package accounts

import (
	"log/slog"
	"net/http"

	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/ratelimit"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
)

// Routes is what the accounts' endpoints need besides the repository.
type Routes struct {
	Log *slog.Logger
	// Signups limits the signups of a client address.
	Signups ratelimit.Limiter
	// TrustProxy says whether X-Forwarded-For names the client address.
	TrustProxy bool
}

// handlers serve the accounts' endpoints.
type handlers struct {
	repo       *Repo
	engine     *gateway.Engine
	log        *slog.Logger
	signups    ratelimit.Limiter
	trustProxy bool
}

// Mount registers the endpoints of accounts, keys, mandates and
// moderation (a hosted gateway's alone):
//
//	POST   /v0/signup                               anyone
//	GET    /v0/me                                   human or agent key
//	GET    /v0/mandates, POST /v0/mandates          human key
//	POST   /v0/keys, DELETE /v0/keys/{prefix}       human key
//	POST   /v0/admin/credit                         operator
//	POST   /v0/admin/accounts/{handle}/disable      operator
//	POST   /v0/admin/agents/{ns}/{name}@{v}/yank    operator
//	GET    /v0/admin/accounts, GET /v0/admin/log    operator
func (r *Repo) Mount(m *auth.Mount, rt Routes) {
	h := &handlers{repo: r, engine: r.engine, log: rt.Log, signups: rt.Signups, trustProxy: rt.TrustProxy}
	m.Handle("POST", "/v0/signup", auth.Anyone, h.signup)
	m.Handle("GET", "/v0/me", auth.Human|auth.Agent, h.me)
	m.Handle("GET", "/v0/mandates", auth.Human, h.listMandates)
	m.Handle("POST", "/v0/mandates", auth.Human, h.createMandate)
	m.Handle("POST", "/v0/keys", auth.Human, h.createKey)
	m.Handle("DELETE", "/v0/keys/:prefix", auth.Human, h.revokeKey)
	m.Handle("POST", "/v0/admin/credit", auth.Operator, h.adminCredit)
	m.Handle("POST", "/v0/admin/accounts/:handle/disable", auth.Operator, h.adminDisable)
	m.Handle("POST", "/v0/admin/agents/:ns/:name/yank", auth.Operator, h.adminYank)
	m.Handle("GET", "/v0/admin/accounts", auth.Operator, h.adminAccounts)
	m.Handle("GET", "/v0/admin/log", auth.Operator, h.adminLog)
}

// fail answers with the status of the error's code (web.Fail).
func (h *handlers) fail(w http.ResponseWriter, r *http.Request, err error) {
	web.Fail(h.log, w, r, err)
}
