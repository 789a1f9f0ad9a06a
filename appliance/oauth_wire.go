package appliance

import (
	"holon.dev/holon/appliance/clientmeta"
	"holon.dev/holon/appliance/oauth"
)

// openOAuth builds the authorization server of a hosted gateway
// (appliance/oauth), on the gateway's store and its accounts.
func (a *App) openOAuth() *oauth.Server {
	h := a.hosted
	return oauth.New(oauth.Config{
		Store: h.store, Accounts: h.accounts,
		Documents: clientmeta.New(&h.guard, clientmeta.Options{RootCAs: a.cfg.RemoteRootCAs, Now: h.now}),
		Log:       a.log, Now: h.now, Rand: h.rand, Origin: a.api.origin,
		Registrations: h.limits.signup, TrustProxy: h.limits.trustProxy,
	})
}
