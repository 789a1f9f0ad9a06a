package appliance

import (
	"errors"
	"fmt"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/clientmeta"
	"holon.dev/holon/appliance/oauth"
	"holon.dev/holon/appliance/token"
)

// openOAuth builds the authorization server of a hosted gateway
// (appliance/oauth), on the gateway's store and its accounts.
func (a *App) openOAuth() *oauth.Server {
	h := a.hosted
	return oauth.New(oauth.Config{
		Store: h.store, Accounts: oauthAccounts{h},
		Documents: clientmeta.New(&h.guard, clientmeta.Options{RootCAs: a.cfg.RemoteRootCAs, Now: h.now}),
		Log:       a.log, Now: h.now, Rand: h.rand, Origin: a.api.origin,
		Registrations: h.limits.signup, TrustProxy: h.limits.trustProxy,
	})
}

// oauthAccounts is what the authorization server (appliance/oauth) reads
// and writes of accounts and keys, inside its transactions.
type oauthAccounts struct{ h *hosted }

var _ oauth.Accounts = oauthAccounts{}

// Account reads an account.
func (o oauthAccounts) Account(tx holon.Tx, handle string) (*oauth.Holder, error) {
	var acct account
	if err := tx.Get(holon.BucketUsers, handle, &acct); err != nil {
		return nil, err
	}
	return &oauth.Holder{Disabled: acct.Disabled != nil, Mandates: acct.Mandates}, nil
}

// MintKey makes the agent key of a grant, within the account's quota of
// live keys. Its own secret is drawn and dropped: the key is used only
// through its tokens.
func (o oauthAccounts) MintKey(tx holon.Tx, handle, mandate, client string, ask bool) (*auth.Key, error) {
	if live, err := liveKeys(tx, handle, o.h.now()); err != nil {
		return nil, err
	} else if live >= maxKeysPerAccount {
		return nil, oauth.Errorf("invalid_grant", "the account holds %d live keys, the most it may: revoke one in the console and authorize again", maxKeysPerAccount)
	}
	for attempt := 0; ; attempt++ {
		_, key, err := o.h.drawKey(token.KindAgent, handle, mandate, ask)
		if err != nil {
			return nil, err
		}
		key.Client = client
		// putKey writes nothing when it finds a collision: draw again.
		if err := putKey(tx, key); errors.Is(err, errKeyCollision) && attempt < 3 {
			continue
		} else if err != nil {
			return nil, err
		}
		return key, nil
	}
}

// Key reads a key record by its hash.
func (o oauthAccounts) Key(tx holon.Tx, hash string) (*auth.Key, error) {
	var k auth.Key
	if err := tx.Get(holon.BucketKeys, keyByHash(hash), &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// PutKey stores a changed key record.
func (o oauthAccounts) PutKey(tx holon.Tx, k *auth.Key) error {
	return tx.Put(holon.BucketKeys, keyByHash(k.Hash), k)
}

// RevokeKey revokes a key by its hash, if it is not already.
func (o oauthAccounts) RevokeKey(tx holon.Tx, hash string, now time.Time) error {
	k, err := o.Key(tx, hash)
	if err != nil {
		return fmt.Errorf("revoke key: %w", err)
	}
	if k.Revoked != nil {
		return nil
	}
	return revokeKey(tx, k, now)
}

// Principal is the principal of an agent key by its hash.
func (o oauthAccounts) Principal(hash, prefix string) (*auth.Principal, error) {
	return o.h.keyPrincipal(hash, token.KindAgent, prefix)
}
