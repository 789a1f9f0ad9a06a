package appliance

import (
	"net/http"

	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/clientmeta"
	"holon.dev/holon/appliance/console"
	"holon.dev/holon/appliance/files"
	"holon.dev/holon/appliance/front"
	"holon.dev/holon/appliance/mcpserver"
	"holon.dev/holon/appliance/oauth"
	"holon.dev/holon/appliance/ops"
	"holon.dev/holon/appliance/reports"
	"holon.dev/holon/appliance/signin"
	"holon.dev/holon/appliance/v0"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
)

// mount has every room register its routes (and, for the rooms that
// issue credentials, its verifier in the chain) on one router, and puts
// the front door, then the metrics, in front of them.
func (a *App) mount() {
	hosted := a.cfg.Hosted
	a.router = web.NewRouter()
	a.chain = auth.NewChain(!hosted)
	m := &auth.Mount{Router: a.router, Chain: a.chain, Log: a.log}
	if hosted {
		a.chain.Register(auth.AdminKey(a.adminKey))
		a.chain.Register(auth.VerifierFunc(a.accounts.VerifyKey))
		m.Accounts = a.limits.account
	}
	var backup http.Handler
	if a.cfg.Backup != nil {
		backup = a.cfg.Backup(a.store)
	}
	routes := v0.Config{Engine: a.engine, Log: a.log, Idem: a.idem, Backup: backup}
	if hosted {
		routes.Mandates = a.accounts.Mandates
	}
	calls := v0.New(routes)
	door := front.Config{Routes: a.router, Delegated: calls.ServeDelegated, Origin: a.origin, Hosted: hosted, Log: a.log,
		Bodies: map[string]int64{"/v0/files": files.MaxFileSize + 1, console.UploadPath: console.MaxUpload}}
	if hosted {
		door.Address, door.TrustProxy = a.limits.address, a.limits.trustProxy
	}
	a.door = front.New(door)
	calls.Mount(m)
	mcpserver.New(a.engine, a.log, a.keyLive, a.mcpStateKey).Mount(m)
	if hosted {
		a.accounts.Mount(m, accounts.Routes{Log: a.log, Signups: a.limits.signup, TrustProxy: a.limits.trustProxy})
		a.signin.Mount(m)
	}
	a.mountConsole(m)
	a.router.AnswerUnrouted(a.log)
	a.listings.Mount(m, hosted)
	a.files.Mount(m, a.engine)
	a.alerts.Mount(m, a.engine)
	reports.Routes{Engine: a.engine, Log: a.log}.Mount(m)
	if hosted {
		a.publisher.Mount(m)
		a.openOAuth().Mount(m)
	}
	a.served = a.metrics.Instrument(a.door, ops.Exposure{Hosted: hosted, AdminKey: a.cfg.AdminKey,
		CheckHost: a.door.CheckHost, Log: a.cfg.Logger})
}

// mountConsole mounts the console's backend (appliance/console): its
// pages' requests go in-process through the front door, as the principal
// of the browser's console session (appliance/signin's; on a dev
// gateway, everyone is the dev principal).
func (a *App) mountConsole(m *auth.Mount) {
	var sessions console.Sessions = signin.Dev{}
	if a.signin != nil {
		sessions = a.signin
	}
	b, err := console.New(console.Config{
		Front: a.door, Sessions: sessions, Origin: a.origin,
		Hosted: a.cfg.Hosted, GitHubSignIn: a.signin != nil && a.signin.GitHubSignIn(),
		Engine: a.engine, MandateStates: func(ids []string) ([]*gateway.MandateState, error) { return accounts.MandateStates(a.engine, ids) },
		Log: a.log,
	})
	if err != nil {
		panic(err) // embedded templates: a build defect
	}
	b.Mount(m)
}

// openOAuth builds the authorization server of a hosted gateway
// (appliance/oauth), on the gateway's store and its accounts.
func (a *App) openOAuth() *oauth.Server {
	guard := a.guard()
	return oauth.New(oauth.Config{
		Store: a.store, Accounts: a.accounts,
		Documents: clientmeta.New(&guard, clientmeta.Options{RootCAs: a.cfg.RemoteRootCAs, Now: a.cfg.Now}),
		Log:       a.log, Now: a.cfg.Now, Rand: a.cfg.Rand, Origin: a.origin,
		Registrations: a.limits.signup, TrustProxy: a.limits.trustProxy,
	})
}

// keyLive reports whether a key, by its hash, still authenticates
// (accounts.Repo.KeyLive): the MCP server ends the sessions of a key
// that no longer does. Every key is live on a dev gateway.
func (a *App) keyLive(hash string) (bool, error) {
	if a.accounts == nil {
		return true, nil
	}
	return a.accounts.KeyLive(hash)
}
