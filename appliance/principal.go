package appliance

import (
	"net/http"

	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/token"
)

// handle registers an endpoint behind authentication, its access rule and
// the account's rate limit (auth.Mount).
func (a *api) handle(method, path string, acc auth.Access, h auth.Handler) {
	a.mount.Handle(method, path, acc, h)
}

// authenticate finds the principal of a request (auth.Chain).
func (a *api) authenticate(r *http.Request) (*auth.Principal, error) { return a.auth.Authenticate(r) }

// verifyAdmin is the admin key's verifier: compared in constant time
// with its SHA-256.
func (h *hosted) verifyAdmin(_ *http.Request, credential string) (*auth.Principal, bool, error) {
	if token.Equal(credential, h.adminKey) {
		return auth.Admin(), true, nil
	}
	return nil, false, nil
}

// keyLive reports whether a key, by its hash, still authenticates
// (accounts.Repo.KeyLive): the MCP server ends the sessions of a key
// that no longer does. Every key is live on a dev gateway.
func (a *api) keyLive(hash string) (bool, error) {
	if a.hosted == nil {
		return true, nil
	}
	return a.hosted.accounts.KeyLive(hash)
}
