package appliance

import (
	"fmt"
	"log/slog"
	"net/http"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/mcpserver"
	"holon.dev/holon/appliance/origin"
	"holon.dev/holon/appliance/signin"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/v0"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
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
	// v0 serves the engine's own /v0 routes, and delegated calls.
	v0 *v0.API
	// origin is the one rule of the gateway's origin (appliance/origin):
	// the host a dev gateway answers besides loopback, the origin /mcp
	// accepts (origin.go), the base of sign-in's and OAuth's URLs.
	origin *origin.Rule
	// signin is the sign-in room of a hosted gateway (nil on a dev
	// gateway): GitHub sign-in and the console sessions.
	signin *signin.Service
}

func newAPI(e *gateway.Engine, log *slog.Logger, h *hosted, routes *v0.API, rule *origin.Rule) *api {
	a := &api{engine: e, log: log, router: web.NewRouter(), hosted: h, v0: routes, origin: rule}
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
	a.v0.Mount(a.mount)
	a.mcp = mcpserver.New(a.engine, a.log, a.keyLive)
	a.mcp.Mount(a.mount)
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
	a.signinRoutes()
}

// fail answers with the status of the error's code (web.Status).
// An internal error (no code, a code the table does not know, or
// gateway_error) is logged, once, with the request it failed; it is the
// only kind that is.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) { web.Fail(a.log, w, r, err) }

// mandateStates reads mandates with their budgets, in the order given
// (accounts.MandateStates).
func (a *api) mandateStates(ids []string) ([]*gateway.MandateState, error) {
	return accounts.MandateStates(a.engine, ids)
}
