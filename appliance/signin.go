package appliance

import (
	"holon.dev/holon/appliance/oauth"
	"holon.dev/holon/appliance/signin"
)

// Sign-in's names, as the gateway's callers and tests know them
// (appliance/signin).
const (
	SessionCookie             = signin.SessionCookie
	CodeGitHubNotConfigured   = signin.CodeGitHubNotConfigured
	CodeGitHubUnavailable     = signin.CodeGitHubUnavailable
	CodeLoginCodeInvalid      = signin.CodeLoginCodeInvalid
	CodeLoginCodeExpired      = signin.CodeLoginCodeExpired
	CodeLoginCodeOtherBrowser = signin.CodeLoginCodeOtherBrowser
	CodeEmailUnverified       = signin.CodeEmailUnverified
	CodeEmailLinkedElsewhere  = signin.CodeEmailLinkedElsewhere
)

// signinRoutes wires the sign-in room (appliance/signin) of a hosted
// gateway and mounts its routes.
func (a *api) signinRoutes() {
	h := a.hosted
	a.signin = signin.New(signin.Config{
		Store: h.store, Accounts: h.accounts, GitHub: h.github, Origin: a.origin, PublicURL: h.publicURL,
		Signups: h.limits.signup, TrustProxy: h.limits.trustProxy, AdminKey: h.adminKey,
		Claimed: oauth.DropPendingCodes, Now: h.now, Rand: h.rand, Log: a.log,
	})
	a.signin.Mount(a.mount)
}
