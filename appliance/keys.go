package appliance

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
)

// maxKeysPerAccount bounds the live keys of an account.
const maxKeysPerAccount = 50

// Keys are stored under two names in holon.BucketKeys: "hash/<sha256>" holds
// the record (authentication reads it), "acct/<handle>/<prefix>" points
// to it from its account (listing and revocation read those).
func keyByHash(hash string) string { return "hash/" + hash }

func keyByAccount(handle, prefix string) string { return "acct/" + handle + "/" + prefix }

// errKeyCollision asks the caller to draw another key (a prefix already
// taken in the account, so rare it is a retry, not an error).
var errKeyCollision = errors.New("key prefix collision")

// putKey stores a new key record and its account index; the key's prefix
// must be new in its account.
func putKey(tx holon.Tx, k *auth.Key) error {
	var hash string
	if err := tx.Get(holon.BucketKeys, keyByAccount(k.Account, k.Prefix), &hash); err == nil {
		return errKeyCollision
	} else if !errors.Is(err, holon.ErrNotFound) {
		return err
	}
	var old auth.Key
	if err := tx.Get(holon.BucketKeys, keyByHash(k.Hash), &old); err == nil {
		return errKeyCollision
	} else if !errors.Is(err, holon.ErrNotFound) {
		return err
	}
	if err := tx.Put(holon.BucketKeys, keyByHash(k.Hash), k); err != nil {
		return err
	}
	return tx.Put(holon.BucketKeys, keyByAccount(k.Account, k.Prefix), k.Hash)
}

// accountKeys lists an account's key records, live or not, by prefix.
func accountKeys(tx holon.Tx, handle string) ([]*auth.Key, error) {
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
		k := new(auth.Key)
		if err := tx.Get(holon.BucketKeys, keyByHash(h), k); err != nil {
			return nil, fmt.Errorf("key %s of %s: %w", h[:8], handle, err)
		}
		out = append(out, k)
	}
	return out, nil
}

// revokeKey marks a key revoked at now.
func revokeKey(tx holon.Tx, k *auth.Key, now time.Time) error {
	t := now.UTC()
	k.Revoked = &t
	return tx.Put(holon.BucketKeys, keyByHash(k.Hash), k)
}

// revokeLiveKeys revokes every live key of an account at now and returns
// how many it revoked.
func revokeLiveKeys(tx holon.Tx, handle string, now time.Time) (int, error) {
	keys, err := accountKeys(tx, handle)
	if err != nil {
		return 0, err
	}
	revoked := 0
	for _, k := range keys {
		if k.Revoked == nil {
			if err := revokeKey(tx, k, now); err != nil {
				return revoked, err
			}
			revoked++
		}
	}
	return revoked, nil
}

// liveKeys counts an account's keys that may authenticate at now: what
// maxKeysPerAccount bounds.
func liveKeys(tx holon.Tx, handle string, now time.Time) (int, error) {
	keys, err := accountKeys(tx, handle)
	live := 0
	for _, k := range keys {
		if k.Live(now) {
			live++
		}
	}
	return live, err
}
