package accounts

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
)

// MaxKeys bounds the live keys of an account.
const MaxKeys = 50

// Keys are stored under two names in holon.BucketKeys: "hash/<sha256>" holds
// the record (authentication reads it), "acct/<handle>/<prefix>" points
// to it from its account (listing and revocation read those).
func keyByHash(hash string) string { return "hash/" + hash }

func keyByAccount(handle, prefix string) string { return "acct/" + handle + "/" + prefix }

// DrawKey draws a key of kind and builds its record, not yet stored
// (PutKey stores it).
func (r *Repo) DrawKey(kind, handle, mandate string, ask bool) (string, *auth.Key, error) {
	key, err := token.NewKey(r.rand, kind)
	if err != nil {
		return "", nil, err
	}
	return key, &auth.Key{
		Prefix: token.Prefix(key), Kind: kind, Account: handle, Mandate: mandate, Ask: ask,
		Created: r.now().UTC(), Hash: token.Hash(key),
	}, nil
}

// PutKey stores a new key record and its account index; the key's prefix
// must be new in its account and its hash new (ErrCollision: draw again).
func PutKey(tx holon.Tx, k *auth.Key) error {
	var hash string
	if err := tx.Get(holon.BucketKeys, keyByAccount(k.Account, k.Prefix), &hash); err == nil {
		return ErrCollision
	} else if !errors.Is(err, holon.ErrNotFound) {
		return err
	}
	var old auth.Key
	if err := tx.Get(holon.BucketKeys, keyByHash(k.Hash), &old); err == nil {
		return ErrCollision
	} else if !errors.Is(err, holon.ErrNotFound) {
		return err
	}
	if err := tx.Put(holon.BucketKeys, keyByHash(k.Hash), k); err != nil {
		return err
	}
	return tx.Put(holon.BucketKeys, keyByAccount(k.Account, k.Prefix), k.Hash)
}

// UpdateKey stores a key record that exists (its expiry or revocation
// changed).
func UpdateKey(tx holon.Tx, k *auth.Key) error { return tx.Put(holon.BucketKeys, keyByHash(k.Hash), k) }

// KeyByHash reads a key by its SHA-256; holon.ErrNotFound when none has it.
func KeyByHash(tx holon.Tx, hash string) (*auth.Key, error) {
	k := new(auth.Key)
	if err := tx.Get(holon.BucketKeys, keyByHash(hash), k); err != nil {
		return nil, err
	}
	return k, nil
}

// KeyByPrefix reads an account's key by its prefix; holon.ErrNotFound
// when the account has none with it.
func KeyByPrefix(tx holon.Tx, handle, prefix string) (*auth.Key, error) {
	var hash string
	if err := tx.Get(holon.BucketKeys, keyByAccount(handle, prefix), &hash); err != nil {
		return nil, err
	}
	return KeyByHash(tx, hash)
}

// Keys lists an account's key records, live or not, by prefix.
func Keys(tx holon.Tx, handle string) ([]*auth.Key, error) {
	var hashes []string
	err := tx.ForEach(holon.BucketKeys, keyByAccount(handle, ""), func(_ string, raw json.RawMessage) (bool, error) {
		var h string
		if err := json.Unmarshal(raw, &h); err != nil {
			return false, err
		}
		hashes = append(hashes, h)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*auth.Key, 0, len(hashes))
	for _, h := range hashes {
		k, err := KeyByHash(tx, h)
		if err != nil {
			return nil, fmt.Errorf("key %s of %s: %w", h[:8], handle, err)
		}
		out = append(out, k)
	}
	return out, nil
}

// RevokeKey marks a key revoked at now.
func RevokeKey(tx holon.Tx, k *auth.Key, now time.Time) error {
	t := now.UTC()
	k.Revoked = &t
	return UpdateKey(tx, k)
}

// RevokeKeyByHash revokes a key, by its SHA-256, if it is not already.
func RevokeKeyByHash(tx holon.Tx, hash string, now time.Time) error {
	k, err := KeyByHash(tx, hash)
	if err != nil {
		return fmt.Errorf("revoke key: %w", err)
	}
	if k.Revoked != nil {
		return nil
	}
	return RevokeKey(tx, k, now)
}

// RevokeLiveKeys revokes every key of an account not revoked yet at now
// and returns how many it revoked.
func RevokeLiveKeys(tx holon.Tx, handle string, now time.Time) (int, error) {
	keys, err := Keys(tx, handle)
	if err != nil {
		return 0, err
	}
	revoked := 0
	for _, k := range keys {
		if k.Revoked == nil {
			if err := RevokeKey(tx, k, now); err != nil {
				return revoked, err
			}
			revoked++
		}
	}
	return revoked, nil
}

// KeysFull reports whether an account holds MaxKeys keys that may
// authenticate at now: then it may get no other one. It is the one
// quota check of every place that gives an account a key.
func KeysFull(tx holon.Tx, handle string, now time.Time) (bool, error) {
	keys, err := Keys(tx, handle)
	if err != nil {
		return false, err
	}
	live := 0
	for _, k := range keys {
		if k.Live(now) {
			live++
		}
	}
	return live >= MaxKeys, nil
}

// KeyPrincipal is the principal of an account key, found by its hash: the
// key must be of the kind its text says, live, and of an enabled account
// (web.CodeInvalidKey otherwise, saying which). prefix names the key in
// the message when it was never issued.
func (r *Repo) KeyPrincipal(hash, kind, prefix string) (*auth.Principal, error) {
	rec, disabled, err := r.keyAndAccount(hash)
	switch {
	case errors.Is(err, holon.ErrNotFound):
		return nil, holon.Errorf(web.CodeInvalidKey, "unknown key %s…: it was never issued here", prefix)
	case err != nil:
		return nil, fmt.Errorf("authenticate: %w", err)
	case rec.Kind != kind:
		return nil, holon.Errorf(web.CodeInvalidKey, "unknown key %s…", rec.Prefix)
	case rec.Revoked != nil:
		return nil, holon.Errorf(web.CodeInvalidKey, "key %s… was revoked", rec.Prefix)
	case disabled:
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
