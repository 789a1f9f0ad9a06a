package appliance

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"holon.dev/holon"
)

// Key kinds, as the key's own prefix says (hlk_h_…, hlk_a_…).
const (
	KindHuman = "human"
	KindAgent = "agent"
)

const (
	keyEntropy = 32 // bytes of randomness in a key
	// keyPrefixLen is how much of a key identifies it in listings and in
	// DELETE /v0/keys/{prefix}: "hlk_a_" and 8 characters (40 bits).
	keyPrefixLen = 6 + 8
	// maxKeysPerAccount bounds the live keys of an account.
	maxKeysPerAccount = 50
)

var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// keyBodyLen is the length of the encoded random part.
var keyBodyLen = keyEncoding.EncodedLen(keyEntropy)

func kindMarker(kind string) string {
	if kind == KindHuman {
		return "hlk_h_"
	}
	return "hlk_a_"
}

// newKey draws a key of a kind from rand: its marker, then 32 random bytes
// in lowercase base32 (52 characters).
func newKey(rand io.Reader, kind string) (string, error) {
	b := make([]byte, keyEntropy)
	if _, err := io.ReadFull(rand, b); err != nil {
		return "", fmt.Errorf("draw a key: %w", err)
	}
	return kindMarker(kind) + keyEncoding.EncodeToString(b), nil
}

// parseKey returns the kind of a well-formed account key.
func parseKey(s string) (kind string, ok bool) {
	var body string
	switch {
	case strings.HasPrefix(s, "hlk_h_"):
		kind, body = KindHuman, s[6:]
	case strings.HasPrefix(s, "hlk_a_"):
		kind, body = KindAgent, s[6:]
	default:
		return "", false
	}
	if len(body) != keyBodyLen {
		return "", false
	}
	for i := 0; i < len(body); i++ {
		if c := body[i]; !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return "", false
		}
	}
	return kind, true
}

// keyHash is the only form in which a key is stored: its SHA-256, in hex.
func keyHash(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

func keyPrefix(key string) string { return key[:keyPrefixLen] }

// keyLike matches what could be a key, or most of one, in free text.
// (The authorization server's codes and tokens, hlk_c_, hlk_t_ and hlk_r_,
// are cut alike.)
var keyLike = regexp.MustCompile(`hlk_[hactr]_[a-z2-7]{8}[a-z2-7]+`)

// redactKeys cuts anything that looks like a key down to its prefix, for
// text that is logged or echoed (a key pasted into a URL by mistake).
func redactKeys(s string) string {
	if !strings.Contains(s, "hlk_") {
		return s
	}
	return keyLike.ReplaceAllStringFunc(s, func(k string) string { return k[:keyPrefixLen] + "…" })
}

// keyRecord is what the store knows of a key: never the key itself.
type keyRecord struct {
	Prefix  string    `json:"prefix"`
	Kind    string    `json:"kind"`
	Account string    `json:"account"`
	Mandate string    `json:"mandate,omitempty"`
	Ask     bool      `json:"ask_in_client,omitempty"`
	Created time.Time `json:"created"`
	// Expires is set on human keys from GitHub sign-in (30 days), and on
	// the keys of OAuth connections (their newest refresh token's expiry).
	Expires *time.Time `json:"expires,omitempty"`
	Revoked *time.Time `json:"revoked,omitempty"`
	// Client is the self-declared name of the OAuth client a key was
	// made for on the consent page (oauth.go); "" for other keys.
	Client string `json:"client,omitempty"`
	// Hash is the key's SHA-256, the record's own key in the store.
	Hash string `json:"hash"`
}

// keyView is a key as listings show it: identified by its prefix.
type keyView struct {
	Prefix      string     `json:"prefix"`
	Kind        string     `json:"kind"`
	Mandate     string     `json:"mandate,omitempty"`
	AskInClient bool       `json:"ask_in_client"`
	Created     time.Time  `json:"created"`
	Expires     *time.Time `json:"expires,omitempty"`
	Client      string     `json:"client,omitempty"`
}

func (k *keyRecord) view() keyView {
	return keyView{Prefix: k.Prefix, Kind: k.Kind, Mandate: k.Mandate, AskInClient: k.Ask, Created: k.Created, Expires: k.Expires, Client: k.Client}
}

// live reports whether the key may authenticate at now.
func (k *keyRecord) live(now time.Time) bool {
	return k.Revoked == nil && (k.Expires == nil || now.Before(*k.Expires))
}

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
func putKey(tx holon.Tx, k *keyRecord) error {
	var hash string
	if err := tx.Get(holon.BucketKeys, keyByAccount(k.Account, k.Prefix), &hash); err == nil {
		return errKeyCollision
	} else if !errors.Is(err, holon.ErrNotFound) {
		return err
	}
	var old keyRecord
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
func accountKeys(tx holon.Tx, handle string) ([]*keyRecord, error) {
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
	out := make([]*keyRecord, 0, len(hashes))
	for _, h := range hashes {
		k := new(keyRecord)
		if err := tx.Get(holon.BucketKeys, keyByHash(h), k); err != nil {
			return nil, fmt.Errorf("key %s of %s: %w", h[:8], handle, err)
		}
		out = append(out, k)
	}
	return out, nil
}

// revokeKey marks a key revoked at now.
func revokeKey(tx holon.Tx, k *keyRecord, now time.Time) error {
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
