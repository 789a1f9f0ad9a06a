package appliance

import (
	"errors"
	"fmt"
	"net/http"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
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

// verifyKey is the account keys' verifier: a key looked up by its
// SHA-256.
func (h *hosted) verifyKey(_ *http.Request, credential string) (*auth.Principal, bool, error) {
	kind, ok := token.ParseKey(credential)
	if !ok {
		return nil, false, nil
	}
	p, err := h.keyPrincipal(token.Hash(credential), kind, token.Prefix(credential))
	return p, true, err
}

// keyPrincipal is the principal of an account key, found by its hash: the
// key must be of the kind its text says, live, and of an enabled account.
func (h *hosted) keyPrincipal(hash, kind, prefix string) (*auth.Principal, error) {
	var rec auth.Key
	var acct account
	err := h.store.View(func(tx holon.Tx) error {
		if err := tx.Get(holon.BucketKeys, keyByHash(hash), &rec); err != nil {
			return err
		}
		return tx.Get(holon.BucketUsers, rec.Account, &acct)
	})
	switch {
	case errors.Is(err, holon.ErrNotFound):
		return nil, holon.Errorf(web.CodeInvalidKey, "unknown key %s…: it was never issued here", prefix)
	case err != nil:
		return nil, fmt.Errorf("authenticate: %w", err)
	case rec.Kind != kind:
		return nil, holon.Errorf(web.CodeInvalidKey, "unknown key %s…", rec.Prefix)
	case rec.Revoked != nil:
		return nil, holon.Errorf(web.CodeInvalidKey, "key %s… was revoked", rec.Prefix)
	case acct.Disabled != nil:
		return nil, holon.Errorf(web.CodeInvalidKey, "key %s… belongs to a disabled account", rec.Prefix)
	case !rec.Live(h.now()):
		return nil, holon.Errorf(web.CodeInvalidKey, "key %s… expired at %s: sign in again for a new one", rec.Prefix, rec.Expires.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return &auth.Principal{Kind: kind, Account: rec.Account, Mandate: rec.Mandate, Key: &rec}, nil
}

// keyLive reports whether a key, by its hash, still authenticates, as the
// chain decides (keyPrincipal): the MCP server ends the sessions of a key
// that no longer does. Every key is live on a dev gateway.
func (a *api) keyLive(hash string) (bool, error) {
	if a.hosted == nil {
		return true, nil
	}
	_, err := a.hosted.keyPrincipal(hash, token.KindAgent, "")
	var ge *holon.Error
	if errors.As(err, &ge) && ge.Code == web.CodeInvalidKey {
		return false, nil
	}
	return err == nil, err
}
