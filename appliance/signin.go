package appliance

import (
	"encoding/json"

	"holon.dev/holon"
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
		Claimed: dropOAuthCodes, Now: h.now, Rand: h.rand, Log: a.log,
	})
	a.signin.Mount(a.mount)
}

// dropOAuthCodes drops the authorization codes not yet traded of an
// account a GitHub sign-in takes over (signin.Config.Claimed).
func dropOAuthCodes(tx holon.Tx, handle string) error {
	var codes []string
	err := tx.ForEach(holon.BucketOAuth, "code/", func(k string, raw json.RawMessage) (bool, error) {
		var c oauthCode
		if err := json.Unmarshal(raw, &c); err == nil && c.Account == handle && c.Used == nil {
			codes = append(codes, k)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, k := range codes {
		if err := tx.Delete(holon.BucketOAuth, k); err != nil {
			return err
		}
	}
	return nil
}
