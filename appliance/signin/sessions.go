package signin

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
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
// from another Origin. The session store keeps only the id's SHA-256,
// with the hash of the key that signed in, never the key itself. Every
// request re-checks that key, so a revoked key, an expired one or a
// disabled account ends its sessions at once.
//
// A page that needs the signed-in human (an OAuth consent page, say) asks
// Principal(r): the principal (kind token.KindHuman, account set;
// auth.KindAdmin for the operator) or nil when nobody is signed in; it
// checks nothing else. Send nobody to "/console/signin?next=<this page's
// path>": after signing in, the browser comes back.

// SessionCookie is the console's session cookie.
const SessionCookie = "holon_session"

// SessionTTL is how long a console session lasts (at most: a human key
// that expires earlier ends it earlier).
const SessionTTL = 7 * 24 * time.Hour

func sessionKey(id string) string { return token.Hash(id) }

// sessionOf is the store key of the request's session cookie, "" when it
// carries none.
func sessionOf(r *http.Request) string {
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" && len(c.Value) <= 64 {
		return sessionKey(c.Value)
	}
	return ""
}

// Principal is the principal of the request's console session, or nil
// when it carries none (or one that ended).
func (s *Service) Principal(r *http.Request) (*auth.Principal, error) {
	key := sessionOf(r)
	if key == "" {
		return nil, nil
	}
	rec, err := s.sessions.Get(r.Context(), key)
	if errors.Is(err, holon.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read console session: %w", err)
	}
	if !s.now().Before(rec.Expires) {
		return nil, nil
	}
	if rec.Kind == auth.KindAdmin {
		want, _ := hex.DecodeString(rec.KeyHash)
		if s.adminKey == nil || subtle.ConstantTimeCompare(want, s.adminKey) != 1 {
			return nil, nil // the admin key changed since
		}
		return auth.Admin(), nil
	}
	p, err := s.accounts.KeyPrincipal(rec.KeyHash, token.KindHuman, rec.Prefix)
	var ge *holon.Error
	if errors.As(err, &ge) {
		return nil, nil // revoked, expired, or the account was disabled
	}
	return p, err
}

// Start checks a key and, when it is a live human key or the admin key,
// stores a new session (replacing the browser's earlier one) and sets its
// cookie.
func (s *Service) Start(w http.ResponseWriter, r *http.Request, key string) (*auth.Principal, error) {
	now := s.now().UTC()
	rec := Session{Created: now, Expires: now.Add(SessionTTL)}
	var p *auth.Principal
	if token.Equal(key, s.adminKey) {
		rec.Kind, rec.KeyHash = auth.KindAdmin, token.Hash(key)
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
		if p, err = s.accounts.KeyPrincipal(token.Hash(key), kind, token.Prefix(key)); err != nil {
			return nil, err
		}
		rec.Kind, rec.KeyHash, rec.Prefix = token.KindHuman, p.Key.Hash, p.Key.Prefix
		if p.Key.Expires != nil && p.Key.Expires.Before(rec.Expires) {
			rec.Expires = p.Key.Expires.UTC()
		}
	}
	id, err := sessionID(s.rand)
	if err != nil {
		return nil, err
	}
	// A sign-in replaces the browser's earlier session: no session
	// outlives the one that took its place.
	if err := s.sessions.Put(r.Context(), sessionKey(id), rec, sessionOf(r), now); err != nil {
		return nil, fmt.Errorf("store console session: %w", err)
	}
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: id, Path: "/", HttpOnly: true, Secure: s.origin.HTTPS(r),
		SameSite: http.SameSiteLaxMode, Expires: rec.Expires, MaxAge: int(rec.Expires.Sub(now).Seconds()),
	})
	return p, nil
}

// End deletes the request's session and its cookie.
func (s *Service) End(w http.ResponseWriter, r *http.Request) error {
	if key := sessionOf(r); key != "" {
		if err := s.sessions.Delete(r.Context(), key); err != nil {
			return fmt.Errorf("end console session: %w", err)
		}
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: s.origin.HTTPS(r),
		SameSite: http.SameSiteLaxMode, MaxAge: -1})
	return nil
}

func sessionID(rand io.Reader) (string, error) {
	b := make([]byte, 32)
	if _, err := io.ReadFull(rand, b); err != nil {
		return "", fmt.Errorf("draw a session id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Dev is the console sessions of a gateway without authentication:
// everyone is the dev principal, and there is nothing to start or end.
type Dev struct{}

// Principal is the dev principal.
func (Dev) Principal(*http.Request) (*auth.Principal, error) { return auth.Dev(), nil }

// Start signs nobody in: everyone is the dev principal.
func (Dev) Start(http.ResponseWriter, *http.Request, string) (*auth.Principal, error) {
	return auth.Dev(), nil
}

// End ends nothing.
func (Dev) End(http.ResponseWriter, *http.Request) error { return nil }
