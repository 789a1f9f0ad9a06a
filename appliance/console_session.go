package appliance

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
)

// Console sessions. A browser that signs in (a pasted key, an email
// signup, a GitHub exchange) gets a random session id in the SessionCookie
// cookie: HttpOnly, SameSite=Lax, Secure on https. Lax, not Strict, so that
// a human who follows a link from another site (an assistant's "connect"
// button on claude.ai or chatgpt.com sends the browser to the consent
// page) arrives signed in; the browser still never sends it with another
// site's POST, every console GET only reads, and every form carries the
// double-submitted CSRF token (its cookie stays Strict) and is refused
// from another Origin. The store keeps only
// the id's SHA-256 (holon.BucketSessions), with the hash of the key that
// signed in, never the key itself. Every request re-checks that key, so a
// revoked key, an expired one or a disabled account ends its sessions at
// once.
//
// A handler of this package that needs the signed-in human (an OAuth
// consent page, say) calls a.sessionPrincipal(r): it returns the
// principal (kind token.KindHuman, account set; auth.KindAdmin for the operator) or
// nil when nobody is signed in, and checks nothing else. Send nobody to
// "/console/signin?next=<this page's path>": after signing in, the browser
// comes back. Forms on such a page carry webui.CSRFToken and are checked
// with webui.CheckCSRF, like the console's own.

// SessionCookie is the console's session cookie.
const SessionCookie = "holon_session"

// sessionTTL is how long a console session lasts (at most: a human key
// that expires earlier ends it earlier).
const sessionTTL = 7 * 24 * time.Hour

// sessionRecord is a console session (holon.BucketSessions, by the SHA-256
// of its id).
type sessionRecord struct {
	// Kind is token.KindHuman or "admin".
	Kind string `json:"kind"`
	// KeyHash is the SHA-256 of the key that signed in (hex).
	KeyHash string    `json:"key_hash"`
	Prefix  string    `json:"prefix,omitempty"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

func sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// sessionPrincipal is the principal of the request's console session, or
// nil when it carries none (or one that ended). On a dev gateway everyone
// is the dev principal.
func (a *api) sessionPrincipal(r *http.Request) (*auth.Principal, error) {
	h := a.hosted
	if h == nil {
		return auth.Dev(), nil
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 64 {
		return nil, nil
	}
	var s sessionRecord
	err = h.store.View(func(tx holon.Tx) error { return tx.Get(holon.BucketSessions, sessionKey(c.Value), &s) })
	if errors.Is(err, holon.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read console session: %w", err)
	}
	if !h.now().Before(s.Expires) {
		return nil, nil
	}
	if s.Kind == auth.KindAdmin {
		want, _ := hex.DecodeString(s.KeyHash)
		if h.adminKey == nil || subtle.ConstantTimeCompare(want, h.adminKey) != 1 {
			return nil, nil // the admin key changed since
		}
		return auth.Admin(), nil
	}
	p, err := h.accounts.KeyPrincipal(s.KeyHash, token.KindHuman, s.Prefix)
	var ge *holon.Error
	if errors.As(err, &ge) {
		return nil, nil // revoked, expired, or the account was disabled
	}
	return p, err
}

// startSession checks a key and, when it is a live human key or the admin
// key, stores a new session and sets its cookie.
func (a *api) startSession(w http.ResponseWriter, r *http.Request, key string) (*auth.Principal, error) {
	h := a.hosted
	if h == nil {
		return auth.Dev(), nil
	}
	now := h.now().UTC()
	s := sessionRecord{Created: now, Expires: now.Add(sessionTTL)}
	sum := sha256.Sum256([]byte(key))
	var p *auth.Principal
	if h.adminKey != nil && subtle.ConstantTimeCompare(sum[:], h.adminKey) == 1 {
		s.Kind, s.KeyHash = auth.KindAdmin, hex.EncodeToString(sum[:])
		p = auth.Admin()
	} else {
		kind, ok := token.ParseKey(key)
		switch {
		case !ok:
			return nil, holon.Errorf(web.CodeInvalidKey, "that is not a Holon key: paste a human key (hlk_h_…, %d characters) or the admin key", 6+token.BodyLen)
		case kind != token.KindHuman:
			return nil, holon.Errorf(web.CodeInvalidKey, "that is an agent key, which acts under one mandate: sign in with your human key (hlk_h_…)")
		}
		var err error
		if p, err = h.accounts.KeyPrincipal(token.Hash(key), kind, token.Prefix(key)); err != nil {
			return nil, err
		}
		s.Kind, s.KeyHash, s.Prefix = token.KindHuman, p.Key.Hash, p.Key.Prefix
		if p.Key.Expires != nil && p.Key.Expires.Before(s.Expires) {
			s.Expires = p.Key.Expires.UTC()
		}
	}
	id, err := sessionID(h.rand)
	if err != nil {
		return nil, err
	}
	err = h.store.Update(r.Context(), func(tx holon.Tx) error {
		// A sign-in replaces the browser's earlier session (no session
		// outlives the one that took its place), and clears some expired
		// ones, so that the bucket holds live sessions only.
		if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" && len(c.Value) <= 64 {
			if err := tx.Delete(holon.BucketSessions, sessionKey(c.Value)); err != nil {
				return err
			}
		}
		if err := dropExpiredSessions(tx, now, 100); err != nil {
			return err
		}
		return tx.Put(holon.BucketSessions, sessionKey(id), s)
	})
	if err != nil {
		return nil, fmt.Errorf("store console session: %w", err)
	}
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: id, Path: "/", HttpOnly: true, Secure: a.origin.HTTPS(r),
		SameSite: http.SameSiteLaxMode, Expires: s.Expires, MaxAge: int(s.Expires.Sub(now).Seconds()),
	})
	return p, nil
}

// endSession deletes the request's session and its cookie.
func (a *api) endSession(w http.ResponseWriter, r *http.Request) error {
	if a.hosted == nil {
		return nil
	}
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" && len(c.Value) <= 64 {
		err := a.hosted.store.Update(r.Context(), func(tx holon.Tx) error { return tx.Delete(holon.BucketSessions, sessionKey(c.Value)) })
		if err != nil {
			return fmt.Errorf("end console session: %w", err)
		}
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: a.origin.HTTPS(r),
		SameSite: http.SameSiteLaxMode, MaxAge: -1})
	return nil
}

// dropExpiredSessions deletes up to max sessions that have expired.
func dropExpiredSessions(tx holon.Tx, now time.Time, max int) error {
	var expired []string
	err := tx.ForEach(holon.BucketSessions, "", func(key string, raw json.RawMessage) (bool, error) {
		var s sessionRecord
		if err := json.Unmarshal(raw, &s); err != nil {
			return false, err
		}
		if !now.Before(s.Expires) {
			expired = append(expired, key)
		}
		return len(expired) < max, nil
	})
	for _, key := range expired {
		if err == nil {
			err = tx.Delete(holon.BucketSessions, key)
		}
	}
	return err
}

func sessionID(rand io.Reader) (string, error) {
	b := make([]byte, 32)
	if _, err := io.ReadFull(rand, b); err != nil {
		return "", fmt.Errorf("draw a session id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
