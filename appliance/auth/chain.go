package auth

import (
	"context"
	"net/http"

	"holon.dev/holon"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
)

// Verifier finds the principal of a bearer credential of the kind it
// issues; ok is false for a credential of another kind (the chain asks
// the next verifier).
type Verifier interface {
	Verify(r *http.Request, credential string) (p *Principal, ok bool, err error)
}

// VerifierFunc is a function that is a Verifier.
type VerifierFunc func(r *http.Request, credential string) (*Principal, bool, error)

// Verify calls f.
func (f VerifierFunc) Verify(r *http.Request, credential string) (*Principal, bool, error) {
	return f(r, credential)
}

// AdminKey is the verifier of the operator's admin key, given by its
// SHA-256 (token.Sum; nil: no operator), compared in constant time.
func AdminKey(sum []byte) Verifier {
	return VerifierFunc(func(_ *http.Request, credential string) (*Principal, bool, error) {
		if token.Equal(credential, sum) {
			return Admin(), true, nil
		}
		return nil, false, nil
	})
}

// Chain finds the principal of a request. A dev gateway's chain has one
// principal for everyone (Dev); a hosted gateway's reads Authorization:
// Bearer and asks each verifier in the order they were registered. A
// credential that is malformed, unknown, revoked, expired or of a
// disabled account is refused, even on public endpoints: a bad
// credential never passes silently.
type Chain struct {
	dev       bool
	verifiers []Verifier
}

// NewChain returns a chain with no verifier; dev makes every request the
// dev principal's.
func NewChain(dev bool) *Chain { return &Chain{dev: dev} }

// Register adds a verifier at the end of the chain.
func (c *Chain) Register(v Verifier) { c.verifiers = append(c.verifiers, v) }

// Dev reports whether this is a dev gateway's chain.
func (c *Chain) Dev() bool { return c.dev }

// Authenticate is the principal of r: the one handed in with the request
// (WithPrincipal: a console page asking in-process), the dev principal,
// nobody when no credential is sent, or the principal of the verifier
// that recognises the credential.
func (c *Chain) Authenticate(r *http.Request) (*Principal, error) {
	if p, ok := r.Context().Value(principalKey{}).(*Principal); ok {
		return p, nil
	}
	if c.dev {
		return Dev(), nil
	}
	if r.Header.Get("Authorization") == "" {
		return Nobody(), nil
	}
	credential, ok := web.Bearer(r)
	if !ok || credential == "" {
		return nil, holon.Errorf(web.CodeInvalidKey, "the Authorization header must be Bearer <key>")
	}
	for _, v := range c.verifiers {
		if p, ok, err := v.Verify(r, credential); ok || err != nil {
			return p, err
		}
	}
	return nil, holon.Errorf(web.CodeInvalidKey, "the key is not a Holon key (hlk_h_… or hlk_a_…, %d characters)", token.Len)
}

type principalKey struct{}

// WithPrincipal hands p in with a request made in-process (a console
// page, as its session's principal): the chain takes it as it is.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// InProcess reports whether a request was made in-process with its
// principal handed in (WithPrincipal): a console page's request, counted
// once as the page's own, never again as an API call.
func InProcess(ctx context.Context) bool {
	_, ok := ctx.Value(principalKey{}).(*Principal)
	return ok
}
