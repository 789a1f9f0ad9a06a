package appliance

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
)

// Principal kinds besides token.KindHuman and token.KindAgent.
const (
	kindNone  = "none"
	kindAdmin = "admin"
	// kindDev is the dev gateway's only principal: no authentication,
	// every resource visible.
	kindDev = "dev"
)

// principal is who sends a request (gateway.md §7 "Principals"). Every
// lookup a handler makes goes through its scope.
type principal struct {
	kind string
	// account is the handle a human or agent key belongs to.
	account string
	// mandate is the one mandate an agent key acts under.
	mandate string
	// key is the key's record (human and agent keys).
	key *keyRecord
}

// access says which principals may use an endpoint.
type access uint8

const (
	accessNone access = 1 << iota
	accessHuman
	accessAgent
	accessAdmin
	accessAnyone = accessNone | accessHuman | accessAgent | accessAdmin
)

func (p *principal) may(a access) bool {
	switch p.kind {
	case kindDev:
		return true
	case kindNone:
		return a&accessNone != 0
	case token.KindHuman:
		return a&accessHuman != 0
	case token.KindAgent:
		return a&accessAgent != 0
	case kindAdmin:
		return a&accessAdmin != 0
	}
	return false
}

// describe names what may use an endpoint, for refusals.
func (a access) describe() string {
	var names []string
	if a&accessHuman != 0 {
		names = append(names, "a human key (hlk_h_…)")
	}
	if a&accessAgent != 0 {
		names = append(names, "an agent key (hlk_a_…)")
	}
	if a&accessAdmin != 0 {
		names = append(names, "the admin key")
	}
	return strings.Join(names, " or ")
}

// scope is the name under which the principal's idempotency keys live: its
// key's hash ("per API key"), or "dev".
func (p *principal) scope() string {
	if p.key != nil {
		return p.key.Hash
	}
	return p.kind
}

// seesMandate reports whether a mandate (root or derived) is within the
// principal's scope: a human sees every mandate of its namespace, an
// agent key its one mandate and the sub-mandates derived from it.
func (p *principal) seesMandate(id string) bool {
	switch p.kind {
	case kindDev:
		return true
	case token.KindHuman:
		ns, _, _ := strings.Cut(id, "/")
		return ns == p.account
	case token.KindAgent:
		return id == p.mandate || derivedFrom(id, p.mandate)
	}
	return false
}

// derivedFrom reports whether id is a sub-mandate derived from root:
// root followed by one or more ".r<receipt>".
func derivedFrom(id, root string) bool {
	rest, ok := strings.CutPrefix(id, root+".")
	if !ok {
		return false
	}
	for _, seg := range strings.Split(rest, ".") {
		if _, ok := holon.ReceiptSeq(seg); !ok {
			return false
		}
	}
	return true
}

// seesAccount reports whether a balance is the principal's to see.
func (p *principal) seesAccount(name string) bool {
	switch p.kind {
	case kindDev, kindAdmin:
		return true
	case token.KindHuman:
		return name == p.account
	}
	return false
}

// handler is an endpoint that knows who is asking.
type handler func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *principal)

// handle registers an endpoint behind authentication, its access rule and
// the account's rate limit.
func (a *api) handle(method, path string, acc access, h handler) {
	what := method + " " + strings.NewReplacer(":ns", "{ns}", ":name", "{name}", ":id", "{id}", ":prefix", "{prefix}", ":handle", "{handle}").Replace(path)
	a.router.Handle(method, path, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		p, err := a.authenticate(r)
		if err != nil {
			a.challenge(w, r, true)
			a.fail(w, r, err)
			return
		}
		if sw, ok := w.(*statusWriter); ok {
			sw.p = p
		}
		if !p.may(acc) {
			if p.kind == kindNone {
				a.challenge(w, r, false)
				a.fail(w, r, holon.Errorf(web.CodeUnauthenticated, "%s needs %s: send it as Authorization: Bearer <key>", what, acc.describe()))
			} else {
				a.fail(w, r, holon.Errorf(web.CodeForbidden, "%s needs %s; this request carries %s", what, acc.describe(), p.describe()))
			}
			return
		}
		if a.hosted != nil && p.account != "" {
			if ok, wait := a.hosted.limits.account.Allow(p.account); !ok {
				a.tooMany(w, r, wait, "this account (all its keys together)")
				return
			}
		}
		h(w, r, ps, p)
	})
}

func (p *principal) describe() string {
	switch p.kind {
	case token.KindHuman:
		return "a human key"
	case token.KindAgent:
		return "an agent key"
	case kindAdmin:
		return "the admin key"
	}
	return "no key"
}

// authenticate finds the principal of a request. The dev gateway has one
// principal for everyone. A hosted gateway reads Authorization: Bearer: the
// admin key (compared in constant time), or an account key looked up by
// its SHA-256. A key that is malformed, unknown, revoked, expired or of a
// disabled account is refused, even on public endpoints: a bad key never
// passes silently.
func (a *api) authenticate(r *http.Request) (*principal, error) {
	if p, ok := r.Context().Value(consolePrincipalKey{}).(*principal); ok {
		return p, nil // a console page asking in-process (console.go)
	}
	if a.hosted == nil {
		return &principal{kind: kindDev}, nil
	}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return &principal{kind: kindNone}, nil
	}
	scheme, bearer, ok := strings.Cut(auth, " ")
	bearer = strings.TrimSpace(bearer)
	if !ok || !strings.EqualFold(scheme, "Bearer") || bearer == "" {
		return nil, holon.Errorf(web.CodeInvalidKey, "the Authorization header must be Bearer <key>")
	}
	h := a.hosted
	sum := sha256.Sum256([]byte(bearer))
	if h.adminKey != nil && subtle.ConstantTimeCompare(sum[:], h.adminKey) == 1 {
		return &principal{kind: kindAdmin}, nil
	}
	if strings.HasPrefix(bearer, oauthAccessMarker) {
		return a.tokenPrincipal(r, bearer) // oauth_token.go
	}
	kind, ok := token.ParseKey(bearer)
	if !ok {
		return nil, holon.Errorf(web.CodeInvalidKey, "the key is not a Holon key (hlk_h_… or hlk_a_…, %d characters)", 6+token.BodyLen)
	}
	return h.keyPrincipal(token.Hash(bearer), kind, token.Prefix(bearer))
}

// keyPrincipal is the principal of an account key, found by its hash: the
// key must be of the kind its text says, live, and of an enabled account.
func (h *hosted) keyPrincipal(hash, kind, prefix string) (*principal, error) {
	var rec keyRecord
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
	case !rec.live(h.now()):
		return nil, holon.Errorf(web.CodeInvalidKey, "key %s… expired at %s: sign in again for a new one", rec.Prefix, rec.Expires.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return &principal{kind: kind, account: rec.Account, mandate: rec.Mandate, key: &rec}, nil
}
