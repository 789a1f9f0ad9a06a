package accounts

import (
	"errors"
	"fmt"
	"net/http"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
)

// KeyPrincipal is the principal of an account key, found by its hash: the
// key must be of the kind its text says, live, and of an enabled account
// (web.CodeInvalidKey otherwise, saying which). prefix names the key in
// the message when it was never issued.
func (r *Repo) KeyPrincipal(hash, kind, prefix string) (*auth.Principal, error) {
	var rec *auth.Key
	var acct *Account
	err := r.store.View(func(tx holon.Tx) error {
		var err error
		if rec, err = KeyByHash(tx, hash); err != nil {
			return err
		}
		acct, err = Get(tx, rec.Account)
		return err
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
	case !rec.Live(r.now()):
		return nil, holon.Errorf(web.CodeInvalidKey, "key %s… expired at %s: sign in again for a new one", rec.Prefix, rec.Expires.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return &auth.Principal{Kind: kind, Account: rec.Account, Mandate: rec.Mandate, Key: rec}, nil
}

// VerifyKey is the account keys' verifier (auth.Verifier): a key looked
// up by its SHA-256.
func (r *Repo) VerifyKey(_ *http.Request, credential string) (*auth.Principal, bool, error) {
	kind, ok := token.ParseKey(credential)
	if !ok {
		return nil, false, nil
	}
	p, err := r.KeyPrincipal(token.Hash(credential), kind, token.Prefix(credential))
	return p, true, err
}

// KeyLive reports whether an agent key, by its hash, still
// authenticates, as the chain decides (KeyPrincipal): the MCP server ends
// the sessions of a key that no longer does.
func (r *Repo) KeyLive(hash string) (bool, error) {
	_, err := r.KeyPrincipal(hash, token.KindAgent, "")
	var ge *holon.Error
	if errors.As(err, &ge) && ge.Code == web.CodeInvalidKey {
		return false, nil
	}
	return err == nil, err
}
